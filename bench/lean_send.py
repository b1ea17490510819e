#!/usr/bin/env python3
"""The lean `send`, two builds side by side: whole-process `axocoatl send` against a loopback
Ollama stub that answers at once, the builds alternating (median of N each, sessions b0..b3
of one repository, no embedder model: the lexical fallback), beside what starting the binary
costs (`axocoatl --version`) and two `write + fdatasync` in a send's rhythm on the same disk
(as `cargo bench --bench turns` measures its send), and,
when valgrind is installed, each build's instruction count for one more send (callgrind:
repeatable whatever else loads the machine).

    python3 bench/lean_send.py OLD_BINARY NEW_BINARY [N]
"""
import http.server, json, os, shutil, socketserver, statistics, subprocess, sys, tempfile
import threading, time

LINE = json.dumps({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "ok"}, "done": False})
DONE = json.dumps({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1})
BODY = (LINE + "\n" + DONE + "\n").encode()


class Stub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    old, new = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    server = Server(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="lean-send-")
    subprocess.run([new, "init"], cwd=work, check=True, capture_output=True)
    with open(os.path.join(work, "axocoatl.yaml"), "w") as f:
        f.write("providers:\n  llm: {kind: ollama, base_url: \"http://127.0.0.1:%d\"}\n"
                "agents:\n  - id: a\n    provider: llm\n    model: m\n    tools: [core_memory_set]\n"
                % server.server_address[1])
    os.mkdir(os.path.join(work, "no-embedder"))
    env = dict(os.environ, AXOCOATL_EMBED_DIR=os.path.join(work, "no-embedder"))

    def send(binary, i, wrap=()):
        return subprocess.run(list(wrap) + [binary, "send", "--no-stdin", "-s", "b%d" % (i % 4), "hi"],
                              cwd=work, env=env, capture_output=True, check=True)

    times = {old: [], new: []}
    for i in range(n):
        for b in (old, new):
            start = time.perf_counter()
            send(b, i)
            times[b].append((time.perf_counter() - start) * 1e3)
    fd = os.open(os.path.join(work, "sync.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def flush():
        start = time.perf_counter()
        os.write(fd, b"\0" * 100)
        os.fdatasync(fd)
        return time.perf_counter() - start

    pairs = []
    for _ in range(40):
        time.sleep(0.003)
        first = flush()
        time.sleep(0.001)
        pairs.append((first + flush()) * 1e3)
    sync = statistics.median(pairs)

    def spawn(binary):
        # What starting the binary costs before it does anything, started as the sends are.
        v = []
        for _ in range(n):
            start = time.perf_counter()
            subprocess.run([binary, "--version"], capture_output=True, check=True)
            v.append((time.perf_counter() - start) * 1e3)
        return statistics.median(v)

    for label, b in (("old", old), ("new", new)):
        v = sorted(times[b])
        med = statistics.median(v)
        floor = spawn(b)
        line = ("%s: median %.2f ms (quartiles %.2f-%.2f); spawn (--version) %.2f ms; two fdatasyncs here %.2f ms; "
                "beyond spawn and them %.2f ms (goal <= 3 ms; %.2f ms with the spawn)"
                % (label, med, v[len(v) // 4], v[3 * len(v) // 4], floor, sync, med - floor - sync, med - sync))
        if shutil.which("valgrind"):
            out = tempfile.mktemp(prefix="callgrind-")
            r = send(b, n, ("valgrind", "--tool=callgrind", "--callgrind-out-file=" + out))
            count = [l for l in r.stderr.decode().splitlines() if "Collected" in l]
            line += "; instructions of one more send: %s" % (count[0].split(":")[-1].strip() if count else "?")
            os.unlink(out)
        print(line)
    shutil.rmtree(work)


main()
