#!/usr/bin/env bash
# A minimal Debian bookworm root as a tarball, made once with mmdebstrap from Debian's packages
# and cached under ~/.cache/edge-ccm/debian-roots, keyed by a hash of its recipe (so a changed
# recipe makes a new one and a warm run costs nothing). Prints the tarball's path.
# Usage: scripts/debian-root.sh ARCH VARIANT PACKAGE[,PACKAGE...]
#   scripts/debian-root.sh arm64 extract libc6     the libc6 files only (no maintainer scripts, so
#                                                  any architecture, no emulator): an image's glibc base
#   scripts/debian-root.sh amd64 minbase systemd,systemd-sysv,dbus   a root systemd boots in
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

[ $# -eq 3 ] || { echo "usage: $0 ARCH VARIANT PACKAGE[,PACKAGE...]" >&2; exit 2; }
arch="$1" variant="$2" packages="$3"
suite=bookworm
# The release the binaries are tested on (glibc 2.36), with its security and point-release updates.
sources=(
  "deb http://deb.debian.org/debian $suite main"
  "deb http://deb.debian.org/debian $suite-updates main"
  "deb http://deb.debian.org/debian-security $suite-security main"
)
command -v mmdebstrap >/dev/null || { echo "mmdebstrap is missing: run scripts/install-test-deps.sh (Debian mmdebstrap)" >&2; exit 1; }

recipe="v1 $suite $arch $variant $packages ${sources[*]}"
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
dir="$EDGE_CCM_CACHE/debian-roots"
tarball="$dir/$suite-$arch-$variant-$key.tar"
if [ ! -s "$tarball" ]; then
  mkdir -p "$dir"
  echo "debian-root: making $suite $arch ($variant: $packages) with mmdebstrap, once; cached as $tarball" >&2
  tmp="$tarball.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  # stdin closed: mmdebstrap would read extra sources from a non-terminal stdin.
  mmdebstrap --quiet --variant="$variant" --architectures="$arch" --include="$packages" \
    --format=tar "$suite" "$tmp" "${sources[@]}" </dev/null >&2
  mv "$tmp" "$tarball"
fi
echo "$tarball"
