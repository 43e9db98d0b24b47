#!/usr/bin/env bash
# Debian packages the deploy tests need, installed only when missing (idempotent, quiet when
# everything is there): systemd-analyze (package systemd) checks deploy/systemd/edge-ccm.service;
# unshare (util-linux), chroot (coreutils) and ldd (libc-bin) run the scratch image's files in an
# empty root; readelf (binutils) checks the arm64 image against its binary's ELF headers. Needs root and apt-get; prints what it could not install and exits non-zero.
set -euo pipefail

declare -A package_for=([systemd-analyze]=systemd [unshare]=util-linux [chroot]=coreutils [ldd]=libc-bin [readelf]=binutils)
missing=()
for tool in "${!package_for[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_for[$tool]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: missing Debian packages ${missing[*]} (needs root and apt-get to install)" >&2
  exit 1
fi
echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# systemd is installed for its tools only: nothing here boots it or starts its services.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
