#!/usr/bin/env bash
# Makes (once) a Python virtual environment under .cache/ort-venv with onnxruntime, numpy and
# the tokenizers package from PyPI: the reference that the embedder's test and benchmark
# compare axocoatl's vectors and speed with. Prints the venv's python on stdout
# (scripts/venv.sh says the rest); callers skip the comparison and say so when it fails.
exec "$(dirname "${BASH_SOURCE[0]}")/venv.sh" ort-venv python \
    "./python -c 'import onnxruntime, numpy, tokenizers'" \
    "onnxruntime==1.20.1" "numpy<2.3" "tokenizers==0.21.0"
