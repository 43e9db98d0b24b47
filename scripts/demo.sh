#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds the binary, runs the demo.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
bash scripts/install.sh
"$BUN" scripts/build.ts
exec "$BUN" scripts/demo.ts "$@"
