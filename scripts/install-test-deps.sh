#!/usr/bin/env bash
# What the deploy tests need, installed only when missing (idempotent, quiet when everything is
# there). Debian packages:
#   systemd-analyze (systemd) checks deploy/systemd/edge-ccm.service; unshare (util-linux),
#   chroot (coreutils) and ldd (libc-bin) run the scratch image's files in an empty root; readelf
#   (binutils) checks the arm64 image against its binary's ELF headers;
#   podman and runc build and run deploy/container/Dockerfile (test/integration/podman-image);
#   mmdebstrap makes the minimal Debian roots they start from (the image's glibc stage, the root
#   systemd boots in), systemd-nspawn (systemd-container) boots that root
#   (test/integration/systemd-boot);
#   qemu-aarch64-static (qemu-user-static) with the arm64 loader and libc (libc6:arm64, after
#   `dpkg --add-architecture arm64`) runs dist/edge-ccm-linux-arm64 (test/integration/arm64-qemu).
# What the real cluster's nodes run (install-cluster-tools.sh: containerd, runc, the CNI plugins...).
# And promtool, built from its Go module (no release download) into ~/.cache/edge-ccm/promtool-*,
# which checks and unit-tests docs/observability/edge-ccm.rules.yaml.
# Needs root and apt-get for the packages, Go for promtool; prints what it could not install and
# exits non-zero.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

# promtool: the Prometheus release whose rule syntax the docs use (Prometheus 3.x is module v0.3xx).
PROMTOOL_MODULE_VERSION="${EDGE_CCM_PROMTOOL_VERSION:-v0.316.0}"
PROMTOOL="$EDGE_CCM_CACHE/promtool-$PROMTOOL_MODULE_VERSION/promtool"

declare -A package_for=(
  [systemd-analyze]=systemd [unshare]=util-linux [chroot]=coreutils [ldd]=libc-bin [readelf]=binutils
  [podman]=podman [/usr/sbin/runc]=runc [mmdebstrap]=mmdebstrap [systemd-nspawn]=systemd-container
  [qemu-aarch64-static]=qemu-user-static [/lib/ld-linux-aarch64.so.1]=libc6:arm64
  [/usr/bin/lxd]=lxd [/usr/bin/lxc]=lxd-client [/bin/busybox]=busybox-static
)
declare -A wanted=()
for tool in "${!package_for[@]}"; do
  if [[ "$tool" == /* ]]; then [ -e "$tool" ] && continue; else command -v "$tool" >/dev/null 2>&1 && continue; fi
  wanted[${package_for[$tool]}]=1
done

if [ ${#wanted[@]} -gt 0 ]; then
  # systemd and systemd-container for their tools only: nothing here boots the host's systemd.
  apt_install install-test-deps "${!wanted[@]}"
fi

bash "$root/scripts/install-cluster-tools.sh"

if [ ! -x "$PROMTOOL" ]; then
  command -v go >/dev/null || { echo "install-test-deps: go is required to build promtool (install the Go toolchain)" >&2; exit 1; }
  echo "install-test-deps: building promtool $PROMTOOL_MODULE_VERSION from its Go module (first run only; cached in $(dirname "$PROMTOOL"))" >&2
  mkdir -p "$(dirname "$PROMTOOL")"
  GOBIN="$(dirname "$PROMTOOL")" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_MODULE_VERSION" >&2
fi

# helm, built from its Go module (no release download) into ~/.cache/edge-ccm/helm-*: lints,
# renders and installs deploy/helm/edge-ccm (test/integration/helm-chart.test.ts) and renders
# deploy/kubernetes from it (scripts/gen-manifests). The version is read by scripts/helm.ts.
HELM_VERSION="${EDGE_CCM_HELM_VERSION:-v3.22.0}"
HELM="$EDGE_CCM_CACHE/helm-$HELM_VERSION/helm"
if [ ! -x "$HELM" ]; then
  command -v go >/dev/null || { echo "install-test-deps: go is required to build helm (install the Go toolchain)" >&2; exit 1; }
  echo "install-test-deps: building helm $HELM_VERSION from its Go module (first run only; cached in $(dirname "$HELM"))" >&2
  mkdir -p "$(dirname "$HELM")"
  # As helm's Makefile: the Kubernetes version `helm template` and `helm lint` assume is the one
  # of the client-go it is built with (else v1.20, which the chart's kubeVersion refuses).
  helm_gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2] }' "$helm_gomod")
  [ -n "$k8s_minor" ] || { echo "install-test-deps: no k8s.io/client-go in helm $HELM_VERSION's go.mod ($helm_gomod)" >&2; exit 1; }
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN="$(dirname "$HELM")" CGO_ENABLED=0 go install -trimpath -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
fi
