#!/usr/bin/env bash
# Makes (once) a Python virtual environment under .cache/ort-venv with onnxruntime, numpy and
# the tokenizers package from PyPI: the reference that the embedder's test and benchmark
# compare axocoatl's vectors and speed with. Idempotent; prints the venv's python on stdout.
# Exits non-zero with the reason on stderr when it cannot be made (no python3 venv, no PyPI):
# callers then skip the comparison and say so.
set -euo pipefail

PACKAGES=("onnxruntime==1.20.1" "numpy<2.3" "tokenizers==0.21.0")

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_root/.cache/ort-venv"
python="$venv/bin/python"
stamp="$venv/.ready-$(printf '%s ' "${PACKAGES[@]}" | sha256sum | cut -c1-16)"

log() { echo "ort-venv: $*" >&2; }

if [ -f "$stamp" ] && [ -x "$python" ]; then
    echo "$python"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { log "needs python3"; exit 1; }
# A lock, so tests running in parallel build the venv once.
mkdir -p "$repo_root/.cache"
exec 8>"$repo_root/.cache/ort-venv.lock"
flock 8
if [ -f "$stamp" ] && [ -x "$python" ]; then
    echo "$python"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2 || { log "python3 -m venv failed"; rm -rf "$venv"; exit 1; }
log "installing ${PACKAGES[*]}"
if ! "$python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2; then
    log "pip install failed"
    rm -rf "$venv"
    exit 1
fi
"$python" -c "import onnxruntime, numpy, tokenizers" >&2 || { log "import check failed"; exit 1; }
touch "$stamp"
echo "$python"
