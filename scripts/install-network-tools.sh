#!/usr/bin/env bash
# The routing daemons the BGP tests peer with, installed from Debian only when missing
# (idempotent, quiet when everything is there): BIRD 2 (bird, birdc), FRR (zebra, bgpd, vtysh)
# and GoBGP (gobgpd, gobgp); iproute2 (ip) for the network namespaces and veth links.
# The L2 announcement tests ask from a client namespace with arping (package arping), ndisc6
# (ndisc6) and curl.
# The tests start every daemon by hand inside their own namespaces: the services the Debian
# packages would start in the machine's own network are kept from starting (a policy-rc.d that
# refuses every start while apt-get runs, unless the machine already has one) and, where systemd
# runs, disabled and stopped by unit name. Needs root and apt-get; exits non-zero otherwise.
set -euo pipefail

declare -A package_for=([/usr/sbin/bird]=bird2 [/usr/sbin/birdc]=bird2 [/usr/lib/frr/zebra]=frr [/usr/lib/frr/bgpd]=frr [/usr/bin/vtysh]=frr [/usr/bin/gobgpd]=gobgpd [/usr/bin/gobgp]=gobgpd [/usr/sbin/ip]=iproute2 [/usr/sbin/arping]=arping [/usr/bin/ndisc6]=ndisc6 [/usr/bin/curl]=curl)
declare -A wanted=()
for path in "${!package_for[@]}"; do
  [ -x "$path" ] || wanted[${package_for[$path]}]=1
done
[ ${#wanted[@]} -eq 0 ] && exit 0
missing=("${!wanted[@]}")

if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
  echo "install-network-tools: missing Debian packages ${missing[*]} (needs root and apt-get to install)" >&2
  exit 1
fi
echo "install-network-tools: installing ${missing[*]}" >&2

# invoke-rc.d asks /usr/sbin/policy-rc.d before starting a service; exit 101 = "not allowed".
# Ours lives only while apt-get runs; a machine's own policy (a container's) is left as it is.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# edge-ccm install-network-tools: no service starts while it installs routing daemons\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=1
fi
remove_policy() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap remove_policy EXIT

export DEBIAN_FRONTEND=noninteractive
# Another apt-get on the machine holds the dpkg lock for a while: wait for it rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2

# Where systemd is the init, keep the packaged units from ever starting in the root namespace.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for unit in bird.service frr.service gobgpd.service; do
    if systemctl list-unit-files "$unit" >/dev/null 2>&1; then
      systemctl disable --now "$unit" >&2 || true
    fi
  done
fi
