#!/usr/bin/env bash
# The anchors of the footprint and failover benches (issue 38): MetalLB's speaker and kube-vip,
# built from their Go modules (the module proxy is the only source a machine of this kind
# reaches), once, cached outside the clone. Nothing of them is committed or run by the tests.
# Prints, as its last line, where they are, as JSON: the two binaries, MetalLB's CRDs and both
# source trees as built (bench/anchors.ts reads it; bench/image-size.ts builds from the sources). About 5 minutes per binary on 2 cores the first time, instant after.
#
# - MetalLB v0.15.2 (go.universe.tf/metallb): v0.16.2 needs github.com/metallb/frr-k8s v0.0.27,
#   which the proxy here refuses, and v0.15.2's v0.0.20 too: frr-k8s is replaced by v0.0.21 (the
#   speaker's L2 path and native BGP mode do not use it). Its CRDs come from the same module.
# - kube-vip v1.0.0 (github.com/kube-vip/kube-vip): the newest version the proxy serves; the
#   checksum database has no entry for it, so its module sum is pinned here instead and checked.
# Both go.mod files name a toolchain (go1.24.x) that would be downloaded: the line is dropped and
# the local Go builds them (GOTOOLCHAIN=local).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

METALLB_VERSION=v0.15.2
KUBE_VIP_VERSION=v1.0.0
KUBE_VIP_SUM='h1:QvcGrTGziaBzM5tnhNWlsb9mI0tmF9gYh+VBfRDZ8w8='
DIR="$EDGE_CCM_CACHE/anchors/built"
METALLB_BIN="$DIR/metallb-speaker-$METALLB_VERSION"
METALLB_SRC="$DIR/src/metallb-$METALLB_VERSION"
METALLB_CRDS="$METALLB_SRC/config/crd/bases"
KUBE_VIP_BIN="$DIR/kube-vip-$KUBE_VIP_VERSION"
KUBE_VIP_SRC="$DIR/src/kube-vip-$KUBE_VIP_VERSION"

say() { echo "[anchors] $*" >&2; }
command -v go >/dev/null || { say "go is required to build the anchors (install the Go toolchain: https://go.dev/doc/install, or Debian's golang-go)"; exit 1; }
mkdir -p "$DIR"

# Copies module PATH@VERSION's source into DEST (made anew, writable), checking SUM when given.
module_source() {
  local path="$1" version="$2" dest="$3" sum="${4:-}" json dir
  json=$(GONOSUMDB="${sum:+$path}" go mod download -json "$path@$version")
  if printf '%s' "$json" | grep -q '"Error"'; then say "go mod download $path@$version failed: $json"; return 1; fi
  if [ -n "$sum" ] && ! printf '%s' "$json" | grep -qF "\"Sum\": \"$sum\""; then
    say "$path@$version: module sum is not the pinned $sum (scripts/install-anchors.sh); refusing it"; return 1
  fi
  dir=$(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$dest" && mkdir -p "$dest"
  cp -r "$dir/." "$dest/"
  chmod -R u+w "$dest"
  sed -i '/^toolchain/d' "$dest/go.mod"
}

metallb_build() {
  module_source go.universe.tf/metallb "$METALLB_VERSION" "$METALLB_SRC"
  echo 'replace github.com/metallb/frr-k8s => github.com/metallb/frr-k8s v0.0.21' >>"$METALLB_SRC/go.mod"
  (cd "$METALLB_SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -v -trimpath -o "$METALLB_BIN.tmp" ./speaker)
  mv "$METALLB_BIN.tmp" "$METALLB_BIN"
}

kube_vip_build() {
  module_source github.com/kube-vip/kube-vip "$KUBE_VIP_VERSION" "$KUBE_VIP_SRC" "$KUBE_VIP_SUM"
  (cd "$KUBE_VIP_SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -v -trimpath -o "$KUBE_VIP_BIN.tmp" .)
  mv "$KUBE_VIP_BIN.tmp" "$KUBE_VIP_BIN"
}

if [ -x "$METALLB_BIN" ] && [ -d "$METALLB_CRDS" ]; then
  step_say 1 2 "MetalLB's speaker $METALLB_VERSION: built already ($METALLB_BIN)"
else
  step_run 1 2 "building MetalLB's speaker $METALLB_VERSION from its Go module (first run only, about 5 minutes on 2 cores; cached in $DIR)" \
    "$EDGE_CCM_LOG_DIR/build-metallb-speaker-$METALLB_VERSION.log" metallb_build
fi
if [ -x "$KUBE_VIP_BIN" ] && [ -f "$KUBE_VIP_SRC/go.mod" ]; then
  step_say 2 2 "kube-vip $KUBE_VIP_VERSION: built already ($KUBE_VIP_BIN)"
else
  step_run 2 2 "building kube-vip $KUBE_VIP_VERSION from its Go module (first run only, about 5 minutes on 2 cores; cached in $DIR)" \
    "$EDGE_CCM_LOG_DIR/build-kube-vip-$KUBE_VIP_VERSION.log" kube_vip_build
fi

printf '{"metallbSpeaker":"%s","metallbCrds":"%s","metallbSrc":"%s","kubeVip":"%s","kubeVipSrc":"%s","versions":{"metallb":"%s","kubeVip":"%s"}}\n' \
  "$METALLB_BIN" "$METALLB_CRDS" "$METALLB_SRC" "$KUBE_VIP_BIN" "$KUBE_VIP_SRC" "$METALLB_VERSION" "$KUBE_VIP_VERSION"
