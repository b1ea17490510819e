#!/usr/bin/env bash
# Makes (once) a Python virtual environment under .cache/NAME with PACKAGES from PyPI, checks
# it with CHECK (a command run by bash in the venv's bin/ directory), and prints the venv's
# PROGRAM on stdout. Idempotent and safe to run from parallel tests (one flock per venv);
# remade when PACKAGES change. Exits non-zero with the reason on stderr when it cannot be made
# (no python3 venv, no PyPI): callers then say what they skip.
#
#   scripts/venv.sh NAME PROGRAM CHECK PACKAGE...
set -euo pipefail

name="$1" program="$2" check="$3"
shift 3
packages=("$@")

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_root/.cache/$name"
bin="$venv/bin/$program"
stamp="$venv/.ready-$(printf '%s ' "${packages[@]}" | sha256sum | cut -c1-16)"

log() { echo "$name: $*" >&2; }

if [ -f "$stamp" ] && [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { log "needs python3"; exit 1; }
mkdir -p "$repo_root/.cache"
exec 8>"$repo_root/.cache/$name.lock"
flock 8
if [ -f "$stamp" ] && [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2 || { log "python3 -m venv failed"; rm -rf "$venv"; exit 1; }
log "installing ${packages[*]}"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}" >&2; then
    log "pip install failed"
    rm -rf "$venv"
    exit 1
fi
(cd "$venv/bin" && bash -c "$check") >&2 || { log "check failed: $check"; exit 1; }
touch "$stamp"
echo "$bin"
