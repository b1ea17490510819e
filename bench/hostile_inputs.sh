#!/usr/bin/env bash
# What hostile input costs, beside its goal:
#
# - the PDF whose 300 pages share one Flate stream inflating to 60 MB (bench/hostile_pdf.py):
#   wall time and peak RSS of `attach add` (goal: it finishes, in bounded memory; before,
#   23.6 GB and the kernel's kill);
# - 20 pages each inflating a 16 MB stream of drawing operations: `attach add` (the
#   document's 128 MiB budget ends the reading), and how long SIGTERM takes to end it once
#   it reads (goal: under 1 s);
# - a 3.2 MB message sent to a scripted model with the embedder: from the turn's end (its
#   answer, its `delta` event) to the process's exit (goal: under 100 ms; before, minutes).
#
#   bench/hostile_inputs.sh [BIN]
#
# BIN defaults to the debug binary under CARGO_TARGET_DIR (or target/); the embedder comes
# from `axocoatl models fetch` (AXOCOATL_EMBED_DIR or the user's cache).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/debug/axocoatl}"
[ -x "$bin" ] || { echo "no binary at $bin: run cargo build first" >&2; exit 1; }
bin="$(realpath "$bin")"
embed="${AXOCOATL_EMBED_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" init "$work/repo" >/dev/null
printf 'providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - {id: a, provider: canned}\n' >"$work/repo/axocoatl.yaml"
printf 'replies:\n  - text: ok\n' >"$work/repo/replies.yaml"
python3 bench/hostile_pdf.py 300 60 shared >"$work/repo/bomb.pdf"
python3 bench/hostile_pdf.py 20 16 distinct >"$work/repo/heavy.pdf"
ms() { date +%s%N | cut -c1-13; }

for f in bomb heavy; do
  code=0
  /usr/bin/time -f "%e %M" -o "$work/t" "$bin" -C "$work/repo" attach add "$work/repo/$f.pdf" >/dev/null 2>"$work/err" || code=$?
  read -r wall kib < <(tail -n 1 "$work/t")
  [ "$code" = 0 ] || { echo "attach add $f.pdf: exit $code: $(tail -n 2 "$work/err")"; }
  printf '%-40s %6s s wall, %5d MiB peak RSS (%d KB file)\n' "attach add $f.pdf" "$wall" $((kib / 1024)) \
    $(($(stat -c %s "$work/repo/$f.pdf") / 1000))
done

# SIGTERM once the process handles it (its SigCgt has bit 15) and has read for 0.3 s.
sigterm_ms() { # pid
  local pid=$1
  until grep -q '^SigCgt:' "/proc/$pid/status" 2>/dev/null && \
    (( (16#$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status") >> 14) & 1 )); do sleep 0.01; done
  sleep 0.3
  local t0; t0=$(ms)
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.005; done
  echo $(($(ms) - t0))
}
"$bin" -C "$work/repo" attach add "$work/repo/heavy.pdf" >/dev/null 2>&1 &
printf '%-40s %6s ms (goal: under 1000)\n' "SIGTERM to attach add heavy.pdf" "$(sigterm_ms $!)"
wait $! 2>/dev/null || true

head -c 3200000 < <(yes "The quarterly numbers moved again and nobody could say why.") >"$work/notes.txt"
for round in 1 2 3; do
  rm -f "$work/out"
  AXOCOATL_EMBED_DIR="$embed" "$bin" -C "$work/repo" send --json -s "big$round" <"$work/notes.txt" >"$work/out" 2>/dev/null &
  pid=$!
  until grep -q '"type":"delta"' "$work/out" 2>/dev/null; do sleep 0.001; done
  t0=$(ms)
  while kill -0 "$pid" 2>/dev/null; do sleep 0.001; done
  printf '%-40s %6s ms (goal: under 100)\n' "3.2 MB send: answer to exit ($round)" $(($(ms) - t0))
done
