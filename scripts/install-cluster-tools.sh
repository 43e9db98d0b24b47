#!/usr/bin/env bash
# What the real cluster's nodes run (test/harness/real-cluster.ts: test/e2e/real-cluster.test.ts
# and `scripts/demo.sh --scenario cluster`), from Debian, installed only when missing (quiet when
# everything is there): containerd and ctr (containerd), runc, the CNI plugins bridge, host-local,
# loopback and portmap (containernetworking-plugins), conntrack and iptables (kube-proxy's
# iptables mode), nsenter and unshare (util-linux), ip (iproute2), curl (the client's requests),
# BIRD 2 (bird2: the router edge-ccm's BGP speaker peers with).
# Each daemon is started by hand inside its namespace: the containerd and bird services the
# packages bring are kept from starting (apt_install in scripts/lib.sh) and, where systemd runs, disabled.
# Needs root and apt-get; exits non-zero otherwise.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

declare -A package_for=(
  [/usr/bin/containerd]=containerd [/usr/bin/ctr]=containerd [/usr/sbin/runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins [/usr/sbin/conntrack]=conntrack [/usr/sbin/iptables]=iptables
  [/usr/bin/nsenter]=util-linux [/usr/bin/unshare]=util-linux [/usr/sbin/ip]=iproute2 [/usr/bin/curl]=curl
  [/usr/sbin/bird]=bird2 [/usr/sbin/birdc]=bird2
)
declare -A wanted=()
for path in "${!package_for[@]}"; do
  [ -x "$path" ] || wanted[${package_for[$path]}]=1
done
[ ${#wanted[@]} -eq 0 ] && exit 0

apt_install install-cluster-tools "${!wanted[@]}"

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for unit in containerd.service bird.service; do
    if systemctl list-unit-files "$unit" >/dev/null 2>&1; then systemctl disable --now "$unit" >&2 || true; fi
  done
fi
