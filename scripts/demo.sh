#!/usr/bin/env bash
# The README's main-job command: installs only what the demo runs (Bun, packages, etcd and
# kube-apiserver: scripts/install.sh --demo), builds the binary, runs the demo. Six numbered
# steps; the long ones name their log and say every 15 s that they are alive.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
EDGE_CCM_STEP_TOTAL=6 bash scripts/install.sh --demo
step_run 5 6 "building dist/edge-ccm (bun build --compile)" "$EDGE_CCM_LOG_DIR/build-edge-ccm.log" "$BUN" scripts/build.ts
step_say 6 6 "running the demo (scripts/demo.ts $*)"
exec "$BUN" scripts/demo.ts "$@"
