#!/usr/bin/env bash
# Builds the pod images of the real cluster (test/harness/real-cluster.ts, demo --scenario
# cluster): no registry is reachable here, so each is a static Go program (test/images/NAME/main.go,
# stdlib only) packed as a docker-archive tar that `ctr -n k8s.io images import` reads:
#   http-echo.tar  edge-ccm.local/http-echo:1  answers HTTP with its pod name and the client address
#   pause.tar      edge-ccm.local/pause:1      the pods' sandbox (containerd's sandbox_image)
# The format, written here: manifest.json (config and layer names, the repo tag), the image
# config (entrypoint, rootfs.diff_ids = the sha256 of each layer tar), and one layer tar holding
# the binary. Cached by the sources' hash in ~/.cache/edge-ccm/pod-images/<hash>; prints that dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
command -v go >/dev/null || { echo "build-pod-images: go is required (install the Go toolchain)" >&2; exit 1; }

IMAGES="http-echo pause"
hash=$(cd "$root/test/images" && cat "$root/scripts/build-pod-images.sh" */main.go | sha256sum | cut -c1-16)
out="$EDGE_CCM_CACHE/pod-images/$hash"
if [ -f "$out/done" ]; then echo "$out"; exit 0; fi

arch=$(go env GOARCH)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for name in $IMAGES; do
  img="$work/$name"; mkdir -p "$img/rootfs"
  (cd "$root/test/images/$name" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$img/rootfs/$name" main.go)
  # A fixed mtime and owner: the same binary gives the same layer digest.
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$img/layer.tar" -C "$img/rootfs" .
  layer_sha=$(sha256sum "$img/layer.tar" | cut -d' ' -f1)
  cat >"$img/config.json" <<JSON
{"architecture":"$arch","os":"linux","config":{"Entrypoint":["/$name"],"Env":["PATH=/"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$layer_sha"]},"history":[{"created_by":"scripts/build-pod-images.sh"}]}
JSON
  config_sha=$(sha256sum "$img/config.json" | cut -d' ' -f1)
  mv "$img/config.json" "$img/$config_sha.json"
  mkdir "$img/$layer_sha"; mv "$img/layer.tar" "$img/$layer_sha/layer.tar"
  echo "[{\"Config\":\"$config_sha.json\",\"RepoTags\":[\"edge-ccm.local/$name:1\"],\"Layers\":[\"$layer_sha/layer.tar\"]}]" >"$img/manifest.json"
  tar --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/$name.tar" -C "$img" manifest.json "$config_sha.json" "$layer_sha"
done
mkdir -p "$out"
for name in $IMAGES; do mv "$work/$name.tar" "$out/$name.tar"; done
touch "$out/done"
echo "$out"
