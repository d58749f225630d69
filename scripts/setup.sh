# Shared set-up for scripts/serve and scripts/test: sourced, not run.
# Installs only when the project's dependency files changed since the last install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# ensure_python_env EXTRAS [REQUIREMENT...]: a virtual environment ($VENV) with the project
# installed (editable); EXTRAS is `runtime` (no extras) or an extra of pyproject.toml such as
# `dev`. REQUIREMENTs are resolved with it, as pins (scripts/test-oldest-adk: `google-adk==2.11.*`).
ensure_python_env() {
  local extras="$1"
  shift
  local python="${PYTHON:-python3}"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "Python 3.11 or newer is needed (set PYTHON=...)" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
  local stamp="$VENV/.installed-$extras"
  local want; want="$(fingerprint "$ROOT/pyproject.toml")"
  if (($#)); then want="$want $*"; fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Installing Python packages ($extras; about a minute the first time)..." >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    local spec="$ROOT"
    [ "$extras" = runtime ] || spec="$ROOT[$extras]"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" "$@"
    echo "$want" > "$stamp"
  fi
}

# ensure_node_packages DIR [FILE...]: `npm ci` in DIR when its lock file (or a FILE, such as
# the client's tarball the playground installs) changed. ai 7 (scenarios/)
# declares node >=22; on Node 20 it works and npm only warns (EBADENGINE), so an
# `engine-strict=true` in the user's npmrc must not turn that into a failure.
ensure_node_packages() {
  local name="$1" dir="$ROOT/$1"
  shift
  command -v npm >/dev/null || { echo "Node.js 20 with npm is needed" >&2; exit 1; }
  local stamp="$dir/node_modules/.installed"
  local want; want="$(fingerprint "$dir/package-lock.json" "$@")"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Installing Node packages in $name (npm ci, ~30 s)..." >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false)
    echo "$want" > "$stamp"
  fi
}

# ensure_client_package: the client (client/) installed, built into client/dist (which the
# scenario runner imports) and packed, as npm publishes it, into CLIENT_TARBALL
# (client/adk-stream-protocol-client-<version>.tgz, gitignored), which the playground installs
# (`file:` dependency). Packs again when the client's sources changed; `npm pack` runs the
# client's `prepack` (a clean build). Fails when the tarball lacks its ESM or its types.
ensure_client_package() {
  ensure_node_packages client
  local dir="$ROOT/client"
  local version
  version="$(cd "$dir" && node -p 'require("./package.json").version')"
  CLIENT_TARBALL="$dir/adk-stream-protocol-client-$version.tgz"
  local stamp="$dir/node_modules/.packed"
  local want
  want="$(find "$dir/src" "$dir/package.json" "$dir/package-lock.json" "$dir/tsconfig.json" \
    "$dir/README.md" "$dir/LICENSE" -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$CLIENT_TARBALL" ] || [ ! -f "$dir/dist/ws-chat-transport.js" ] \
    || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Packing client (npm pack)..." >&2
    rm -f "$dir"/adk-stream-protocol-client-*.tgz
    (cd "$dir" && npm pack --silent >/dev/null)
    [ -f "$CLIENT_TARBALL" ] || { echo "npm pack did not write $CLIENT_TARBALL" >&2; exit 1; }
    local listing; listing="$(tar -tzf "$CLIENT_TARBALL")"
    local file
    for file in package/package.json package/dist/ws-chat-transport.js \
      package/dist/ws-chat-transport.d.ts; do
      grep -qx "$file" <<<"$listing" \
        || { echo "$CLIENT_TARBALL lacks $file" >&2; exit 1; }
    done
    echo "$want" > "$stamp"
  fi
}

# ensure_built DIR [SCRIPT OUT]: `npm run SCRIPT` (default `build`) in DIR when its sources (or
# the client's tarball, after ensure_client_package) changed since it last wrote DIR/OUT
# (default `dist`). The playground has two:
# `build` (ai 7, dist/) and `build:v6` (ai 6, dist-v6/, for the browser tests).
ensure_built() {
  local dir="$ROOT/$1" script="${2:-build}" out="${3:-dist}"
  local stamp="$dir/$out/.built"
  local want
  want="$(find "$dir/src" "$dir/index.html" "$dir/package.json" "$dir/package-lock.json" \
    "$dir/vite.config.js" "$dir"/tsconfig*.json "${CLIENT_TARBALL:-$ROOT/client/src}" \
    -type f -print0 2>/dev/null | sort -z | xargs -0 cat | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Building $1 (npm run $script: tsc + vite, ~15 s)..." >&2
    # Vite's log level `warn`: its list of the files it wrote is noise on a first run.
    (cd "$dir" && npm run "$script" --silent -- --logLevel warn)
    echo "$want" > "$stamp"
  fi
}

# ensure_fault_stores: PostgreSQL's server binaries and redis-server, which the fault tests
# (tests/faults) start privately on free ports; the machine's own services are never touched.
# Installed with apt-get when missing and this is root, as in CI.
ensure_fault_stores() {
  local missing=()
  compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing ${missing[*]} (apt-get) for the fault tests..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2 \
      || { echo "Could not install ${missing[*]} with apt-get" >&2; exit 1; }
  else
    echo "${missing[*]} missing: run 'sudo apt-get install ${missing[*]}'. Until then the" \
      "fault tests (tests/faults) skip, or fail under ADK_STREAM_TEST_REQUIRE_SERVICES=1." >&2
  fi
}

# ensure_chromium: Debian's `chromium`, the browser of the browser tests (tests/browser; they never
# download one). Installed with apt-get when missing and this is root, as in CI. CHROMIUM=path
# names another Chromium instead.
ensure_chromium() {
  [ -n "${CHROMIUM:-}" ] && return
  command -v chromium >/dev/null && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Chromium (apt-get) for the browser tests..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2 \
      || { echo "Could not install chromium with apt-get" >&2; exit 1; }
  else
    echo "Chromium is missing and installing it needs root: run 'sudo apt-get install chromium'" \
      "(or set CHROMIUM=/path/to/chromium). Until then the browser tests fail;" \
      "'scripts/test -m \"not browser\"' runs the others." >&2
  fi
}

# ensure_mermaid: Mermaid's minified build (npm's `mermaid`, MIT) in docs/assets/mermaid/
# (gitignored), which the docs site loads instead of material's CDN copy, so diagrams render
# offline. Fetched with `npm pack` at the version pinned here, checked against the registry's
# integrity hash of that version, and only the one file (and its licence) kept: none of the
# package's dependencies is needed in a browser. Fetched again when the version changes.
MERMAID_VERSION=11.17.2
MERMAID_INTEGRITY=sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg==
ensure_mermaid() {
  local dir="$ROOT/docs/assets/mermaid"
  [ "$(cat "$dir/.version" 2>/dev/null)" = "$MERMAID_VERSION" ] && [ -f "$dir/mermaid.min.js" ] && return
  command -v npm >/dev/null || { echo "Node.js 20 with npm is needed" >&2; exit 1; }
  echo "Fetching mermaid $MERMAID_VERSION for the docs site (npm pack)..." >&2
  local work; work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "mermaid@$MERMAID_VERSION" >/dev/null)
  local tarball="$work/mermaid-$MERMAID_VERSION.tgz"
  local got
  got="$(python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")"
  [ "$got" = "$MERMAID_INTEGRITY" ] \
    || { rm -rf "$work"; echo "mermaid-$MERMAID_VERSION.tgz: integrity $got, not $MERMAID_INTEGRITY" >&2; exit 1; }
  tar -xzf "$tarball" -C "$work" package/dist/mermaid.min.js package/LICENSE
  mkdir -p "$dir"
  mv "$work/package/dist/mermaid.min.js" "$work/package/LICENSE" "$dir/"
  echo "$MERMAID_VERSION" > "$dir/.version"
  rm -rf "$work"
}
