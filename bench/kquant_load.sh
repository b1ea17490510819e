#!/usr/bin/env bash
# Load time and peak RSS of the `local` engine on k-quant files beside the same model in
# Q8_0 and as downloaded (Q4_1): the default model re-quantized by the requantize example,
# each file loaded in a fresh process that then reads 13 tokens and generates 16 tokens.
#
#   bench/kquant_load.sh [ROUNDS]
#
# SmolLM2-135M's rows are 576 values wide, which do not divide into the k-quants' 256-value
# super-blocks: in its k-quant files (as in llama.cpp's own) only the 30 ffn_down matrices
# (rows of 1,536) are k-quants, the rest stay Q4_1. The Q8_0 file has every matrix in Q8_0.
# The load is timed in wall-clock seconds, which other work on the machine stretches: the
# CPU seconds of the whole process (load, 13 tokens read, 16 generated) are printed beside
# it, and the Q4_1 file's (nothing converted) are the part that is not the load's.
# Builds what it runs (cargo build --release under CARGO_TARGET_DIR, or target/).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
target="${CARGO_TARGET_DIR:-target}"
model="${AXOCOATL_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$model" ] || { echo "no model at $model: run axocoatl models fetch first" >&2; exit 1; }
cargo build --release --locked --quiet -p axocoatl-infer --example requantize --example greedy
requantize="$(realpath "$target/release/examples/requantize")"
greedy="$(realpath "$target/release/examples/greedy")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
kinds=(Q8_0 Q4_K Q6_K Q5_K Q3_K Q2_K)
for kind in "${kinds[@]}"; do
  "$requantize" "$model" "$work/$kind.gguf" "$kind" | sed "s|$work/||"
done
cp "$model" "$work/Q4_1.gguf"
# A prompt of 13 token ids: what they say does not change load time or memory.
prompt=(1 4093 198 3303 1341 2536 30 2 198 1 520 9531 198)
echo
echo "model: $(basename "$model"); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in Q4_1 "${kinds[@]}"; do
  file="$work/$kind.gguf"
  for ((r = 1; r <= rounds; r++)); do
    # The file's pages are in the page cache (it was just written or read): a warm load.
    /usr/bin/time -f "%M %U %S" -o "$work/t" "$greedy" "$file" 16 "${prompt[@]}" >"$work/out"
    load="$(grep -o 'load [0-9.]* s' "$work/out")"
    read -r rss user sys <"$work/t"
    echo "  $kind: file $(( $(stat -c %s "$file") / 1048576 )) MiB, $load wall, process CPU $(echo "$user + $sys" | bc) s, peak RSS $((rss / 1024)) MiB"
  done
done
