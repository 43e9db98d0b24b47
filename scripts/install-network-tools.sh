#!/usr/bin/env bash
# The routing daemons the BGP tests peer with, installed from Debian only when missing
# (idempotent, quiet when everything is there): BIRD 2 (bird, birdc), FRR (zebra, bgpd, vtysh)
# and GoBGP (gobgpd, gobgp); iproute2 (ip) for the network namespaces and veth links.
# The L2 announcement tests ask from a client namespace with arping (package arping), ndisc6
# (ndisc6) and curl; the asymmetric heartbeat-loss test filters packets in a node namespace with
# nft (nftables). With --vip-comparison: keepalived and haproxy, for the control-plane VIP bench's
# comparison (bench/vip-keepalived.ts, as kubeadm's HA guide configures them).
# The tests start every daemon by hand inside their own namespaces: the services the Debian
# packages would start in the machine's own network are kept from starting (apt_install in
# scripts/lib.sh) and, where systemd runs, disabled and stopped by unit name. Needs root and
# apt-get; exits non-zero otherwise.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

declare -A package_for=([/usr/sbin/bird]=bird2 [/usr/sbin/birdc]=bird2 [/usr/lib/frr/zebra]=frr [/usr/lib/frr/bgpd]=frr [/usr/bin/vtysh]=frr [/usr/bin/gobgpd]=gobgpd [/usr/bin/gobgp]=gobgpd [/usr/sbin/ip]=iproute2 [/usr/sbin/arping]=arping [/usr/bin/ndisc6]=ndisc6 [/usr/bin/curl]=curl [/usr/sbin/nft]=nftables)
# With --vip-comparison also keepalived and haproxy: only the VIP bench's comparison runs them
# (scripts/bench-vip-keepalived), so the test command does not install them.
if [ "${1:-}" = --vip-comparison ]; then package_for[/usr/sbin/keepalived]=keepalived; package_for[/usr/sbin/haproxy]=haproxy; fi
declare -A wanted=()
for path in "${!package_for[@]}"; do
  [ -x "$path" ] || wanted[${package_for[$path]}]=1
done
[ ${#wanted[@]} -eq 0 ] && exit 0
missing=("${!wanted[@]}")

apt_install install-network-tools "${missing[@]}"

# Where systemd is the init, keep the packaged units from ever starting in the root namespace.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for unit in bird.service frr.service gobgpd.service keepalived.service haproxy.service; do
    if systemctl list-unit-files "$unit" >/dev/null 2>&1; then
      systemctl disable --now "$unit" >&2 || true
    fi
  done
fi
