#!/usr/bin/env bash
# Peak memory of `axocoatl send` against a loopback server that streams as fast as it can.
#
#   bench/stream_rss.sh [MB] [BIN]
#
# Prints, for an OpenAI-style SSE stream (small deltas; then 2,000-character deltas, 14 MB)
# and an Ollama-style NDJSON stream of about MB megabytes of valid events (default 150), the
# peak RSS of the whole `send` process and its ratio to the stream size, each with stdout
# read at once and with stdout read only after 3 s (a slow terminal or pipe); then the peak
# RSS when the server sends one 1 GiB line without
# a newline (the turn must fail at the line bound, not buffer it). BIN defaults to the
# debug binary under CARGO_TARGET_DIR (or target/).
set -euo pipefail
cd "$(dirname "$0")/.."
mb="${1:-150}"
bin="${2:-${CARGO_TARGET_DIR:-target}/debug/axocoatl}"
[ -x "$bin" ] || { echo "no binary at $bin: run cargo build first" >&2; exit 1; }
work="$(mktemp -d)"
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

cat >"$work/server.py" <<'PY'
import socket, sys, json
mode, size = sys.argv[1], int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
words = ["Hello", " world", ",", " the", " quick", " brown", " fox", " jumps", "\n", " é", " 😀"]
def events():
    if mode in ("sse", "sse-big"):
        for i in range(10**9):
            w = words[i % len(words)]
            if mode == "sse-big": w = (w * 400)[:2000]
            yield ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}) + "\n\n").encode()
    else:
        for i in range(10**9):
            w = words[i % len(words)]
            yield (json.dumps({"model": "m", "created_at": "2026-01-01T00:00:00Z",
                   "message": {"role": "assistant", "content": w}, "done": False}) + "\n").encode()
def tail():
    if mode != "ndjson":
        return (b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
                b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
    return b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}\n'
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""): break
        if line.lower().startswith(b"content-length:"): length = int(line.split(b":")[1])
    f.read(length)
    def chunk(b): c.sendall(b"%x\r\n" % len(b) + b + b"\r\n")
    try:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        if mode == "longline":
            chunk(b"data: ")
            block = b"x" * (1 << 20)
            for _ in range(size >> 20): chunk(block)
        else:
            sent, batch = 0, []
            for e in events():
                batch.append(e); sent += len(e)
                if len(batch) == 512:
                    chunk(b"".join(batch)); batch = []
                if sent >= size: break
            if batch: chunk(b"".join(batch))
            chunk(tail())
        c.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    c.close()
PY

run() { # mode bytes kind [slow]
  rm -f "$work/port"
  python3 "$work/server.py" "$1" "$2" >"$work/port" &
  server=$!
  while [ ! -s "$work/port" ]; do sleep 0.05; done
  local port; port="$(cat "$work/port")"
  local base="http://127.0.0.1:$port"; [ "$3" = openai ] && base="$base/v1"
  rm -rf "$work/repo"; mkdir "$work/repo"
  "$bin" init "$work/repo" >/dev/null 2>&1
  printf 'providers:\n  p: {kind: %s, base_url: "%s"}\nagents:\n  - {id: a, provider: p, model: m}\n' "$3" "$base" >"$work/repo/axocoatl.yaml"
  local code=0 label="$1"
  if [ "${4:-}" = slow ]; then
    # stdout read by something slow (a terminal, a busy pipe): the first 3 s nothing reads.
    label="$1/slow"
    /usr/bin/time -f '%M' -o "$work/time" "$bin" -C "$work/repo" send "go" 2>"$work/err" \
      | { sleep 3; cat >/dev/null; } || code=$?
    code="$(head -n1 "$work/time" | grep -o 'status [0-9]*' | grep -o '[0-9]*' || echo 0)"
  else
    /usr/bin/time -f '%M' -o "$work/time" "$bin" -C "$work/repo" send "go" >/dev/null 2>"$work/err" || code=$?
  fi
  local kb; kb="$(tail -n1 "$work/time")"
  kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
  printf '%-12s stream %5d MB  exit %d  peak RSS %7.1f MB  ratio %5.2f\n' "$label" $(( $2 / 1000000 )) "$code" \
    "$(echo "$kb / 1000" | bc -l)" "$(echo "$kb * 1000 / $2" | bc -l)"
  if [ "$code" != 0 ]; then grep -i -m1 error "$work/err" | cut -c1-200 || true; fi
}
bytes=$(( mb * 1000000 ))
run sse "$bytes" openai
run sse "$bytes" openai slow
# 2,000-character deltas: the reply is almost the whole stream. Kept under the ledger's 16 MiB
# record limit so that the turn can complete.
run sse-big 14000000 openai
run sse-big 14000000 openai slow
run ndjson "$bytes" ollama
run ndjson "$bytes" ollama slow
run longline $(( 1 << 30 )) openai
