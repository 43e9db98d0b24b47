#!/usr/bin/env bash
# Fetches the Bun runtime of the pinned version for another platform from the npm registry
# (package @oven/bun-PLATFORM), once, into the cache; prints the binary's path. The build then
# cross-compiles offline with it as the compile executable path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
platform="${1:?usage: fetch-bun-runtime.sh linux-aarch64}"
dir="$EDGE_CCM_CACHE/bun-runtime-$BUN_VERSION-$platform"
if [ ! -x "$dir/package/bin/bun" ]; then
  echo "[install] Bun $BUN_VERSION runtime for $platform" >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "@oven/bun-$platform@$BUN_VERSION" >/dev/null 2>&1)
  mkdir -p "$dir"
  tar -xzf "$tmp"/oven-bun-*.tgz -C "$dir"
  chmod +x "$dir/package/bin/bun"
fi
echo "$dir/package/bin/bun"
