#!/usr/bin/env bash
# Soak: kill -9 loops across send, attach, rewind and fsck --repair with small segments; a
# disk-full run on a small tmpfs (when root); a run past `ulimit -f`; `serve` under attack
# (idle connections past `ulimit -n 1024`, endless request lines, kill -9 loops of its
# actors); the sandbox's escapes replayed in a loop (through serve and without it, with
# kill -9 mid-command), then a PDF decompression bomb and another user's directory where
# commands get their $TMPDIR, and model files with hostile chat templates (endless loops,
# memory bombs); and the store's decoder property tests for minutes. Prints iterations,
# kills, lost turns, unusable repositories and escapes, and exits non-zero if any turn was
# lost, any repository became unusable, any escape worked or any hostile template hung or
# aborted a process.
#
# Settings (environment):
#   SOAK_KILLS=1000          stop the kill loops after this many processes were killed
#   SOAK_ROUNDS_ITERS=150    iterations per repository before starting a fresh one
#   SOAK_SEGMENT_LIMIT=4096  AXOCOATL_SEGMENT_LIMIT for the kill loops (bytes)
#   SOAK_PROPTEST_CASES=200000  cases per decoder property in the long property run
#   SOAK_SERVE_KILLS=60      actors killed with kill -9 in the serve part
#   SOAK_SANDBOX_ROUNDS=30   rounds of the sandbox escapes (half through serve)
#   SOAK_SKIP="diskfull proptest"  parts to skip (killloop, diskfull, fsize, serve, sandbox,
#                            proptest)
#   SOAK_BIN=target/debug/axocoatl  a binary to use instead of building the release one
#                            (with the `local` feature for the hostile templates)
#   SOAK_TEMPLATE_ROUNDS=2   rounds of the hostile templates (each once without serve, once
#                            through it); they need the fetched model (scripts/fetch-model.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

KILLS_TARGET=${SOAK_KILLS:-1000}
ITERS=${SOAK_ROUNDS_ITERS:-150}
SEGMENT_LIMIT=${SOAK_SEGMENT_LIMIT:-4096}
PROPTEST_CASES=${SOAK_PROPTEST_CASES:-200000}
SERVE_KILLS=${SOAK_SERVE_KILLS:-60}
SANDBOX_ROUNDS=${SOAK_SANDBOX_ROUNDS:-30}
TEMPLATE_ROUNDS=${SOAK_TEMPLATE_ROUNDS:-2}
SKIP=" ${SOAK_SKIP:-} "

skip() { [[ "$SKIP" == *" $1 "* ]]; }
log() { printf '%s\n' "$*" >&2; }

target=${CARGO_TARGET_DIR:-$root/target}
if [[ -n "${SOAK_BIN:-}" ]]; then
  bin=$SOAK_BIN
else
  # The local model only for the hostile templates of the sandbox part.
  features=()
  skip sandbox || features=(--features local)
  log "building the release binary (${features[*]:-without the local model})..."
  cargo build --release --locked --no-default-features "${features[@]}" --quiet || exit 1
  bin="$target/release/axocoatl"
fi

