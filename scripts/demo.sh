#!/usr/bin/env bash
# The README's main-job command: installs only what the demo runs (Bun, packages, etcd and
# kube-apiserver: scripts/install.sh --demo), builds the binary, runs the demo. Six numbered
# steps (twelve for --scenario cluster); the long ones name their log and say every 15 s that
# they are alive.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
# --scenario cluster runs real nodes (containerd, kubelets, kube-proxy, pods in network
# namespaces): it needs root, and installs and builds more (install.sh --demo-cluster).
if [[ " $* " == *" --scenario cluster "* ]]; then
  [ "$(id -u)" -eq 0 ] || { echo "demo.sh --scenario cluster needs root (network namespaces, cgroups, containerd, kubelets)" >&2; exit 1; }
  total=12
  EDGE_CCM_STEP_TOTAL=$total bash scripts/install.sh --demo-cluster
else
  total=6
  EDGE_CCM_STEP_TOTAL=$total bash scripts/install.sh --demo
fi
step_run $((total - 1)) $total "building dist/edge-ccm (bun build --compile)" "$EDGE_CCM_LOG_DIR/build-edge-ccm.log" "$BUN" scripts/build.ts
step_say $total $total "running the demo (scripts/demo.ts $*)"
exec "$BUN" scripts/demo.ts "$@"
