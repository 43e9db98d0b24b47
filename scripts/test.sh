#!/usr/bin/env bash
# The README's test command: installs what is missing (Bun, packages, control-plane binaries, and
# what only the tests use: the real cluster's kubelet, kube-proxy, kube-scheduler,
# kube-controller-manager and kubectl, Debian packages, promtool, helm, the network tools; scripts/install.sh),
# type-checks, builds the binary the end-to-end tests run, then runs every test with bun test
# and prints a last line "N passed, N failed". Extra arguments go to bun test (e.g. a path).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
bash scripts/install.sh || { echo "install failed"; echo "0 passed, 1 failed"; exit 1; }

failed_steps=0
echo "== type check"
if ! node_modules/.bin/tsc --noEmit -p tsconfig.json; then echo "type check failed"; failed_steps=$((failed_steps + 1)); fi
echo "== build"
if ! "$BUN" scripts/build.ts --target all >/dev/null; then echo "build failed"; failed_steps=$((failed_steps + 1)); fi

echo "== tests"
log=$(mktemp); trap 'rm -f "$log"' EXIT
"$BUN" test --timeout "$BUN_TEST_TIMEOUT_MS" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# bun test ends with " N pass", " N fail" (and " N skip" / " N todo" when any): restate as one line.
count() { grep -E "^ *[0-9]+ $1\$" "$log" | tail -1 | tr -dc '0-9'; }
pass=$(count pass); fail=$(count fail); skip=$(count skip); todo=$(count todo)
pass=${pass:-0}; fail=${fail:-0}; skip=${skip:-0}; todo=${todo:-0}
[ "$status" -ne 0 ] && [ "$fail" -eq 0 ] && fail=1   # a crash or load error counts as a failure
fail=$((fail + failed_steps))
line="$pass passed, $fail failed"
[ $((skip + todo)) -gt 0 ] && line="$line, $((skip + todo)) skipped"
echo "$line"
[ "$fail" -eq 0 ] && [ "$status" -eq 0 ]
