"""Blank-line stress under load (docs/PROTOCOL.md 3.2): seed-style writers that append without any lock
race our locked appends while one CPU burner per core keeps the machine busy. Usage:

  load_stress.py PANTHEON ROOT TRACK SECONDS [SEED_WRITERS]

For SECONDS, at once:
  - one CPU burner per core (a busy loop, same priority as everyone else);
  - SEED_WRITERS (default 3) processes running the seed document's original `post_message`: `open("a")`,
    one `write` of `json.dumps(msg) + "\\n"`, no lock; line sizes drawn from 10 B to 70 KB;
  - one `pantheon bus lock`/`unlock` loop (each call posts FILE_LOCK / FILE_UNLOCK under the queue's lock);
  - one `pantheon mcp` server, sent `post_message` calls over its stdio wire one after another.
Then it reads the queue and prints one JSON object: lines, blank lines (with the line before each),
lines that are not JSON, how many each kind of writer posted, and whether the seed's own `read_messages`
read every line. Exit status 0 whenever the run itself worked; the caller judges the figures.
"""
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from uuid import uuid4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_bus  # noqa: E402


def burn(stop_at):
    x = 0
    while time.time() < stop_at:
        for _ in range(100000):
            x += 1


def seed_writer(bus, source, stop_at, seed, out):
    """The seed's post_message as the seed document writes it (no lock): one line per open/write/close."""
    rng = random.Random(seed)
    n = 0
    while time.time() < stop_at:
        size = int(10 ** rng.uniform(1, 4.85))  # 10 B to ~70 KB, most lines short
        payload = {"task_id": "py", "n": n}
        if size > 40:
            payload["note"] = "s" * (size - 40)
        message = {"id": f"msg-{uuid4()}", "type": "PROGRESS", "source": source,
                   "timestamp": seed_bus.now_ts(), "payload": payload}
        with open(f"{bus}/queue.jsonl", "a") as f:
            f.write(json.dumps(message) + "\n")
        n += 1
        time.sleep(rng.uniform(0, 0.003))
    out.put((source, n))


def lock_loop(pantheon, root, track, stop_at, out):
    env = dict(os.environ, PANTHEON_LOCK_TIMEOUT_MS="30000")
    base = [pantheon, "--root", root, "bus", "--track", track]
    n = failures = 0
    while time.time() < stop_at:
        path = f"src/f{n % 3}.ts"
        for verb in ("lock", "unlock"):
            r = subprocess.run(base + [verb, path, "--worker", "locker"], capture_output=True, env=env)
            if r.returncode == 0:
                n += 1
            else:
                failures += 1
                sys.stderr.write(f"{verb} failed: {r.stderr.decode()[-400:]}\n")
    out.put(("locker", n, failures))


def mcp_loop(pantheon, root, track, stop_at, out):
    env = dict(os.environ, PANTHEON_LOG="warn", PANTHEON_LOCK_TIMEOUT_MS="30000")
    p = subprocess.Popen([pantheon, "--root", root, "mcp"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)

    def call(req):
        p.stdin.write((json.dumps(req) + "\n").encode())
        p.stdin.flush()
        if "id" not in req:
            return None
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("pantheon mcp closed its output")
            msg = json.loads(line)
            if msg.get("id") == req["id"]:
                return msg

    call({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "load-stress", "version": "1"}}})
    call({"jsonrpc": "2.0", "method": "notifications/initialized"})
    n = failures = 0
    while time.time() < stop_at:
        r = call({"jsonrpc": "2.0", "id": n + failures + 1, "method": "tools/call",
                  "params": {"name": "post_message",
                             "arguments": {"track": track, "msg_type": "PROGRESS", "source": "mcp",
                                           "payload": {"task_id": "mcp", "n": n}}}})
        if "result" in r and not r["result"].get("isError"):
            n += 1
        else:
            failures += 1
            sys.stderr.write(f"post_message failed: {json.dumps(r)[:400]}\n")
    p.stdin.close()
    p.wait(timeout=30)
    out.put(("mcp", n, failures))


def main():
    pantheon, root, track, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    writers = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    bus = f"{root}/conductor/tracks/{track}/.message-bus"
    start_bytes = os.path.getsize(f"{bus}/queue.jsonl") if os.path.exists(f"{bus}/queue.jsonl") else 0
    stop_at = time.time() + seconds
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=burn, args=(stop_at,)) for _ in range(os.cpu_count() or 1)]
    procs += [multiprocessing.Process(target=seed_writer, args=(bus, f"seed-{i}", stop_at, i + 1, out))
              for i in range(writers)]
    procs.append(multiprocessing.Process(target=lock_loop, args=(pantheon, root, track, stop_at, out)))
    procs.append(multiprocessing.Process(target=mcp_loop, args=(pantheon, root, track, stop_at, out)))
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in range(writers + 2)]
    for p in procs:
        p.join(timeout=60)
    posted = {}
    failures = 0
    for r in results:
        posted[r[0]] = r[1]
        if len(r) > 2:
            failures += r[2]

    with open(f"{bus}/queue.jsonl", "rb") as f:
        f.seek(start_bytes)
        data = f.read()
    lines = data.split(b"\n")
    terminated = lines[-1] == b""
    lines = lines[:-1]
    blank, bad, seen = [], 0, {}
    for i, line in enumerate(lines):
        if not line.strip():
            prev = lines[i - 1][:120].decode(errors="replace") if i else ""
            blank.append(prev)
            continue
        try:
            m = json.loads(line)
            seen[m["source"]] = seen.get(m["source"], 0) + 1
        except ValueError:
            bad += 1
    try:
        seed_read = len(seed_bus.read_messages(bus))
        seed_error = None
    except Exception as e:  # the seed's reader raises on the first line it cannot parse
        seed_read, seed_error = None, repr(e)[:200]
    print(json.dumps({
        "lines": len(lines), "blank": len(blank), "blank_after": blank[:5], "not_json": bad,
        "terminated": terminated, "posted": posted, "seen": seen, "failures": failures,
        "seed_read": seed_read, "seed_error": seed_error,
    }))


if __name__ == "__main__":
    main()
