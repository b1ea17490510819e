#!/usr/bin/env bash
# Installs what the benchmarks compare against (idempotent): ripgrep for the search benchmark.
set -euo pipefail
if ! command -v rg >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq ripgrep
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq ripgrep
  fi
fi
rg --version | head -1
