#!/usr/bin/env bash
# Builds the llama.cpp anchor of bench/local_vs_llama_cpp.sh: llama-cpp-python from PyPI
# (its source distribution, which compiles llama.cpp for this CPU) in a venv under
# bench/.venv-llama-cpp (git-ignored). Idempotent: does nothing when the venv already
# imports the pinned version. Prints the venv's python on stdout.
#
#   bench/llama-cpp-setup.sh
#
# The build takes several minutes on 2 cores (CMAKE_BUILD_PARALLEL_LEVEL, default 2).
set -euo pipefail

version=0.3.36
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-llama-cpp"
py="$venv/bin/python"
if [ -x "$py" ] && "$py" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  echo "$py"
  exit 0
fi
python3 -m venv "$venv"
"$py" -m pip install --quiet --upgrade pip >&2
# No prebuilt wheel: the registry's source distribution built here, for this CPU.
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$py" -m pip install --quiet --no-binary llama-cpp-python "llama-cpp-python==$version" >&2
echo "$py"
