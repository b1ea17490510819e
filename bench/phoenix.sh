#!/usr/bin/env bash
# Traces of real turns in Arize Phoenix (from PyPI), the OTLP receiver many agent users run:
# makes (once) a venv under .cache/phoenix-venv, starts `phoenix serve` on loopback ports in a
# temporary working directory, sends turns with a tool call to it through
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, asks Phoenix's REST API for the spans it stored, and
# times sends with traces beside the same sends without.
#
#   bench/phoenix.sh            # uses target/release/axocoatl (builds it if missing)
#   AXOCOATL_BIN=path bench/phoenix.sh
#
# Phoenix is too heavy for CI (about 150 packages, 850 MB, more than a minute to install and
# up to a minute to start on 2 cores), so the tests use a loopback receiver that decodes the
# same protobuf; this script is where Phoenix itself is checked.
set -euo pipefail

PACKAGES=("arize-phoenix==20.26.1")
RUNS="${RUNS:-20}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_root/.cache/phoenix-venv"
stamp="$venv/.ready-$(printf '%s ' "${PACKAGES[@]}" | sha256sum | cut -c1-16)"
log() { echo "phoenix: $*" >&2; }

if ! [ -f "$stamp" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    log "installing ${PACKAGES[*]}"
    start=$(date +%s.%N)
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
    end=$(date +%s.%N)
    echo "phoenix install: $(echo "$end - $start" | bc) s, $(du -sm "$venv" | cut -f1) MB, $("$venv/bin/pip" list 2>/dev/null | tail -n +3 | wc -l) packages"
    touch "$stamp"
fi

bin="${AXOCOATL_BIN:-$repo_root/target/release/axocoatl}"
if ! [ -x "$bin" ]; then
    (cd "$repo_root" && cargo build --release --quiet)
fi

work="$(mktemp -d)"
phoenix_pid=""
cleanup() {
    if [ -n "$phoenix_pid" ]; then
        kill "$phoenix_pid" 2>/dev/null || true
        wait "$phoenix_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
grpc_port="$(free_port)"
mkdir -p "$work/phoenix" "$work/repo"
start=$(date +%s.%N)
PHOENIX_WORKING_DIR="$work/phoenix" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" \
    PHOENIX_GRPC_PORT="$grpc_port" "$venv/bin/phoenix" serve >"$work/phoenix.log" 2>&1 &
phoenix_pid=$!
for _ in $(seq 1 300); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; then break; fi
    kill -0 "$phoenix_pid" 2>/dev/null || { cat "$work/phoenix.log" >&2; exit 1; }
    sleep 0.5
done
end=$(date +%s.%N)
echo "phoenix $("$venv/bin/pip" show arize-phoenix | awk '/^Version/ {print $2}') ready in $(echo "$end - $start" | bc) s on http://127.0.0.1:$port"

cd "$work/repo"
"$bin" init >/dev/null
cat >axocoatl.yaml <<'EOF'
providers:
  s: {kind: script, script: replies.yaml}
agents:
  - id: coder
    provider: s
    tools: [read_file]
EOF
cat >replies.yaml <<'EOF'
replies:
  - match: "needle"
    tool_calls: [{name: read_file, arguments: {path: fact.txt}}]
    usage: {prompt_tokens: 30, completion_tokens: 4}
  - match: "needle"
    text: "The fact file says quasar."
    usage: {prompt_tokens: 40, completion_tokens: 6}
EOF
echo "quasar lives here" >fact.txt
endpoint="http://127.0.0.1:$port/v1/traces"
# The turn alone: no embedding model to load for semantic memory.
mkdir -p "$work/no-embedder"
export AXOCOATL_EMBED_DIR="$work/no-embedder"

send() { # send TRACED SESSION → seconds on stdout
    local s e
    s=$(date +%s.%N)
    if [ "$1" = yes ]; then
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="$endpoint" "$bin" send --no-stdin -s "$2" "find the needle" >/dev/null 2>"$work/err"
    else
        "$bin" send --no-stdin -s "$2" "find the needle" >/dev/null 2>"$work/err"
    fi
    e=$(date +%s.%N)
    grep "traces" "$work/err" >&2 || true
    echo "$e - $s" | bc
}

# Phoenix's first export sets up its tables: not timed.
send yes warm >/dev/null
on=(); off=()
for i in $(seq 1 "$RUNS"); do
    if [ $((i % 2)) = 0 ]; then
        on+=("$(send yes "s$((i % 4))")"); off+=("$(send no "s$((i % 4))")")
    else
        off+=("$(send no "s$((i % 4))")"); on+=("$(send yes "s$((i % 4))")")
    fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] * 1000}'; }
on_ms=$(median "${on[@]}"); off_ms=$(median "${off[@]}")
echo "send posting its trace to Phoenix: ${on_ms} ms, without traces ${off_ms} ms (medians of $RUNS, alternating)"

# What Phoenix stored (it writes in the background: wait for every span).
want=$(( (RUNS + 1) * 4 ))
for _ in $(seq 1 100); do
    got=$(curl -sf "http://127.0.0.1:$port/v1/projects/default/spans?limit=1000" |
        python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
    [ "$got" -ge "$want" ] && break
    sleep 0.2
done
cat >"$work/show.py" <<'EOF'
import collections
import json
import sys

spans = json.load(sys.stdin)["data"]
by_trace = collections.defaultdict(list)
for s in spans:
    by_trace[s["context"]["trace_id"]].append(s)
print(f"phoenix stored {len(spans)} spans in {len(by_trace)} traces; one of them:")
trace = next(iter(by_trace.values()))
ids = {s["context"]["span_id"] for s in trace}
for s in sorted(trace, key=lambda s: (s["parent_id"] is not None, s["start_time"], s["name"])):
    parent = "root" if s["parent_id"] is None else ("child" if s["parent_id"] in ids else "orphan")
    a = s["attributes"]
    get = lambda k: a.get(k, "-")
    print(
        f"  {s['name']:24} {s['span_kind']:6} {parent:5} turn={get('axocoatl.turn.id')} "
        f"op={get('gen_ai.operation.name')} tool={get('gen_ai.tool.name')} "
        f"in={get('gen_ai.usage.input_tokens')} out={get('gen_ai.usage.output_tokens')}"
    )
assert all(len(t) == 4 for t in by_trace.values()), "every turn is one trace of 4 spans"
assert all(s["parent_id"] is None or s["parent_id"] in {x["context"]["span_id"] for x in by_trace[s["context"]["trace_id"]]} for s in spans)
EOF
curl -sf "http://127.0.0.1:$port/v1/projects/default/spans?limit=1000" | python3 "$work/show.py"
