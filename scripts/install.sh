#!/usr/bin/env bash
# Installs what the project needs on a fresh machine, idempotently, one numbered step at a time
# (what each does, its log, and every 15 s that it is alive: scripts/lib.sh step_run).
#   bash scripts/install.sh --demo   what the demo runs, nothing more: Bun (pinned), the packages
#                                    from the lockfile, etcd and kube-apiserver (scripts/demo.sh)
#   bash scripts/install.sh          that, and what the tests use besides: kubelet, kube-proxy,
#                                    kube-scheduler, kube-controller-manager and kubectl for the
#                                    real-cluster tests (build-control-plane.sh cluster, about 11
#                                    minutes once), the Debian packages and
#                                    promtool and helm (install-test-deps.sh), the routing daemons
#                                    and L2 tools (install-network-tools.sh), the aarch64 Bun
#                                    runtime for the arm64 build (scripts/test.sh runs this)
#   bash scripts/install.sh --demo-cluster
#                                    what `demo.sh --scenario cluster` runs: --demo's, the real
#                                    cluster's commands and its Debian packages (install-cluster-tools.sh)
# EDGE_CCM_STEP_TOTAL: the caller's number of steps, when these are its first ones (demo.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

demo_only=false
demo_cluster=false
case "${1:-}" in
  '') ;;
  --demo) demo_only=true ;;
  --demo-cluster) demo_cluster=true ;;
  *) echo "usage: $0 [--demo|--demo-cluster]" >&2; exit 2 ;;
esac
# The test command also builds the real cluster's commands: one step each (build-control-plane.sh cluster).
cluster_steps=5
if $demo_only; then total=${EDGE_CCM_STEP_TOTAL:-4}
elif $demo_cluster; then total=${EDGE_CCM_STEP_TOTAL:-$((5 + cluster_steps))}
else total=${EDGE_CCM_STEP_TOTAL:-$((7 + cluster_steps))}
fi

if bun_ready; then step_say 1 "$total" "Bun $BUN_VERSION: installed already ($BUN)"
else step_run 1 "$total" "installing Bun $BUN_VERSION from the npm registry, verified against its pinned sha512" "$EDGE_CCM_LOG_DIR/install-bun.log" ensure_bun
fi
if packages_ready "$root"; then step_say 2 "$total" "packages: as bun.lock says already"
else step_run 2 "$total" "installing the packages of bun.lock" "$EDGE_CCM_LOG_DIR/install-packages.log" ensure_packages "$root"
fi
if $demo_only; then
  EDGE_CCM_STEP_FIRST=3 EDGE_CCM_STEP_TOTAL="$total" bash "$root/scripts/build-control-plane.sh" >/dev/null
  exit 0
fi
EDGE_CCM_STEP_FIRST=3 EDGE_CCM_STEP_TOTAL="$total" bash "$root/scripts/build-control-plane.sh" cluster >/dev/null
if $demo_cluster; then
  step_run $((5 + cluster_steps)) "$total" "the real cluster's Debian packages: containerd, runc, CNI plugins, conntrack, iptables, bird2" \
    "$EDGE_CCM_LOG_DIR/install-cluster-tools.log" bash "$root/scripts/install-cluster-tools.sh"
  exit 0
fi

step=$((5 + cluster_steps))
step_run "$step" "$total" "the tests' tools: Debian packages (podman, qemu, systemd tools...), promtool and helm built from their Go modules" \
  "$EDGE_CCM_LOG_DIR/install-test-deps.log" bash "$root/scripts/install-test-deps.sh"
step_run $((step + 1)) "$total" "the network tests' tools: bird2, frr, gobgpd, arping, ndisc6" \
  "$EDGE_CCM_LOG_DIR/install-network-tools.log" bash "$root/scripts/install-network-tools.sh"
# The aarch64 Bun runtime, so `bun run build` cross-compiles dist/edge-ccm-linux-arm64 offline.
step_run $((step + 2)) "$total" "the aarch64 Bun runtime for the arm64 build" \
  "$EDGE_CCM_LOG_DIR/fetch-bun-runtime.log" bash "$root/scripts/fetch-bun-runtime.sh" linux-aarch64
