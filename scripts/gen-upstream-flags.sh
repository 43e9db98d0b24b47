#!/usr/bin/env bash
# Regenerates what edge-ccm knows of the upstream cloud-controller-manager's command line, from the
# k8s.io/cloud-provider module itself (scripts/upstream-flags/main.go, built against it):
#   src/options/upstream-flags.ts          every flag by help section, and the feature gates
#   src/server/tls/upstream-tls-names.ts       the TLS cipher suite and version names the serving flags accept
#   test/fixtures/upstream-configz.json    upstream's /configz body for sample command lines
# Usage: bash scripts/gen-upstream-flags.sh [v0.36.3]   (needs Go and the Go module proxy; ~8 min cold)
set -euo pipefail
VERSION="${1:-v0.36.3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$ROOT/scripts/upstream-flags/main.go" "$work/"
cat >"$work/go.mod" <<MOD
module edgeccm.local/upstreamflags

go 1.26

require (
	k8s.io/cloud-provider $VERSION
	k8s.io/apiserver $VERSION
	k8s.io/component-base $VERSION
	k8s.io/controller-manager $VERSION
)
MOD
(cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2 && go build -o upstream-flags . >&2)
"$work/upstream-flags" surface >"$work/surface.json"

mkdir -p "$ROOT/test/fixtures"
UPSTREAM_VERSION="$VERSION" bun "$ROOT/scripts/upstream-flags/write.ts" "$work/upstream-flags" "$work/surface.json"
echo "wrote src/options/upstream-flags.ts, src/server/tls/upstream-tls-names.ts and test/fixtures/upstream-configz.json from k8s.io/cloud-provider@$VERSION" >&2
