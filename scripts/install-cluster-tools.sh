#!/usr/bin/env bash
# What the real cluster's nodes run (test/harness/real-cluster.ts: test/e2e/real-cluster.test.ts
# and `scripts/demo.sh --scenario cluster`), from Debian, installed only when missing (quiet when
# everything is there): containerd and ctr (containerd), runc, the CNI plugins bridge, host-local,
# loopback and portmap (containernetworking-plugins), conntrack and iptables (kube-proxy's
# iptables mode), nsenter and unshare (util-linux), ip (iproute2), curl (the client's requests).
# Each daemon is started by hand inside its node's namespaces: the containerd service the package
# brings is kept from starting (apt_install in scripts/lib.sh) and, where systemd runs, disabled.
# Needs root and apt-get; exits non-zero otherwise.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

declare -A package_for=(
  [/usr/bin/containerd]=containerd [/usr/bin/ctr]=containerd [/usr/sbin/runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins [/usr/sbin/conntrack]=conntrack [/usr/sbin/iptables]=iptables
  [/usr/bin/nsenter]=util-linux [/usr/bin/unshare]=util-linux [/usr/sbin/ip]=iproute2 [/usr/bin/curl]=curl
)
declare -A wanted=()
for path in "${!package_for[@]}"; do
  [ -x "$path" ] || wanted[${package_for[$path]}]=1
done
[ ${#wanted[@]} -eq 0 ] && exit 0

apt_install install-cluster-tools "${!wanted[@]}"

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 && systemctl list-unit-files containerd.service >/dev/null 2>&1; then
  systemctl disable --now containerd.service >&2 || true
fi
