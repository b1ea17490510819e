#!/usr/bin/env bash
# Runs every test: fetches the offline model once (cached), installs Tesseract and what the
# OCR tests draw their images with from Debian's archive when missing, makes the Datasette
# the SQLite export's test serves its file with (once, in .cache/datasette-venv), then the
# whole workspace's tests, and ends with one summary line over all test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
# The models come from `axocoatl models fetch` of the debug build the tests use anyway.
cargo build --locked >&2
AXOCOATL_BIN="${CARGO_TARGET_DIR:-target}/debug/axocoatl" scripts/fetch-model.sh >&2
scripts/setup-ocr.sh
scripts/datasette-venv.sh >/dev/null
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
awk '$1 == "test" && $2 == "result:" {
  for (i = 1; i < NF; i++) {
    if ($(i + 1) == "passed;") passed += $i
    if ($(i + 1) == "failed;") failed += $i
  }
} END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
exit "$status"
