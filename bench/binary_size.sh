#!/usr/bin/env bash
# The size of the binary `cargo install` ships (the release profile: no debug info, no
# symbols), beside its goal and its floor (the binary with every symbol stripped: for the
# release binary, itself).
#
#   bench/binary_size.sh                     # builds the release binary first (a cold
#                                            # release build: tens of minutes on 2 cores)
#   bench/binary_size.sh PATH                # measures an existing release binary
#   bench/binary_size.sh --proxy PATH        # a binary of another profile (CI: the test
#                                            # build's), stripped as the release profile
#                                            # strips it
#
# Prints one line, `binary size: N MB (goal: at most 60 MB; fully stripped: M MB)`, and exits
# 1 when a release binary misses the goal (a proxy only reports: its own crate is built
# without optimization, so it runs larger than the release binary).
set -euo pipefail
cd "$(dirname "$0")/.."
what="release binary"
proxy=""
if [[ "${1:-}" == "--proxy" ]]; then
  proxy=1
  shift
fi
bin="${1:-}"
if [[ -z "$bin" ]]; then
  cargo build --release --locked --bin axocoatl >&2
  bin="${CARGO_TARGET_DIR:-target}/release/axocoatl"
fi
goal_mb=60
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "$proxy" ]]; then
  what="$(basename "$(dirname "$bin")") binary, stripped (a proxy for the release binary)"
  strip --strip-all -o "$work/measured" "$bin"
  bin="$work/measured"
fi
size=$(stat -c %s "$bin")
strip --strip-all -o "$work/floor" "$bin"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "binary size: $(mb "$size") MB, $what (goal: at most $goal_mb MB; fully stripped: $(mb "$(stat -c %s "$work/floor")") MB)"
[[ -n "$proxy" ]] || awk -v b="$size" -v g="$goal_mb" 'BEGIN { exit !(b <= g * 1048576) }'
