#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, idempotently: Bun (pinned), the
# packages from the lockfile, and the control-plane binaries the tests and the demo run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
ensure_bun
ensure_packages "$root"
bash "$root/scripts/build-control-plane.sh" >/dev/null
bash "$root/scripts/install-test-deps.sh"
bash "$root/scripts/install-network-tools.sh"
# The aarch64 Bun runtime, so `bun run build` cross-compiles dist/edge-ccm-linux-arm64 offline.
bash "$root/scripts/fetch-bun-runtime.sh" linux-aarch64 >/dev/null
