#!/usr/bin/env bash
# Runs every test: fetches the offline model once (cached), then the whole workspace's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-model.sh >&2
cargo test --workspace --locked "$@"
