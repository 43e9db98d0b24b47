#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules (the only way this machine can get them:
# no release downloads), cached outside the clone so every later run, in any clone, is instant.
# Usage: scripts/build-control-plane.sh            builds what is missing, prints the bin dir
#        scripts/build-control-plane.sh kubectl    also a kubectl of the same Kubernetes version
#                                                  (the demo prints its path; nothing needs it)
#        scripts/build-control-plane.sh kube-controller-manager
#                                                  also kube-controller-manager (bench/node-ipam.ts
#                                                  runs its node IPAM allocator)
#        scripts/build-control-plane.sh cluster    also what a cluster of real nodes needs
#                                                  (test/harness/real-cluster.ts): kubelet,
#                                                  kube-proxy, kube-scheduler, kube-controller-manager
#                                                  and kubectl; about 11 minutes once on 2 cores
# Several names may be given; each is built once and cached beside the API server.
# Each build is a numbered step with its log in ~/.cache/edge-ccm/logs (scripts/lib.sh step_run);
# EDGE_CCM_STEP_FIRST and EDGE_CCM_STEP_TOTAL number them within a caller's steps (install.sh).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

K8S_VERSION="${EDGE_CCM_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${EDGE_CCM_ETCD_VERSION:-v3.6.8}"
CACHE_ROOT="$EDGE_CCM_CACHE"
BIN_DIR="$CACHE_ROOT/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$BIN_DIR"

# The commands of a real cluster's nodes and control plane besides the API server.
CLUSTER_CMDS="kubelet kube-proxy kube-scheduler kube-controller-manager kubectl"
extra_cmds=()
for arg in "$@"; do
  case "$arg" in
    kubectl | kube-controller-manager | kubelet | kube-proxy | kube-scheduler) extra_cmds+=("$arg") ;;
    cluster) read -ra more <<<"$CLUSTER_CMDS"; extra_cmds+=("${more[@]}") ;;
    *) echo "usage: $0 [kubectl|kube-controller-manager|kubelet|kube-proxy|kube-scheduler|cluster]..." >&2; exit 2 ;;
  esac
done
# Each once, in the order given.
mapfile -t extra_cmds < <(printf '%s\n' "${extra_cmds[@]+"${extra_cmds[@]}"}" | awk 'NF && !seen[$0]++')
step=${EDGE_CCM_STEP_FIRST:-1}
total=${EDGE_CCM_STEP_TOTAL:-$((2 + ${#extra_cmds[@]}))}

command -v go >/dev/null || { echo "go is required to build kube-apiserver and etcd (install the Go toolchain)" >&2; exit 1; }

say() { echo "[control-plane] $*" >&2; }

etcd_build() {
  local work; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
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
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build -v -trimpath -ldflags='-s -w' -o "$BIN_DIR/etcd.tmp" .)
  mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
}

# Bump when the way kube-apiserver is built changes, so cached binaries of an older recipe are rebuilt.
APISERVER_RECIPE="2: version stamped by -ldflags -X"

# A module that requires k8s.io/kubernetes at K8S_VERSION and imports the command CMD
# (k8s.io/kubernetes/cmd/CMD), in DIR, tidied: what `go build` of that command needs.
k8s_module() {
  local dir="$1" cmd="$2" gomod_file
  gomod_file=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # Staging modules are published as v0.X.Y; k8s.io/kubernetes replaces them with local paths.
  local staging_version="v0.${K8S_VERSION#v1.}"
  {
    echo "module edgeccm.local/${cmd}build"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod_file" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<GO
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/$cmd"
GO
  (cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
}

# What hack/lib/version.sh stamps in a release build, so /version and the binary's own --version
# report the release (a plain module build says v0.0.0-master).
k8s_version_ldflags() {
  local minor="${K8S_VERSION#v1.}" x="" pkg
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "-s -w$x"
}

# Builds k8s.io/kubernetes/cmd/CMD into BIN_DIR/CMD.
k8s_build() {
  local cmd="$1" work; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  k8s_module "$work" "$cmd"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags="$(k8s_version_ldflags)" -o "$BIN_DIR/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
}

apiserver_build() {
  k8s_build kube-apiserver
  echo "$APISERVER_RECIPE" >"$BIN_DIR/kube-apiserver.recipe"
}

start=$(date +%s)
if [ -x "$BIN_DIR/etcd" ]; then
  step_say "$step" "$total" "etcd $ETCD_VERSION: built already ($BIN_DIR)"
else
  step_run "$step" "$total" "building etcd $ETCD_VERSION from its Go module (first run only, a few minutes; cached in $BIN_DIR)" \
    "$EDGE_CCM_LOG_DIR/build-etcd-$ETCD_VERSION.log" etcd_build
fi
step=$((step + 1))
if [ -x "$BIN_DIR/kube-apiserver" ] && [ "$(cat "$BIN_DIR/kube-apiserver.recipe" 2>/dev/null)" = "$APISERVER_RECIPE" ]; then
  step_say "$step" "$total" "kube-apiserver $K8S_VERSION: built already ($BIN_DIR)"
else
  step_run "$step" "$total" "building kube-apiserver $K8S_VERSION from its Go module (first run only, about 9 minutes on 2 cores; cached in $BIN_DIR)" \
    "$EDGE_CCM_LOG_DIR/build-kube-apiserver-$K8S_VERSION.log" apiserver_build
fi
for extra_cmd in "${extra_cmds[@]+"${extra_cmds[@]}"}"; do
  step=$((step + 1))
  if [ -x "$BIN_DIR/$extra_cmd" ]; then
    step_say "$step" "$total" "$extra_cmd $K8S_VERSION: built already ($BIN_DIR/$extra_cmd)"
  else
    step_run "$step" "$total" "building $extra_cmd $K8S_VERSION from the same module (a few minutes after the API server's build; cached in $BIN_DIR)" \
      "$EDGE_CCM_LOG_DIR/build-$extra_cmd-$K8S_VERSION.log" k8s_build "$extra_cmd"
  fi
done
# Only after a build: a run that found everything built says so in its step lines already.
[ $(( $(date +%s) - start )) -lt 2 ] || say "ready in $(( $(date +%s) - start ))s: $BIN_DIR"
echo "$BIN_DIR"