work=$(mktemp -d /tmp/axocoatl-soak.XXXXXX)
cleanup() {
  [[ -z "${serve_pid:-}" ]] || kill -9 "$serve_pid" 2>/dev/null
  if mountpoint -q "$work/full" 2>/dev/null; then umount "$work/full"; fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=0

# A repository with a scripted agent whose replies stream slowly enough to be killed
# mid-turn, and a tool call that writes core memory.
make_repo() {
  local dir=$1
  mkdir -p "$dir"
  (cd "$dir" && "$bin" init >/dev/null) || return 1
  cat >"$dir/axocoatl.yaml" <<'EOF'
providers:
  canned: {kind: script, script: replies.yaml}
agents:
  - id: helper
    provider: canned
EOF
  cat >"$dir/replies.yaml" <<'EOF'
replies:
  - match: remember
    tool_calls: [{name: core_memory_append, arguments: {label: human, content: likes tea}}]
  - match: remember
    chunks: ["Noted", ", ", "thanks."]
    delay_ms: 3
  - match: msg
    chunks: ["one ", "two ", "three ", "four ", "five ", "six"]
    delay_ms: 10
EOF
  head -c 20000 /dev/urandom | base64 >"$dir/notes.txt"
}

ax() { # ax DIR ARGS...: runs axocoatl in DIR with the soak's environment
  local dir=$1; shift
  (cd "$dir" && AXOCOATL_SEGMENT_LIMIT=$SEGMENT_LIMIT "$bin" "$@")
}

# Turns of a repository: "ID STATE" per line.
turn_states() {
  ax "$1" history --all --json 2>/dev/null | jq -r '"\(.turn) \(.state)"'
}

# ---------------------------------------------------------------- kill -9 loops
iterations=0 kills=0 lost=0 unusable=0 open_fail=0 nonterminal=0 repos=0
kill_loop() {
  local round=0
  while ((kills < KILLS_TARGET)); do
    round=$((round + 1)); repos=$((repos + 1))
    local dir="$work/kill-$round"
    make_repo "$dir" || { log "cannot create $dir"; failures=$((failures + 1)); return; }
    local acked="$dir.acked"; : >"$acked"
    local broken=0
    for ((i = 0; i < ITERS && kills < KILLS_TARGET; i++)); do
      iterations=$((iterations + 1))
      # One or two commands at once, on two sessions; each is killed at a random moment.
      local n=$((1 + RANDOM % 2)) pids=() errs=()
      for ((k = 0; k < n; k++)); do
        local s="s$k" op=$((RANDOM % 20)) err="$dir.err.$k"
        errs+=("$err")
        local args
        if ((op < 10)); then args=(send -s "$s" "msg $i.$k")
        elif ((op < 12)); then args=(send -s "$s" "remember $i.$k")
        elif ((op < 14)); then args=(attach add -s "$s" notes.txt)
        elif ((op < 16)); then args=(send -s "$s" --attach notes.txt "msg with notes $i.$k")
        elif ((op < 18)); then
          local target
          target=$(shuf -n 1 "$acked" 2>/dev/null)
          if [[ -n "$target" ]]; then args=(rewind "$target" --yes); else args=(send -s "$s" "msg $i.$k"); fi
        else args=(fsck --repair)
        fi
        (cd "$dir" && exec env AXOCOATL_SEGMENT_LIMIT="$SEGMENT_LIMIT" "$bin" "${args[@]}" </dev/null >/dev/null 2>"$err") &
        pids+=($!)
      done
      sleep "$(printf '0.%03d' $((RANDOM % 120 + 2)))"
      for p in "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null; then kills=$((kills + 1)); fi
      done
      for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
      for e in "${errs[@]}"; do
        grep -E '^turn [0-9a-f]{16}$' "$e" 2>/dev/null | cut -d' ' -f2 >>"$acked"
      done
      # After every crash the repository opens (orphans are recovered on the way).
      if ! ax "$dir" history --all >/dev/null 2>"$dir.open-err"; then
        open_fail=$((open_fail + 1))
        log "iteration $i of $dir: history failed after a kill: $(head -c 400 "$dir.open-err")"
        if ! ax "$dir" fsck --repair >/dev/null 2>&1 || ! ax "$dir" history --all >/dev/null 2>&1; then
          broken=1
          break
        fi
      fi
    done
    if ((broken)); then
      unusable=$((unusable + 1)); failures=$((failures + 1))
      log "UNUSABLE: $dir"
      continue
    fi
    # The end of a round: repair, then a clean fsck, every acknowledged turn present and
    # every turn in a terminal state.
    ax "$dir" fsck --repair >/dev/null 2>&1
    if ! ax "$dir" fsck >"$dir.fsck" 2>&1; then
      unusable=$((unusable + 1)); failures=$((failures + 1))
      log "fsck not clean after --repair in $dir:"; head -20 "$dir.fsck" >&2
    fi
    local states="$dir.states"
    turn_states "$dir" >"$states"
    while read -r t; do
      if ! grep -q "^$t " "$states"; then
        lost=$((lost + 1)); failures=$((failures + 1)); log "LOST acknowledged turn $t in $dir"
      fi
    done < <(sort -u "$acked")
    local open
    open=$(grep -cv -E ' (completed|failed|stopped|interrupted)$' "$states")
    if ((open > 0)); then
      nonterminal=$((nonterminal + open)); failures=$((failures + 1))
      log "turns without a terminal state in $dir:"; grep -v -E ' (completed|failed|stopped|interrupted)$' "$states" >&2
    fi
    if ! ax "$dir" send -s s0 "msg final" >/dev/null 2>&1; then
      unusable=$((unusable + 1)); failures=$((failures + 1)); log "send fails at the end of $dir"
    fi
    log "round $round: $iterations iterations, $kills kills, $(sort -u "$acked" | wc -l) acknowledged turns in this repository"
    rm -rf "$dir" "$dir".*
  done
}

# ---------------------------------------------------------------- disk full
full_result="skipped"
full_sample=""
disk_full() {
  if [[ $(id -u) -ne 0 ]]; then full_result="skipped (not root)"; return; fi
  local mnt="$work/full"
  mkdir -p "$mnt"
  if ! mount -t tmpfs -o size=3m tmpfs "$mnt"; then full_result="skipped (mount failed)"; return; fi
  local dir="$mnt/repo"
  make_repo "$dir" || { full_result="init failed on the tmpfs"; failures=$((failures + 1)); return; }
  local acked="$work/full.acked"; : >"$acked"
  # Fill most of the file system, leaving room for a few turns; then every third command
  # attaches a new 30 KB file (from outside the tmpfs) until writes are refused.
  local free_kb
  free_kb=$(df -k --output=avail "$mnt" | tail -1)
  head -c $(((free_kb - 160) * 1024)) /dev/zero >"$mnt/filler" 2>/dev/null
  local refused=0 named=0 other=0 ok=0 reopen_fail=0
  for ((i = 0; i < 400; i++)); do
    local err="$work/full.err"
    if ((i % 3 == 0)); then
      head -c 22000 /dev/urandom | base64 >"$work/full-attach.txt"
      ax "$dir" attach add "$work/full-attach.txt" >/dev/null 2>"$err"
    else
      ax "$dir" send "msg full $i" >/dev/null 2>"$err"
    fi
    local code=$?
    grep -E '^turn [0-9a-f]{16}$' "$err" | cut -d' ' -f2 >>"$acked"
    if ((code == 0)); then ok=$((ok + 1)); continue; fi
    if grep -q "No space left on device" "$err"; then
      refused=$((refused + 1))
      [[ -n "$full_sample" ]] || full_sample=$(tr '\n' ' ' <"$err" | sed "s|$mnt|TMPFS|g")
      if grep -q "$dir/.axocoatl" "$err"; then named=$((named + 1)); fi
    else
      other=$((other + 1)); log "disk full, unexpected error: $(head -c 300 "$err")"
    fi
    if ! ax "$dir" history --all >/dev/null 2>"$err"; then
      reopen_fail=$((reopen_fail + 1)); log "disk full: history failed: $(head -c 300 "$err")"
    fi
    ((refused >= 20)) && break
  done
  # Free the space: the repository works again, nothing acknowledged is lost.
  rm -f "$mnt/filler"
  ax "$dir" fsck --repair >/dev/null 2>&1
  local clean=yes; ax "$dir" fsck >/dev/null 2>&1 || clean=no
  local after=yes; ax "$dir" send "msg after freeing space" >/dev/null 2>&1 || after=no
  local full_lost=0
  local states; states=$(turn_states "$dir")
  while read -r t; do
    grep -q "^$t " <<<"$states" || { full_lost=$((full_lost + 1)); log "disk full: LOST $t"; }
  done < <(sort -u "$acked")
  full_result="$ok commands succeeded, $refused refused with ENOSPC ($named naming a path under .axocoatl), $other other errors, history failed $reopen_fail times while full; after freeing space: fsck clean: $clean, send works: $after, lost turns: $full_lost"
  if ((other + reopen_fail + full_lost > 0)) || [[ $clean != yes || $after != yes ]] || ((refused == 0)); then
    failures=$((failures + 1))
  fi
  umount "$mnt"
}

# ---------------------------------------------------------------- ulimit -f
fsize_result="skipped"
file_size_limit() {
  local dir="$work/fsize"
  make_repo "$dir" || return
  local err="$work/fsize.err" code
  # 64 KiB of file size; one record of 100 KB cannot fit.
  (cd "$dir" && ulimit -f 64 && exec "$bin" util ledger-append --size 100000) >/dev/null 2>"$err"
  code=$?
  if ((code == 1)) && grep -q "File too large" "$err" && grep -q ".axocoatl/ledger" "$err"; then
    fsize_result="exit 1 with \"$(grep -m1 '^error' "$err")\"; fsck: $(ax "$dir" fsck 2>&1 | tail -1)"
  else
    fsize_result="exit $code (expected 1 with EFBIG and a path): $(head -c 300 "$err")"
    failures=$((failures + 1))
  fi
}

# ---------------------------------------------------------------- serve
serve_result="skipped"
serve_soak() {
  local dir="$work/serve"
  make_repo "$dir" || { serve_result="init failed"; failures=$((failures + 1)); return; }
  local log_file="$work/serve.log" acked="$work/serve.acked" problems=0
  : >"$acked"
  (cd "$dir" && ulimit -n 1024 && exec "$bin" serve) 2>"$log_file" &
  local serve_pid=$!
  # The actor of the agent, once it is idle: its pid.
  actor_up() {
    local deadline=$((SECONDS + 30)) pid
    while ((SECONDS < deadline)); do
      pid=$(timeout 10 "$bin" -C "$dir" agents status --json 2>/dev/null |
        jq -r 'select(.type == "actor" and .state == "idle") | .pid' 2>/dev/null)
      if [[ -n "$pid" && "$pid" != "${1:-}" ]]; then echo "$pid"; return 0; fi
      sleep 0.1
    done
    return 1
  }
  local actor; actor=$(actor_up) || { serve_result="serve never had an idle actor"; failures=$((failures + 1)); kill -9 "$serve_pid"; return; }

  # 1,100 idle connections from another process of the same user.
  local flag="$work/serve.idle" sock="$dir/.axocoatl/run/serve.sock"
  python3 - "$sock" 1100 "$flag" <<'PY' &
import os, resource, socket, sys, time
path, n, flag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = [socket.socket(socket.AF_UNIX) for _ in range(n)]
for s in held:
    s.connect(path)
open(flag, "w").write(str(len(held)))
while os.path.exists(flag):
    time.sleep(0.1)
PY
  local idle_pid=$!
  local waited=0
  while [[ ! -s "$flag" ]] && ((waited < 300)); do sleep 0.1; waited=$((waited + 1)); done
  local t0=$SECONDS status_ok=no send_ok=no
  timeout 20 "$bin" -C "$dir" agents status >/dev/null 2>&1 && status_ok=yes
  timeout 30 "$bin" -C "$dir" send "msg while idle connections are open" >/dev/null 2>&1 && send_ok=yes
  local idle_secs=$((SECONDS - t0))
  rm -f "$flag"; wait "$idle_pid" 2>/dev/null
  [[ $status_ok == yes && $send_ok == yes ]] || { problems=$((problems + 1)); log "serve: with 1,100 idle connections status: $status_ok, send: $send_ok"; }

  # Endless request lines, to serve and to the actor.
  endless() {
    python3 - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
chunk = b"x" * (1 << 20)
try:
    for _ in range(256):
        s.sendall(chunk)
except OSError:
    pass
answer = b""
try:
    while True:
        got = s.recv(4096)
        if not got:
            break
        answer += got
except OSError:
    pass
print(answer.decode(errors="replace"))
PY
  }
  local hwm_before; hwm_before=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
  local lines_ok=yes
  local answer
  answer=$(endless "$sock"); [[ $answer == *"longer than 64 MiB"* ]] || lines_ok=no
  answer=$(endless "$dir/.axocoatl/run/actors/0.sock"); [[ $answer == *"longer than 64 MiB"* ]] || lines_ok=no
  local grown=$(( ($(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status") - hwm_before) / 1024 ))
  [[ $lines_ok == yes ]] || { problems=$((problems + 1)); log "serve: an endless line was not refused"; }

  # kill -9 loops: the actor, in the middle of turns. Every 5 kills an `agents restart`
  # (the 6th crash within 10 minutes leaves the agent down: checked once).
  local kills_done=0 restarts=0 down_checked=no
  while ((kills_done < SERVE_KILLS)); do
    actor=$(actor_up "") || { problems=$((problems + 1)); log "serve: no idle actor after $kills_done kills"; break; }
    local err="$work/serve.err"
    (cd "$dir" && exec "$bin" send "msg $kills_done" </dev/null >/dev/null 2>"$err") &
    local send_pid=$!
    sleep "$(printf '0.%03d' $((RANDOM % 60 + 1)))"
    kill -9 "$actor" 2>/dev/null && kills_done=$((kills_done + 1))
    wait "$send_pid" 2>/dev/null
    grep -E '^turn [0-9a-f]{16}$' "$err" | cut -d' ' -f2 >>"$acked"
    if ((kills_done % 5 == 0)); then
      if [[ $down_checked == no ]]; then
        # A sixth crash within the window: down, until restarted.
        actor=$(actor_up "") && kill -9 "$actor"
        local deadline=$((SECONDS + 20)) state=""
        while ((SECONDS < deadline)); do
          state=$(timeout 10 "$bin" -C "$dir" agents status --json 2>/dev/null | jq -r 'select(.type == "actor") | .state')
          [[ $state == down ]] && break
          sleep 0.1
        done
        [[ $state == down ]] && down_checked=yes || { down_checked="no ($state)"; problems=$((problems + 1)); }
      fi
      timeout 60 "$bin" -C "$dir" agents restart helper >/dev/null 2>&1 && restarts=$((restarts + 1))
    fi
  done
  kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null
  # Nothing acknowledged lost, every turn ended, the repository clean.
  local serve_lost=0 states; states=$(turn_states "$dir")
  while read -r t; do
    grep -q "^$t " <<<"$states" || { serve_lost=$((serve_lost + 1)); log "serve: LOST $t"; }
  done < <(sort -u "$acked")
  local open; open=$(grep -cv -E ' (completed|failed|stopped|interrupted)$' <<<"$states")
  local clean=yes; ax "$dir" fsck >/dev/null 2>&1 || clean=no
  local log_kib=$(( $(stat -c %s "$log_file") / 1024 ))
  ((serve_lost + open > 0)) && problems=$((problems + 1))
  [[ $clean == yes ]] || problems=$((problems + 1))
  ((log_kib < 1024)) || { problems=$((problems + 1)); log "serve: its log grew to $log_kib KiB"; }
  serve_result="1,100 idle connections under ulimit -n 1024: status answered: $status_ok, send: $send_ok ($idle_secs s); endless lines refused at 64 MiB: $lines_ok (serve grew $grown MiB); $kills_done actors killed with kill -9 mid-turn, $restarts agents restart, down after a 6th crash within 10 minutes: $down_checked; lost turns: $serve_lost, turns not ended: $open, fsck clean: $clean; serve log $log_kib KiB"
  ((problems == 0)) || failures=$((failures + 1))
}

# ---------------------------------------------------------------- sandbox escapes
# A workspace-write agent whose scripted model tries every known way out of the sandbox in
# one turn; each way prints "ESCAPED <what>" if it works. Half the rounds go through serve
# (the command runs in an actor), half without. Every round also kills a turn mid-command
# (kill -9 of send, or of the actor under serve) and checks that nothing the command
# started outlives it.
sandbox_result="skipped"
escaped=0 survivors=0 sandbox_rounds=0 sandbox_kills=0
sandbox_escapes() {
  local dir="$work/sandbox" outside="$work/sandbox-outside" tag="86400.7$$"
  mkdir -p "$dir"
  (cd "$dir" && "$bin" init >/dev/null) || { sandbox_result="init failed"; failures=$((failures + 1)); return; }
  : >"$outside"
  local py; py=$(command -v /usr/bin/python3 || command -v python3)
  local connect="$py -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])'"
  local escapes=(
    "echo x > $outside && echo ESCAPED outside-write"
    "env | grep -q soak-secret && echo ESCAPED environment"
    "grep -l soak-secret /proc/[0-9]*/environ 2>/dev/null | grep -q . && echo ESCAPED proc-environ"
    "{ echo x >&9; } 2>/dev/null && echo ESCAPED inherited-descriptor"
    "mknod disk b 7 0 2>/dev/null && echo ESCAPED mknod"
    "sleep 30 & prlimit --pid \$! --fsize=0 2>/dev/null && echo ESCAPED prlimit; kill \$!"
    "$connect $dir/.axocoatl/run/serve.sock 2>/dev/null && echo ESCAPED serve-socket"
    "for s in $dir/.axocoatl/run/actors/*.sock; do $connect \$s 2>/dev/null && echo ESCAPED actor-socket; done"
    "sleep ${tag}1 & setsid sleep ${tag}2 & (setsid sh -c 'sleep ${tag}3 &' &); echo started"
    "for i in \$(seq 200); do sleep 20 & done 2>/dev/null; [ \$(ls /proc | grep -c '^[0-9]') -gt 64 ] && echo ESCAPED process-limit"
    "{ echo '# x' >> axocoatl.yaml || ln -sfn replies.yaml axocoatl.yaml || mv axocoatl.yaml moved.yaml; } 2>/dev/null && echo ESCAPED configuration"
    "{ echo x > .axocoatl/format || mv .axocoatl moved; } 2>/dev/null && echo ESCAPED repository"
  )
  {
    echo "replies:"
    for e in "${escapes[@]}"; do
      printf '  - match: escape\n    tool_calls: [{name: run_command, arguments: %s}]\n' \
        "$(jq -cn --arg c "$e" '{command: $c, timeout_secs: 30}')"
    done
    printf '  - match: escape\n    text: done\n'
    printf '  - match: linger\n    tool_calls: [{name: run_command, arguments: %s}]\n' \
      "$(jq -cn --arg c "sleep ${tag}4 & setsid sleep ${tag}5 & sleep ${tag}6" '{command: $c}')"
    printf '  - match: linger\n    text: done\n'
  } >"$dir/replies.yaml"
  cat >"$dir/axocoatl.yaml" <<'EOF'
providers:
  canned: {kind: script, script: replies.yaml}
  other: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: SOAK_AUTH}
agents:
  - id: jailed
    provider: canned
    sandbox: workspace-write
    command_limits: {processes: 64}
EOF
  local -A seen=()
  gone() { # waits up to 5 s for every process of the tag to end; counts survivors
    for ((w = 0; w < 50; w++)); do pgrep -f "$tag" >/dev/null || return 0; sleep 0.1; done
    local left; left=$(pgrep -f "$tag")
    survivors=$((survivors + $(wc -w <<<"$left"))); kill -9 $left 2>/dev/null; log "sandbox: processes survived $1"
  }
  local half=$((SANDBOX_ROUNDS / 2))
  for ((r = 0; r < SANDBOX_ROUNDS; r++)); do
    sandbox_rounds=$((sandbox_rounds + 1))
    if ((r == 0 && half > 0)); then
      (cd "$dir" && exec env SOAK_AUTH=soak-secret-1 OPENAI_API_KEY=soak-secret-2 "$bin" serve 9>>"$outside" </dev/null >/dev/null 2>"$work/sandbox-serve.err") &
      serve_pid=$!
      for ((w = 0; w < 100; w++)); do [[ -S "$dir/.axocoatl/run/serve.sock" ]] && break; sleep 0.1; done
    elif ((r == half)) && [[ -n "${serve_pid:-}" ]]; then
      kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""
    fi
    local out="$work/sandbox.out"
    (cd "$dir" && exec env SOAK_AUTH=soak-secret-1 OPENAI_API_KEY=soak-secret-2 "$bin" send --json -s "r$r" escape 9>>"$outside" </dev/null >"$out" 2>/dev/null)
    while read -r what; do
      escaped=$((escaped + 1)); seen[$what]=1; log "sandbox round $r: ESCAPED $what"
    done < <(jq -r 'select(.type == "tool.result") | .output' "$out" | grep -o 'ESCAPED [a-z-]*' | cut -d' ' -f2)
    if [[ -s "$outside" ]]; then escaped=$((escaped + 1)); seen[outside-file]=1; : >"$outside"; fi
    gone "the escape turn of round $r"
    # kill -9 mid-command: of send without serve, of the actor under serve.
    (cd "$dir" && exec "$bin" send -s "k$r" linger </dev/null >/dev/null 2>&1) &
    local send=$!
    for ((w = 0; w < 100; w++)); do (($(pgrep -fc "$tag") >= 3)) && break; sleep 0.05; done
    sleep "0.$((RANDOM % 5))"
    if [[ -n "${serve_pid:-}" ]]; then
      local actor
      actor=$(ax "$dir" agents status --json 2>/dev/null | jq -r --arg s "k$r" 'select(.type == "actor" and .session == $s) | .pid' | head -1)
      if [[ -n "$actor" && "$actor" != null ]] && kill -9 "$actor"; then sandbox_kills=$((sandbox_kills + 1)); fi
    elif kill -9 "$send" 2>/dev/null; then
      sandbox_kills=$((sandbox_kills + 1))
    fi
    gone "kill -9 in round $r"
    kill -9 "$send" 2>/dev/null; wait "$send" 2>/dev/null
  done
  [[ -z "${serve_pid:-}" ]] || { kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""; }
  hostile_inputs
  sandbox_result="$sandbox_rounds rounds of ${#escapes[@]} escapes ($half through serve), $sandbox_kills kill -9 mid-command; escapes that worked: $escaped${seen[*]:+ (${!seen[*]})}; processes that outlived their call: $survivors; $hostile_result"
  ((escaped + survivors + hostile_failed == 0)) || failures=$((failures + 1))
}

# What another user or a hostile file can do, in the same repository: the PDF whose 300
# pages share one stream that inflates to 60 MB (attached under a 2 GiB address-space limit,
# it must finish), and a directory of another user's where commands get their $TMPDIR (at
# the old predictable name, and in place of the one in use: every command must still run).
hostile_result="" hostile_failed=0
hostile_inputs() {
  local dir="$work/sandbox" tmp="$work/sandbox-tmp"
  python3 "$root/bench/hostile_pdf.py" 300 60 shared >"$dir/bomb.pdf"
  local started=$SECONDS
  if (cd "$dir" && ulimit -v $((2 << 20)) && exec timeout 120 "$bin" attach add bomb.pdf </dev/null >/dev/null 2>"$work/bomb.err"); then
    hostile_result="hostile PDF ($(($(stat -c %s "$dir/bomb.pdf") / 1024)) KB, 300 pages, 60 MB stream) read in $((SECONDS - started)) s under ulimit -v 2 GiB"
  else
    hostile_failed=$((hostile_failed + 1)); hostile_result="hostile PDF FAILED: $(tail -1 "$work/bomb.err")"
  fi
  if ((EUID != 0)); then
    hostile_result+="; foreign TMPDIR base: skipped (needs root to make another user's directory)"
    return
  fi
  mkdir -p "$tmp" && chmod 1777 "$tmp"
  install -d -o 65534 -g 65534 -m 700 "$tmp/axocoatl-commands-0"
  local ran=0 rounds=3
  for ((r = 0; r < rounds; r++)); do
    (cd "$dir" && exec env TMPDIR="$tmp" "$bin" send --json -s "t$r" escape </dev/null >"$work/tmpdir.out" 2>/dev/null)
    if jq -r 'select(.type == "tool.result") | .output' "$work/tmpdir.out" | grep -q 'started'; then ran=$((ran + 1)); fi
    # Another user's directory in place of the base in use.
    local base; base=$(find "$tmp" -maxdepth 1 -user 0 -name 'axocoatl-commands-0-*' | head -1)
    [[ -z "$base" ]] || { rm -rf "$base"; install -d -o 65534 -g 65534 -m 777 "$base"; }
  done
  ((ran == rounds)) || hostile_failed=$((hostile_failed + 1))
  hostile_result+="; commands that ran with another user's directory where their TMPDIR is made: $ran of $rounds"
}

# ---------------------------------------------------------------- hostile chat templates
# The default model rewritten with chat templates that loop for ever or allocate without
# bound (scripts/gguf_template.py). Each turn must end within a minute, failed, with the
# template named, under a 4 GiB address-space limit: a hang or an abort is a failure. Half
# through serve (the actor renders), half without.
template_result="skipped"
template_held=0 template_broke=0
hostile_templates() {
  local model="${AXOCOATL_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
  if [[ ! -f "$model" ]]; then template_result="skipped: no model at $model (scripts/fetch-model.sh)"; return; fi
  local dir="$work/templates"
  mkdir -p "$dir"
  (cd "$dir" && "$bin" init >/dev/null) || { template_result="init failed"; failures=$((failures + 1)); return; }
  printf 'agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: 4}\n' >"$dir/axocoatl.yaml"
  local -A templates=(
    [loops]="{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"
    [doubling]="{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
    [repeat]="{{ 'x' * 100000000000 }}"
    [replace]="{% set s = 'x' * 1000000 %}{{ s.replace('', s) }}"
    [flood]="{% for i in range(1000) %}{% for j in range(1000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}{% endfor %}"
    [recursion]="{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
  )
  local name
  for name in "${!templates[@]}"; do
    printf '%s' "${templates[$name]}" >"$dir/$name.jinja"
    python3 "$root/scripts/gguf_template.py" "$model" "$dir/$name.gguf" "$dir/$name.jinja" || { template_result="gguf_template.py failed"; failures=$((failures + 1)); return; }
  done
  local r through out code state error
  for ((r = 0; r < TEMPLATE_ROUNDS; r++)); do
    for through in direct serve; do
      for name in "${!templates[@]}"; do
        if [[ $through == serve ]]; then
          (cd "$dir" && ulimit -v $((4 << 20)) && exec env AXOCOATL_MODEL="$dir/$name.gguf" "$bin" serve </dev/null >/dev/null 2>>"$work/templates-serve.err") &
          serve_pid=$!
          for ((w = 0; w < 300; w++)); do [[ -S "$dir/.axocoatl/run/serve.sock" ]] && break; sleep 0.1; done
        fi
        out=$(cd "$dir" && ulimit -v $((4 << 20)) && AXOCOATL_MODEL="$dir/$name.gguf" timeout 60 "$bin" send --json -s "$name-$r-$through" hi </dev/null 2>/dev/null)
        code=$?
        state=$(tail -1 <<<"$out" | jq -r '.state // empty' 2>/dev/null)
        error=$(tail -1 <<<"$out" | jq -r '.error // empty' 2>/dev/null)
        if [[ $code == 3 && $state == failed && $error == *"chat template"* ]]; then
          template_held=$((template_held + 1))
        else
          template_broke=$((template_broke + 1)); log "hostile template $name ($through, round $r): exit $code, state ${state:-none}: ${error:-$out}"
        fi
        if [[ $through == serve ]]; then kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""; fi
      done
    done
  done
  template_result="$((template_held + template_broke)) turns of ${#templates[@]} hostile templates (half through serve): $template_held ended failed with the template named, $template_broke hung, aborted or said something else"
  ((template_broke == 0)) || failures=$((failures + 1))
}

# ---------------------------------------------------------------- decoders
prop_result="skipped"
proptests() {
  local started=$SECONDS
  if AXOCOATL_PROPTEST_CASES=$PROPTEST_CASES cargo test --release --locked -p axocoatl-store props -- --test-threads 2 >"$work/props.log" 2>&1; then
    prop_result="$(grep -c '^test .* ok$' "$work/props.log") properties x $PROPTEST_CASES cases passed in $((SECONDS - started)) s"
  else
    prop_result="FAILED (see below)"; failures=$((failures + 1)); tail -40 "$work/props.log" >&2
  fi
}

start=$SECONDS
skip killloop || kill_loop
skip diskfull || disk_full
skip fsize || file_size_limit
skip serve || serve_soak
skip sandbox || sandbox_escapes
skip sandbox || hostile_templates
skip proptest || proptests

echo "soak: kill loops: $iterations iterations, $kills processes killed, $repos repositories (segments of $SEGMENT_LIMIT bytes)"
echo "soak: lost acknowledged turns: $lost; turns without one terminal state: $nonterminal; history failing after a kill: $open_fail; unusable repositories: $unusable"
echo "soak: disk full (3 MiB tmpfs): $full_result"
[[ -z "$full_sample" ]] || echo "soak: disk full, first refusal: $full_sample"
echo "soak: ulimit -f: $fsize_result"
echo "soak: serve: $serve_result"
echo "soak: sandbox: $sandbox_result"
echo "soak: hostile chat templates: $template_result"
echo "soak: decoder properties: $prop_result"
echo "soak: $((SECONDS - start)) s, $failures failures"
((failures == 0))
