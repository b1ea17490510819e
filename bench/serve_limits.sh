#!/usr/bin/env bash
# The figures of serve's limits, each beside its goal and its floor (what the design
# cannot go below), measured on the real binary:
#
#   bench/serve_limits.sh [BIN]
#
# - 1,100 idle connections to serve.sock under `ulimit -n 1024`, held 10 s: bytes serve
#   logged, its CPU time, how long `agents status` took, the agent's state after;
# - 1 GiB without a newline to serve.sock: how much serve grew;
# - an actor stopped with SIGSTOP: seconds until its successor is idle;
# - kill -9 of an actor again and again: how many until the agent is down;
# - a per-second automation after a day without a runner (`catch_up: all`): runs and time;
# - an MCP tool answering 100 MiB: seconds until the call fails (tool_timeout_secs 600);
#   `mcp serve` sent a 20 MiB request: seconds until it answers;
# - `validate` of an agent with `per_call: 30`: the estimate it names.
# BIN defaults to the debug binary under CARGO_TARGET_DIR (or target/).
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/debug/axocoatl}"
[ -x "$bin" ] || { echo "no binary at $bin: run cargo build first" >&2; exit 1; }
bin=$(realpath "$bin")
peer="$(dirname "$bin")/examples/mcp_peer"
work="$(mktemp -d /tmp/axo-bench.XXXXXX)"
serve_pid=""
trap 'kill -9 $serve_pid 2>/dev/null; rm -rf "$work"' EXIT

repo() { # repo DIR: a repository with a scripted agent `bot`
  mkdir -p "$1" && (cd "$1" && "$bin" init >/dev/null)
  printf 'providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n' >"$1/axocoatl.yaml"
  printf 'replies:\n  - text: "ok"\n' >"$1/replies.yaml"
}
state() { timeout 10 "$bin" -C "$1" agents status --json 2>/dev/null | jq -r "select(.type == \"actor\") | .$2"; }
wait_idle() { # wait_idle DIR [NOT_PID]: the pid of the idle actor
  local deadline=$((SECONDS + 60)) pid
  while ((SECONDS < deadline)); do
    pid=$(timeout 10 "$bin" -C "$1" agents status --json 2>/dev/null | jq -r 'select(.type == "actor" and .state == "idle") | .pid')
    [[ -n "$pid" && "$pid" != "${2:-}" ]] && { echo "$pid"; return 0; }
    sleep 0.05
  done
  return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
row() { printf '%-58s %14s   goal %-18s floor %s\n' "$1" "$2" "$3" "$4"; }

echo "serve limits ($(nproc) cores, $bin)"
dir="$work/a"; repo "$dir"
(cd "$dir" && ulimit -n 1024 && exec "$bin" serve) 2>"$work/serve.log" &
serve_pid=$!
wait_idle "$dir" >/dev/null || { echo "serve did not start" >&2; exit 1; }
log0=$(stat -c %s "$work/serve.log"); cpu0=$(cpu_ticks "$serve_pid")
python3 - "$dir/.axocoatl/run/serve.sock" 1100 "$work/idle" <<'PY' &
import os, resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = [socket.socket(socket.AF_UNIX) for _ in range(int(sys.argv[2]))]
for s in held:
    s.connect(sys.argv[1])
open(sys.argv[3], "w").write("held")
time.sleep(10)
PY
idle=$!
while [[ ! -s "$work/idle" ]]; do sleep 0.05; done
t0=$(date +%s.%N)
timeout 30 "$bin" -C "$dir" agents status >/dev/null 2>&1; st=$?
status_s=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$idle"
logged=$(($(stat -c %s "$work/serve.log") - log0)); cpu=$(($(cpu_ticks "$serve_pid") - cpu0))
row "idle connections: bytes serve logged in 10 s" "$logged B" "< 10 KiB (was 1.1 GB)" "0"
row "idle connections: serve CPU in 10 s" "$((cpu * 10)) ms" "< 500 ms (was 5 s)" "0"
row "idle connections: agents status took" "$(printf '%.2f s' "$status_s") (exit $st)" "< 1 s" "one round trip"
row "idle connections: agent state after" "$(state "$dir" state)" "idle (was down)" ""

hwm0=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
python3 - "$dir/.axocoatl/run/serve.sock" <<'PY' >/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
chunk = b"x" * (1 << 20)
try:
    for _ in range(1024):
        s.sendall(chunk)
except OSError:
    pass
PY
grown=$((($(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status") - hwm0) / 1024))
row "1 GiB without a newline: serve grew" "$grown MiB" "<= 64 MiB (was 1,027)" "64 MiB (the line limit)"

pid=$(wait_idle "$dir"); kill -STOP "$pid"; t0=$SECONDS
wait_idle "$dir" "$pid" >/dev/null
row "a hung actor (SIGSTOP): until its successor is idle" "$((SECONDS - t0)) s" "<= 9 s" "5 s + 3 s (ping every 5 s, 3 s to answer)"

(cd "$dir" && "$bin" agents restart bot >/dev/null 2>&1)
kills=0
while [[ $(state "$dir" state) != down && kills -lt 20 ]]; do
  pid=$(wait_idle "$dir" "") || break
  kill -9 "$pid"; kills=$((kills + 1))
  for _ in $(seq 100); do s=$(state "$dir" state); [[ $s == idle || $s == down ]] && [[ $(state "$dir" pid) != "$pid" ]] && break; sleep 0.05; done
done
row "kill -9 of an actor, again and again: kills until down" "$kills" "6 (was never)" "6 (5 restarted in 10 min)"
kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""

dir="$work/b"; repo "$dir"
printf 'automations:\n  - id: rapid\n    schedule: "* * * * * *"\n    agent: bot\n    request: r\n    catch_up: all\n' >>"$dir/axocoatl.yaml"
printf 'replies:\n  - text: "ok"\n' >"$dir/replies.yaml"
(cd "$dir" && TZ=UTC AXOCOATL_NOW=2026-01-02T03:04:00.500Z "$bin" automations tick >/dev/null 2>&1)
t0=$(date +%s.%N)
(cd "$dir" && TZ=UTC AXOCOATL_NOW=2026-01-03T03:04:00.500Z "$bin" automations tick >/dev/null 2>&1)
tick_s=$(echo "$(date +%s.%N) - $t0" | bc)
runs=$((cd "$dir" && "$bin" history --all --json) | wc -l)
row "per-second schedule, a day without a runner: turns run" "$((runs - 1)) ($(printf '%.1f s' "$tick_s"))" "<= 100 (was 86,400)" "100 (catch_up_max_runs)"

if [[ -x "$peer" ]]; then
  dir="$work/c"; mkdir -p "$dir" && (cd "$dir" && "$bin" init >/dev/null)
  port_file="$work/port"
  python3 - "$port_file" <<'PY' &
import json, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
def reply(c, msg):
    body = json.dumps({"model": "m", "created_at": "2026-01-01T00:00:00Z", "message": msg, "done": False}) + "\n"
    body += json.dumps({"model": "m", "created_at": "2026-01-01T00:00:00Z", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}) + "\n"
    c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body.encode())
for i in range(2):
    c, _ = s.accept(); data = b""
    while b"\r\n\r\n" not in data: data += c.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < n: rest += c.recv(65536)
    if i == 0:
        reply(c, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "mcp__peer__huge", "arguments": {"bytes": 100 << 20}}}]})
    else:
        reply(c, {"role": "assistant", "content": "done"})
    c.close()
