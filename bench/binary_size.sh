#!/usr/bin/env bash
# The size of the binary `cargo install` ships (the release profile), beside its goal and
# its floor: the same binary with every symbol stripped.
#
#   bench/binary_size.sh              # builds the release binary first (minutes when cold)
#   bench/binary_size.sh PATH         # measures an existing binary
#
# Prints one line: `binary size: N MB (goal: at most 60 MB; fully stripped: M MB)`, and
# exits 1 when the goal is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-}"
if [[ -z "$bin" ]]; then
  cargo build --release --locked --bin axocoatl >&2
  bin="${CARGO_TARGET_DIR:-target}/release/axocoatl"
fi
goal_mb=60
size=$(stat -c %s "$bin")
stripped_copy="$(mktemp)"
trap 'rm -f "$stripped_copy"' EXIT
floor="?"
if command -v strip >/dev/null; then
  strip --strip-all -o "$stripped_copy" "$bin"
  floor=$(awk -v b="$(stat -c %s "$stripped_copy")" 'BEGIN { printf "%.1f", b / 1048576 }')
fi
mb=$(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "binary size: $mb MB (goal: at most $goal_mb MB; fully stripped: $floor MB)"
awk -v b="$size" -v g="$goal_mb" 'BEGIN { exit !(b <= g * 1048576) }'
