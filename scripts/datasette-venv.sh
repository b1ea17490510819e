#!/usr/bin/env bash
# Makes (once) a Python virtual environment under .cache/datasette-venv with Datasette from
# PyPI: what the SQLite export's test serves an exported file with, to check that Datasette
# finds its tables, links and full-text index. Idempotent; prints the venv's `datasette` on
# stdout. Exits non-zero with the reason on stderr when it cannot be made (no python3 venv,
# no PyPI).
set -euo pipefail

PACKAGES=("datasette==0.65.5")

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_root/.cache/datasette-venv"
datasette="$venv/bin/datasette"
stamp="$venv/.ready-$(printf '%s ' "${PACKAGES[@]}" | sha256sum | cut -c1-16)"

log() { echo "datasette-venv: $*" >&2; }

if [ -f "$stamp" ] && [ -x "$datasette" ]; then
    echo "$datasette"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { log "needs python3"; exit 1; }
# A lock, so tests running in parallel build the venv once.
mkdir -p "$repo_root/.cache"
exec 8>"$repo_root/.cache/datasette-venv.lock"
flock 8
if [ -f "$stamp" ] && [ -x "$datasette" ]; then
    echo "$datasette"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2 || { log "python3 -m venv failed"; rm -rf "$venv"; exit 1; }
log "installing ${PACKAGES[*]}"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2; then
    log "pip install failed"
    rm -rf "$venv"
    exit 1
fi
"$datasette" --version >&2 || { log "datasette does not run"; exit 1; }
touch "$stamp"
echo "$datasette"
