#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules (the only way this machine can get them:
# no release downloads), cached outside the clone so every later run, in any clone, is instant.
# Usage: scripts/build-control-plane.sh            builds what is missing, prints the bin dir
set -euo pipefail

K8S_VERSION="${EDGE_CCM_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${EDGE_CCM_ETCD_VERSION:-v3.6.8}"
CACHE_ROOT="${EDGE_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-ccm}"
BIN_DIR="$CACHE_ROOT/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$BIN_DIR"

command -v go >/dev/null || { echo "go is required to build kube-apiserver and etcd (install the Go toolchain)" >&2; exit 1; }

say() { echo "[control-plane] $*" >&2; }

build_etcd() {
  [ -x "$BIN_DIR/etcd" ] && return 0
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  say "building etcd $ETCD_VERSION (first run only; cached in $BIN_DIR)"
  cat >"$work/go.mod" <<MOD
module edgeccm.local/etcdbuild

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat >"$work/main.go" <<'GO'
// The etcd binary's own main only calls etcdmain.Main; its module has replace directives,
// so `go install` cannot build it directly.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN_DIR/etcd.tmp" . >&2)
  mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
}

# Bump when the way kube-apiserver is built changes, so cached binaries of an older recipe are rebuilt.
APISERVER_RECIPE="2: version stamped by -ldflags -X"

build_apiserver() {
  [ -x "$BIN_DIR/kube-apiserver" ] && [ "$(cat "$BIN_DIR/kube-apiserver.recipe" 2>/dev/null)" = "$APISERVER_RECIPE" ] && return 0
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  say "building kube-apiserver $K8S_VERSION (first run only, several minutes; cached in $BIN_DIR)"
  local gomod_file
  gomod_file=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # Staging modules are published as v0.X.Y; k8s.io/kubernetes replaces them with local paths.
  local staging_version="v0.${K8S_VERSION#v1.}"
  {
    echo "module edgeccm.local/apiserverbuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod_file" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$work/go.mod"
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; exit 1; })
  # What hack/lib/version.sh stamps in a release build, so /version and the binary's own
  # --version report the release (a plain module build says v0.0.0-master).
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local x=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w$x" -o "$BIN_DIR/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2)
  mv "$BIN_DIR/kube-apiserver.tmp" "$BIN_DIR/kube-apiserver"
  echo "$APISERVER_RECIPE" >"$BIN_DIR/kube-apiserver.recipe"
}

start=$(date +%s)
build_etcd
build_apiserver
say "ready in $(( $(date +%s) - start ))s: $BIN_DIR"
echo "$BIN_DIR"
