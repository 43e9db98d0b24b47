# Shared by the project's shell scripts: where the pinned Bun and the caches live.
# Bun is pinned here and in package.json ("packageManager"); both must say the same version.
BUN_VERSION=1.4.5
EDGE_CCM_CACHE="${EDGE_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-ccm}"
BUN_HOME="$EDGE_CCM_CACHE/bun-$BUN_VERSION"
BUN="$BUN_HOME/node_modules/.bin/bun"

# Installs the pinned Bun from the npm registry (its platform package carries the binary), once.
ensure_bun() {
  if [ -x "$BUN" ] && [ "$("$BUN" --version 2>/dev/null)" = "$BUN_VERSION" ]; then return 0; fi
  command -v npm >/dev/null || { echo "npm is required to install Bun $BUN_VERSION (apt-get install npm)" >&2; return 1; }
  echo "[install] Bun $BUN_VERSION into $BUN_HOME" >&2
  mkdir -p "$BUN_HOME"
  npm install --prefix "$BUN_HOME" --no-audit --no-fund --loglevel=error "bun@$BUN_VERSION" >&2
  "$BUN" --version >/dev/null
}

# Installs the project's packages from bun.lock, only when they are missing or stale.
ensure_packages() {
  local root="$1"
  if [ ! -f "$root/node_modules/.edge-ccm-lock" ] || ! cmp -s "$root/bun.lock" "$root/node_modules/.edge-ccm-lock"; then
    echo "[install] packages from bun.lock" >&2
    (cd "$root" && "$BUN" install --frozen-lockfile >&2)
    cp "$root/bun.lock" "$root/node_modules/.edge-ccm-lock"
  fi
}
