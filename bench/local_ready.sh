#!/usr/bin/env bash
# What the offline default model costs a one-shot `send`: a turn of one token in a fresh
# session, wall time and peak RSS of the whole process (median of ROUNDS), loading the model
# from its ready-to-run copy (the default from the second load on) and widening its weights
# at load (the first load, or a cache directory that cannot be written). Beside them, the
# floors: reading the model file and its ready copy from the page cache, the weights candle
# holds (the ready copy's size), and the same `send` answered by a scripted provider.
#
#   bench/local_ready.sh [BIN] [ROUNDS]
#
# BIN defaults to the release binary under CARGO_TARGET_DIR (or target/); the model comes
# from `axocoatl models fetch` (AXOCOATL_MODEL or the user's cache).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/release/axocoatl}"
rounds="${2:-5}"
[ -x "$bin" ] || { echo "no binary at $bin: run cargo build --release first" >&2; exit 1; }
model="${AXOCOATL_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$model" ] || { echo "no model at $model: run axocoatl models fetch first" >&2; exit 1; }
bin="$(realpath "$bin")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" init "$work/repo" >/dev/null
mkdir -p "$work/cache" "$work/blocked/axocoatl"
# A cache whose models directory is a file: no ready copy can be made, every load widens.
touch "$work/blocked/axocoatl/models"

# Prints "median wall s, median peak RSS MiB" of ROUNDS runs of "$@".
measure() {
  local i mid
  : >"$work/all"
  for ((i = 0; i < rounds; i++)); do
    /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>&1 || true
    tail -n 1 "$work/t" >>"$work/all"
  done
  mid=$(((rounds + 1) / 2))
  printf "%s s wall, %s MiB peak RSS\n" \
    "$(cut -d' ' -f1 "$work/all" | sort -n | sed -n "${mid}p")" \
    "$(($(cut -d' ' -f2 "$work/all" | sort -n | sed -n "${mid}p") / 1024))"
}
# One-token sends in a fresh session, with the ready copy (after the first) and without.
one_token=(send -n -o temperature=0 -o max_tokens=1 hi)
from_copy=(env AXOCOATL_MODEL="$model" XDG_CACHE_HOME="$work/cache" "$bin" -C "$work/repo" "${one_token[@]}")
widening=(env AXOCOATL_MODEL="$model" XDG_CACHE_HOME="$work/blocked" "$bin" -C "$work/repo" "${one_token[@]}")

"${from_copy[@]}" >/dev/null 2>&1 # makes the ready copy
copy="$(ls "$work"/cache/axocoatl/models/ready/*.q8_0.gguf)"
echo "local model: $(basename "$model"), $rounds rounds each, $(nproc) cores"
echo "send, model from its ready copy:   $(measure "${from_copy[@]}")"
echo "send, weights widened at load:     $(measure "${widening[@]}")"
echo "floor: read the model file:        $(measure cat "$model" | cut -d, -f1)"
echo "floor: read the ready copy:        $(measure cat "$copy" | cut -d, -f1)"
echo "floor: weights candle holds:       $(($(stat -c %s "$copy") / 1048576)) MiB (the ready copy) + the token embedding widened to f32"
# The same one-shot send answered by a scripted provider: the process, the repository, the
# ledger's syncs, without a model or the embedder (that cache holds neither).
"$bin" init "$work/scripted" >/dev/null
printf 'replies:\n  - match: "hi"\n    text: "Hello."\n' >"$work/scripted/replies.yaml"
printf 'providers:\n  s: {kind: script, script: replies.yaml}\nagents:\n  - id: a\n    provider: s\n' \
  >"$work/scripted/axocoatl.yaml"
echo "floor: send, no model (scripted):  $(measure env XDG_CACHE_HOME="$work/cache" "$bin" -C "$work/scripted" send -n hi)"
