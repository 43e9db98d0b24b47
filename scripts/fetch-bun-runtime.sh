#!/usr/bin/env bash
# Fetches the Bun runtime of the pinned version for another platform from the npm registry
# (package @oven/bun-PLATFORM), once, into the cache, verified against its pinned sha512
# (scripts/lib.sh bun_integrity); prints the binary's path. The build then cross-compiles
# offline with it as the compile executable path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
platform="${1:?usage: fetch-bun-runtime.sh linux-aarch64}"
integrity=$(bun_integrity "$platform")
dir="$EDGE_CCM_CACHE/bun-runtime-$BUN_VERSION-$platform"
# A runtime cached without its verified integrity (or another one) is fetched again.
if ! verified_package_present "$dir" "$integrity" || [ ! -f "$dir/package/bin/bun" ]; then
  echo "[install] Bun $BUN_VERSION runtime for $platform" >&2
  fetch_verified_package "@oven/bun-$platform@$BUN_VERSION" "$integrity" "$dir"
  chmod +x "$dir/package/bin/bun"
fi
echo "$dir/package/bin/bun"
