#!/usr/bin/env bash
# The offline default model beside llama.cpp, same GGUF file, same threads, same run: load,
# prompt and generation tokens/s, time to first token and peak RSS of each engine's process
# (axocoatl's release build through examples/local_timings.rs; llama.cpp through
# llama-cpp-python built from PyPI by bench/llama-cpp-setup.sh, the Python process included);
# 1 and 2 threads, idle and with both cores kept busy; a one-shot `send` of a short prompt in
# a fresh session (wall, peak RSS); and the eight turns of one session, each timed.
#
#   bench/local_vs_llama_cpp.sh [ROUNDS]
#
# Builds what it runs (cargo build --release under CARGO_TARGET_DIR, or target/). Rounds run
# one after the other, and the load average is printed with each: other work on the machine
# moves the wall-clock figures, so each engine also prints tokens per second of the CPU time
# its process got (every thread it computes on; what a busy machine changes much less).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
target="${CARGO_TARGET_DIR:-target}"
model="${AXOCOATL_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$model" ] || { echo "no model at $model: run axocoatl models fetch first" >&2; exit 1; }
cargo build --release --locked --quiet --bin axocoatl --example local_timings
cargo build --release --locked --quiet -p axocoatl-infer --example read_ceiling
bin="$(realpath "$target/release/axocoatl")"
timings="$(realpath "$target/release/examples/local_timings")"
ceiling="$(realpath "$target/release/examples/read_ceiling")"
py="$(bench/llama-cpp-setup.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$timings" "$model" --prompts >"$work/prompts"
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "model: $(basename "$model"); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "llama.cpp: llama-cpp-python $("$py" -c 'import llama_cpp; print(llama_cpp.__version__)'), built here from PyPI"
echo
echo "== the ceiling of generation: every weight read from memory once a token (load average $(load)) =="
"$ceiling" "$model"
echo
# Both engines on 1 and 2 threads, ROUNDS times, beside BUSY spinning processes (0: idle).
rounds_beside() {
  local busy="$1" label="$2"
  for ((r = 1; r <= rounds; r++)); do
    for t in 1 2; do
      echo "round $r, $t thread(s)$label (load average $(load))"
      echo "  llama.cpp  $("$py" bench/llama_cpp_timings.py "$model" "$work/prompts" "$t" "$busy")"
      echo "  axocoatl   $("$timings" "$model" --threads "$t" --busy "$busy")"
    done
  done
}
echo "== 1 and 2 threads, idle (goals: tokens/s ratio >= 1.0 for each, load <= 0.15 s) =="
rounds_beside 0 ""
echo
echo "== both cores kept busy by 2 spinning processes (goal: 2 threads no slower than 1) =="
rounds_beside 2 ", busy"
echo
echo "== one-shot send of a short prompt, fresh session (goals: <= 0.4 s wall; peak RSS <= llama.cpp's + 10%) =="
"$bin" init "$work/repo" >/dev/null
send=(env AXOCOATL_MODEL="$model" XDG_CACHE_HOME="$work/cache" "$bin" -C "$work/repo" send -n -o temperature=0)
for ((r = 1; r <= rounds; r++)); do
  /usr/bin/time -f "%e %M" -o "$work/t" "${send[@]}" "Say hello in five words." >/dev/null 2>&1
  read -r wall rss <"$work/t"
  echo "  round $r: ${wall} s wall, $((rss / 1024)) MiB peak RSS (load average $(load))"
done

echo
echo "== the turns of one session (goal: the eighth <= 1.2x the first) =="
timed() {
  /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$@" >/dev/null 2>&1
  read -r wall user sys rss <"$work/t"
  echo "${wall} s wall, $(echo "$user + $sys" | bc) s CPU, $((rss / 1024)) MiB peak RSS"
}
question() { echo "Tell me one more fact about rivers, number $1."; }
echo "  turn 1 (fresh session): $(timed "${send[@]}" -o max_tokens=24 "$(question 1)")"
next=(env AXOCOATL_MODEL="$model" XDG_CACHE_HOME="$work/cache" "$bin" -C "$work/repo" send -o temperature=0 -o max_tokens=24)
for turn in 2 3 4 5 6 7 8; do
  echo "  turn $turn: $(timed "${next[@]}" "$(question "$turn")")"
done
rm -f "$work"/repo/.axocoatl/checkpoints/v1/*/attention.cache
echo "  turn 9, its attention cache removed first (a session that re-reads itself): $(timed "${next[@]}" "$(question 9)")"