PY
  model=$!
  while [[ ! -s "$port_file" ]]; do sleep 0.05; done
  printf 'providers:\n  llm: {kind: ollama, base_url: "http://127.0.0.1:%s"}\nmcp_servers:\n  peer:\n    command: %s\n    tool_timeout_secs: 600\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    mcp_servers: [peer]\n' "$(cat "$port_file")" "$peer" >"$dir/axocoatl.yaml"
  t0=$(date +%s.%N)
  (cd "$dir" && timeout 700 "$bin" send --json "go" >"$work/mcp.out" 2>&1)
  mcp_s=$(echo "$(date +%s.%N) - $t0" | bc)
  said=$(jq -r 'select(.type == "tool.result") | .output' "$work/mcp.out" 2>/dev/null | head -c 60)
  call_ms=$(jq -r 'select(.type == "tool.result") | .duration_ms' "$work/mcp.out" 2>/dev/null)
  row "MCP tool answering 100 MiB: the call took" "${call_ms:-?} ms" "at once (was 600 s)" "the server's time to write 16 MiB"
  row "  (the whole send, server start and end included)" "$(printf '%.1f s' "$mcp_s")" "" ""
  echo "    ($said…)"
  wait "$model" 2>/dev/null
  t0=$(date +%s.%N)
  answered=$(python3 - "$bin" "$dir" <<'PY'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "-C", sys.argv[2], "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def send(m): p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
p.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "history_search", "arguments": {"text": "x" * (20 << 20)}}})
print(json.loads(p.stdout.readline()).get("error", {}).get("message", "no error")[:60])
p.stdin.close(); p.wait(timeout=20)
PY
)
  serve_s=$(echo "$(date +%s.%N) - $t0" | bc)
  row "mcp serve sent a 20 MiB request: until it answered" "$(printf '%.1f s' "$serve_s")" "at once (was never)" "the time to read 16 MiB"
  echo "    ($answered…)"
else
  echo "(no $peer: run cargo build --examples for the MCP figures)"
fi

dir="$work/d"; repo "$dir"
printf 'providers:\n  llm: {kind: ollama, base_url: "http://127.0.0.1:11434"}\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    token_budget:\n      per_call: 30\n' >"$dir/axocoatl.yaml"
said=$( (cd "$dir" && "$bin" validate 2>&1) | grep -o 'at least [0-9]* tokens, [0-9]* estimated' | head -1)
row "validate, per_call 30 with the read-only baseline tools" "${said:-none}" "a warning" "the schemas' estimate (1,822 when filed)"
