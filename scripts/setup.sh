# Shared set-up for scripts/serve and scripts/test: sourced, not run.
# Installs only when the project's dependency files changed since the last install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# ensure_python_env EXTRAS: a virtual environment with the project installed (editable);
# EXTRAS is `runtime` (no extras) or an extra of pyproject.toml such as `dev`.
ensure_python_env() {
  local extras="$1"
  local python="${PYTHON:-python3}"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "Python 3.11 or newer is needed (set PYTHON=...)" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
  local stamp="$VENV/.installed-$extras"
  local want; want="$(fingerprint "$ROOT/pyproject.toml")"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Installing Python packages ($extras)..." >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    local spec="$ROOT"
    [ "$extras" = runtime ] || spec="$ROOT[$extras]"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec"
    echo "$want" > "$stamp"
  fi
}

# ensure_node_packages DIR: `npm ci` in DIR when its lock file changed.
ensure_node_packages() {
  local dir="$ROOT/$1"
  command -v npm >/dev/null || { echo "Node.js 20 with npm is needed" >&2; exit 1; }
  local stamp="$dir/node_modules/.installed"
  local want; want="$(fingerprint "$dir/package-lock.json")"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Installing Node packages in $1..." >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" > "$stamp"
  fi
}
