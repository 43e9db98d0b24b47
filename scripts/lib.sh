# Shared by the project's shell scripts: where the pinned Bun and the caches live.
# Bun is pinned here and in package.json ("packageManager"); both must say the same version.
BUN_VERSION=1.4.5
EDGE_CCM_CACHE="${EDGE_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-ccm}"
BUN_HOME="$EDGE_CCM_CACHE/bun-$BUN_VERSION"
BUN="$BUN_HOME/node_modules/.bin/bun"

# bun test's default per-test timeout in the scripts that run the suite (test.sh, test-matrix):
# integration tests start real daemons on a loaded 2-core machine. Passed as --timeout because
# Bun 1.4.5 reads no `timeout` from bunfig.toml, and a preload's setDefaultTimeout() reaches only
# the first test file of a run (oven-sh/bun#7789, #43787).
BUN_TEST_TIMEOUT_MS=60000

# The sha512 of each Bun runtime tarball (npm package @oven/bun-PLATFORM@BUN_VERSION) the
# project uses, as the npm registry publishes it (`npm view @oven/bun-linux-x64@1.4.5
# dist.integrity`), recorded once: a tarball that does not match is refused before it is
# unpacked. Change together with BUN_VERSION.
bun_integrity() {
  case "$1" in
    linux-x64) echo 'sha512-IWX9BELoGHAUtMonkeSaNaZwXzRk+oDw6Mk+HBFXd3KHYIBNBsIGRupMZPcgNoDbJpLu6gAJjIoIVPZtt1aJ1g==' ;;
    linux-aarch64) echo 'sha512-4BXmsSKnjOrlGWqZV4x/oWa7AVoR+B6lCXddMzOAXBIm3t50eslg9wb66gmtW1AamEQ1l1CDvmmruysEhqOWMg==' ;;
    *) echo "no pinned integrity for the Bun runtime of platform '$1' (scripts/lib.sh bun_integrity)" >&2; return 1 ;;
  esac
}

# This machine's Bun platform name (the @oven/bun-PLATFORM package).
bun_host_platform() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo linux-x64 ;;
    Linux-aarch64 | Linux-arm64) echo linux-aarch64 ;;
    *) echo "no pinned Bun runtime for $(uname -s) $(uname -m)" >&2; return 1 ;;
  esac
}

