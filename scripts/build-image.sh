#!/usr/bin/env bash
# Builds the edge-ccm image for linux/amd64 and linux/arm64 from deploy/container/Dockerfile with
# podman, into one OCI archive: an image index with both platforms' manifests, labelled with the
# version (package.json), the git revision, the source and the licence.
# Usage: scripts/build-image.sh [--local-base] [OUTPUT]     (default dist/edge-ccm-VERSION.oci.tar)
#   --local-base  no registry needed: each platform's glibc stage is a local image of Debian's
#                 libc6 package (scripts/debian-root.sh, cached), passed as --build-arg
#                 GLIBC_IMAGE=<its image ID>; without it the Dockerfile's pinned base is pulled.
# Load it with `podman load -i OUTPUT` (or `skopeo copy oci-archive:OUTPUT docker://REGISTRY/...`).
# Needs the binaries (`bun run build`). podman runs with a storage of its own in a temp dir,
# removed at the end: nothing is left in the machine's image store. Run as root.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

local_base=0
if [ "${1:-}" = --local-base ]; then local_base=1; shift; fi
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/package.json")
out="${1:-$root/dist/edge-ccm-$version.oci.tar}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

command -v podman >/dev/null || { echo "podman is missing: run scripts/install-test-deps.sh (Debian podman)" >&2; exit 1; }
for arch in amd64 arm64; do
  [ -f "$root/dist/edge-ccm-linux-$arch" ] || { echo "dist/edge-ccm-linux-$arch is missing: run \`bun run build\` first" >&2; exit 1; }
done
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
# The remote's URL without any user:password@ in it.
source=$(git -C "$root" remote get-url origin 2>/dev/null | sed -E 's#^([a-z+]+://)[^/@]*@#\1#' || true)

# Short names: podman refuses a runroot path longer than 50 characters.
work=$(mktemp -d "${TMPDIR:-/tmp}/eib.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tmp"
# cgroupfs: no systemd to ask for cgroups; engine state under the temp dir, not /run/libpod.
cat >"$work/containers.conf" <<CONF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$work/tmp"
CONF
export CONTAINERS_CONF="$work/containers.conf" TMPDIR="$work/tmp"
# vfs: plain directories, so nothing is mounted that could outlive the run.
pm=(podman --root "$work/storage" --runroot "$work/r" --storage-driver vfs)

list="localhost/edge-ccm:$version"
"${pm[@]}" manifest create "$list" >/dev/null
for arch in amd64 arm64; do
  base=()
  if [ "$local_base" = 1 ]; then
    tarball=$(bash "$root/scripts/debian-root.sh" "$arch" extract libc6)
    id=$("${pm[@]}" import --quiet --os linux --arch "$arch" --message "Debian bookworm libc6 ($arch), for the glibc stage" "$tarball")
    base=(--pull=never --build-arg "GLIBC_IMAGE=${id#sha256:}")
  fi
  echo "build-image: linux/$arch" >&2
  "${pm[@]}" build --quiet --platform "linux/$arch" --manifest "$list" "${base[@]}" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "SOURCE=${source:-unknown}" \
    -f "$root/deploy/container/Dockerfile" "$root" >/dev/null
done
mkdir -p "$(dirname "$out")"
rm -f "$out"
"${pm[@]}" manifest push --quiet --all "$list" "oci-archive:$out:edge-ccm:$version" >&2
echo "$out"