# Fails, naming the package, unless FILE's sha512 is the pinned INTEGRITY (sha512-BASE64).
verify_integrity() {
  local file="$1" integrity="$2" name="$3" expected actual
  expected=$(printf '%s' "${integrity#sha512-}" | base64 -d 2>/dev/null | od -An -v -tx1 | tr -d ' \n')
  actual=$(sha512sum "$file" | cut -d' ' -f1)
  if [ "${integrity%%-*}" = sha512 ] && [ ${#expected} -eq 128 ] && [ "$actual" = "$expected" ]; then return 0; fi
  echo "[install] INTEGRITY MISMATCH: $name: the downloaded tarball is not the one pinned in scripts/lib.sh; refusing it" >&2
  echo "[install]   pinned: $integrity" >&2
  echo "[install]   got:    sha512-$(printf "$(printf '%s' "$actual" | sed 's/../\\x&/g')" | base64 -w0)" >&2
  return 1
}

# Downloads an npm package's tarball (`npm pack`: nothing in it runs), checks it against
# INTEGRITY and unpacks it to DEST (DEST/package/...), recording the integrity in DEST/.integrity.
# DEST appears whole or not at all.
fetch_verified_package() {
  local spec="$1" integrity="$2" dest="$3" tmp tgz
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>"$tmp/npm.log"); then
    cat "$tmp/npm.log" >&2; rm -rf "$tmp"
    echo "[install] npm pack $spec failed" >&2; return 1
  fi
  tgz=$(ls "$tmp"/*.tgz)
  if ! verify_integrity "$tgz" "$integrity" "$spec"; then rm -rf "$tmp"; return 1; fi
  mkdir -p "$tmp/unpacked"
  tar -xzf "$tgz" -C "$tmp/unpacked"
  echo "$integrity" >"$tmp/unpacked/.integrity"
  mkdir -p "$(dirname "$dest")"
  # An older copy is moved aside, not deleted in place: a process may still be reading it.
  [ ! -e "$dest" ] || mv "$dest" "$tmp/previous"
  mv "$tmp/unpacked" "$dest"
  rm -rf "$tmp"
}

# True when DIR holds a package unpacked by fetch_verified_package from a tarball of INTEGRITY.
verified_package_present() {
  [ -f "$1/.integrity" ] && [ "$(cat "$1/.integrity")" = "$2" ]
}

# True when the pinned Bun is installed (verified, linked, reporting its version): nothing to do.
bun_ready() {
  local platform integrity dir
  platform=$(bun_host_platform) && integrity=$(bun_integrity "$platform") || return 1
  dir="$BUN_HOME/verified/bun-$platform"
  verified_package_present "$dir" "$integrity" && [ "$(readlink "$BUN")" = "../../verified/bun-$platform/package/bin/bun" ] &&
    [ "$("$BUN" --version 2>/dev/null)" = "$BUN_VERSION" ]
}

# Installs the pinned Bun, once: its platform package's tarball from the npm registry, verified
# against bun_integrity. Not `npm install bun`, whose postinstall script would run unverified code.
# $BUN stays a symlink, swapped in one step, so a Bun already running from the cache is not disturbed.
ensure_bun() {
  local platform integrity dir
  platform=$(bun_host_platform) && integrity=$(bun_integrity "$platform") || return 1
  dir="$BUN_HOME/verified/bun-$platform"
  if bun_ready; then return 0; fi
  command -v npm >/dev/null || { echo "npm is required to install Bun $BUN_VERSION (apt-get install npm)" >&2; return 1; }
  echo "[install] Bun $BUN_VERSION into $BUN_HOME" >&2
  if ! verified_package_present "$dir" "$integrity"; then
    fetch_verified_package "@oven/bun-$platform@$BUN_VERSION" "$integrity" "$dir" || return 1
  fi
  chmod +x "$dir/package/bin/bun"
  mkdir -p "$BUN_HOME/node_modules/.bin"
  local name
  for name in bun bunx; do
    ln -sfn "../../verified/bun-$platform/package/bin/bun" "$BUN_HOME/node_modules/.bin/$name.new"
    mv -Tf "$BUN_HOME/node_modules/.bin/$name.new" "$BUN_HOME/node_modules/.bin/$name"
  done
  [ "$("$BUN" --version)" = "$BUN_VERSION" ] || { echo "[install] $BUN does not report version $BUN_VERSION" >&2; return 1; }
}

# True when the project's packages match bun.lock: nothing to install.
packages_ready() {
  [ -f "$1/node_modules/.edge-ccm-lock" ] && cmp -s "$1/bun.lock" "$1/node_modules/.edge-ccm-lock"
}

# Installs the project's packages from bun.lock, only when they are missing or stale.
ensure_packages() {
  local root="$1"
  if ! packages_ready "$root"; then
    echo "[install] packages from bun.lock" >&2
    (cd "$root" && "$BUN" install --frozen-lockfile >&2)
    cp "$root/bun.lock" "$root/node_modules/.edge-ccm-lock"
  fi
}

# Installs the Debian packages PACKAGE... (the caller has found them missing); WHO names the
# script in messages. Needs root and apt-get, else fails naming the packages. While apt-get runs,
# no packaged service starts on this machine (a policy-rc.d refusing every start, unless the
# machine has its own policy, which is left as it is); a dpkg lock held by another apt-get is
# waited for. A package of a foreign architecture (NAME:arm64) adds that architecture first.
# A subshell, so its EXIT trap (removing our policy-rc.d) is its own.
apt_install() (
  set -euo pipefail
  who="$1"; shift
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
    echo "$who: missing Debian packages $* (needs root and apt-get to install)" >&2
    exit 1
  fi
  echo "$who: installing $*" >&2
  # invoke-rc.d asks /usr/sbin/policy-rc.d before starting a service; exit 101 = "not allowed".
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# edge-ccm %s: no service starts while it installs\nexit 101\n' "$who" >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  for package in "$@"; do
    case "$package" in
      *:*) arch="${package##*:}"
        dpkg --print-foreign-architectures | grep -qx "$arch" || dpkg --add-architecture "$arch" ;;
    esac
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >&2
)

# --- Progress of the long steps of a first run (scripts/install.sh, demo.sh, build-control-plane.sh) ---
# Each step says which of how many it is and what it does; a step that runs a while puts its
# detail in a log (named on its first line) and says every EDGE_CCM_PROGRESS_SECONDS (15) that it
# is alive: the time so far and the log's last line. On the console: a few lines per step, never
# the tools' own output (e.g. hundreds of "go: downloading" lines).
PROGRESS_SECONDS="${EDGE_CCM_PROGRESS_SECONDS:-15}"
EDGE_CCM_LOG_DIR="${EDGE_CCM_LOG_DIR:-$EDGE_CCM_CACHE/logs}"

# "8 min 48 s" or "12 s".
format_seconds() {
  if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

# step_say N TOTAL TEXT: one progress line, "[N/TOTAL] TEXT", on stderr.
step_say() {
  echo "[$1/$2] $3" >&2
}

# step_run N TOTAL WHAT LOG COMMAND...: runs COMMAND (a shell function too) with all its output
# in LOG; says WHAT and where the log is, that it is alive while it runs, and how long it took.
# On failure: the end of the log, and COMMAND's exit status.
step_run() {
  local n="$1" total="$2" what="$3" log="$4" start=$SECONDS next pid rc last
  shift 4
  mkdir -p "$(dirname "$log")"
  : >"$log"
  step_say "$n" "$total" "$what (log: $log)"
  next=$PROGRESS_SECONDS
  ( "$@" ) >>"$log" 2>&1 </dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge "$next" ]; then
      next=$((next + PROGRESS_SECONDS))
      last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-110)
      echo "      ... $(format_seconds $((SECONDS - start)))${last:+, last: $last}" >&2
    fi
  done
  if wait "$pid"; then rc=0; else rc=$?; fi
  if [ "$rc" -ne 0 ]; then
    step_say "$n" "$total" "FAILED after $(format_seconds $((SECONDS - start))): $what; the end of $log:"
    tail -n 20 "$log" | sed 's/^/      /' >&2
    return "$rc"
  fi
  step_say "$n" "$total" "done in $(format_seconds $((SECONDS - start)))"
}
