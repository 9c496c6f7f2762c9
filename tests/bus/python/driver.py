"""Test driver: runs seed functions (seed_bus.py) as a real Python process. Usage:
  driver.py post BUS N SOURCE              post N PROGRESS messages
  driver.py hold-mutex BUS                 take .lock_mutex, print "held", release on a stdin line
  driver.py try-lock BUS PATH WORKER       seed acquire_lock once; prints {"acquired": bool}
  driver.py release BUS PATH WORKER        seed release_lock; prints {"released": bool}
  driver.py heartbeat BUS WORKER TASK STATUS PROGRESS
  driver.py read-all BUS                   parse every file we write; print a summary (fails on any bad line)
  driver.py board-readers BUS DIRECTOR     the seed's get_messages_for_director and resolve_board_vote
  driver.py read-messages BUS              the seed's read_messages (json.loads on every line); prints the count
  driver.py slow-post BUS PAUSE_MS         the seed's unlocked append, in two writes: half a line, then (once
                                            another writer holds the queue's flock) a pause and the rest
  driver.py contend BUS COUNTERS SECONDS WORKER MODE PANTHEON ROOT TRACK
                                            MODE=cli (pantheon bus lock/unlock) or seed (acquire_lock)
"""
import fcntl
import glob
import json
import os
import random
import subprocess
import sys
import time
from uuid import uuid4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_bus  # noqa: E402


def read_all(bus):
    out = {}
    with open(f"{bus}/queue.jsonl") as f:
        lines = f.read().split("\n")
    assert lines[-1] == "", "queue.jsonl does not end in a newline"
    msgs = [json.loads(line) for line in lines[:-1]]
    for m in msgs:
        assert set(["id", "type", "source", "timestamp", "payload"]) <= set(m), m
        seed_bus.parse_ts(m["timestamp"])
    out["queue"] = len(msgs)
    out["types"] = sorted(set(m["type"] for m in msgs))
    out["locks"] = json.load(open(f"{bus}/locks.json"))
    for entry in out["locks"].values():
        seed_bus.parse_ts(entry["expires_at"])
    out["workers"] = json.load(open(f"{bus}/worker-status.json"))
    board = f"{bus}/board"
    sessions = glob.glob(f"{board}/session-*.json")
    out["sessions"] = [json.load(open(s)) for s in sessions]
    for name in ("assessments", "votes"):
        p = f"{board}/{name}.json"
        out[name] = json.load(open(p)) if os.path.exists(p) else None
    p = f"{board}/discussion.jsonl"
    out["discussion"] = [json.loads(l) for l in open(p)] if os.path.exists(p) else None
    p = f"{board}/resolution.md"
    out["resolution_md"] = open(p).read() if os.path.exists(p) else None
    out["events"] = {os.path.basename(e): open(e).read() for e in glob.glob(f"{bus}/events/*.event")}
    return out


def contend(bus, counters, seconds, worker, mode, pantheon, root, track):
    paths = ["src/a.ts", "src/b.ts", "src/c.ts"]
    stats = {"acquired": 0, "refused": 0, "violations": 0, "release_failures": 0}
    deadline = time.time() + seconds
    env = dict(os.environ, PANTHEON_LOCK_TIMEOUT_MS="2000")
    while time.time() < deadline:
        path = random.choice(paths)
        if mode == "cli":
            r = subprocess.run([pantheon, "--root", root, "bus", "--track", track, "lock", path,
                                "--worker", worker], capture_output=True, env=env)
            ok = r.returncode == 0
        else:
            ok = seed_bus.acquire_lock(bus, path, worker)
        if not ok:
            stats["refused"] += 1
            continue
        stats["acquired"] += 1
        counter = os.path.join(counters, path.replace("/", "_"))
        with open(counter, "a+") as f:
            f.seek(0)
            holders = int(f.read() or "0")
        if holders != 0:
            stats["violations"] += 1
        with open(counter, "w") as f:
            f.write(str(holders + 1))
        time.sleep(0.002)
        with open(counter, "r+") as f:
            now = int(f.read() or "0")
            if now != holders + 1:
                stats["violations"] += 1
            f.seek(0)
            f.truncate()
            f.write(str(now - 1))
        if mode == "cli":
            r = subprocess.run([pantheon, "--root", root, "bus", "--track", track, "unlock", path,
                                "--worker", worker], capture_output=True, env=env)
            released = r.returncode == 0
        else:
            released = seed_bus.release_lock(bus, path, worker)
        if not released:
            stats["release_failures"] += 1
    print(json.dumps(stats))


def slow_post(bus, pause_ms):
    """The seed's original post_message appends without the queue's lock; a long line reaches the file
    in pieces. Write half a line, wait until a locked writer is inside its append (holding the flock),
    pause, then finish the line. (A writer that does not wait for a torn tail to settle has fenced
    and written by then: the file grew, which ends the wait too.)"""
    message = {"id": "msg-slow", "type": "PROGRESS", "source": "slow", "timestamp": seed_bus.now_ts(),
               "payload": {"task_id": "py", "note": "x" * 200}}
    line = json.dumps(message) + "\n"
    queue = f"{bus}/queue.jsonl"
    with open(queue, "a") as f:
        f.write(line[: len(line) // 2])
        f.flush()
        print("half", flush=True)
        half = os.path.getsize(queue)
        deadline = time.time() + 20
        with open(queue, "a") as probe:
            while os.path.getsize(queue) == half:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(probe, fcntl.LOCK_UN)
                except BlockingIOError:
                    break
                assert time.time() < deadline, "no writer took the queue's lock"
                time.sleep(0.0002)
        time.sleep(pause_ms / 1000)
        f.write(line[len(line) // 2:])
        f.flush()
    print(json.dumps({"posted": 1}))


def post_unlocked(bus, count, source):
    """The seed's post_message exactly as the seed document writes it: open in append mode and write,
    with no lock at all. Every seventh line carries a large payload (~96 KiB), which reaches the file in
    several pieces that other processes can see half-copied."""
    for i in range(count):
        payload = {"task_id": "py", "progress_pct": i}
        if i % 7 == 0:
            payload["note"] = "y" * (96 * 1024)
        message = {"id": f"msg-{uuid4()}", "type": "PROGRESS", "source": source,
                   "timestamp": seed_bus.now_ts(), "payload": payload}
        with open(f"{bus}/queue.jsonl", "a") as f:
            f.write(json.dumps(message) + "\n")
        time.sleep(0.004)  # spread the lines over the time the pantheon writers run
    print(json.dumps({"posted": count}))


def main():
    cmd, bus = sys.argv[1], sys.argv[2]
    if cmd == "post":
        for i in range(int(sys.argv[3])):
            seed_bus.post_message(bus, "PROGRESS", sys.argv[4], {"task_id": "py", "progress_pct": i})
        print(json.dumps({"posted": int(sys.argv[3])}))
    elif cmd == "post-unlocked":
        post_unlocked(bus, int(sys.argv[3]), sys.argv[4])
    elif cmd == "hold-mutex":
        with open(f"{bus}/.lock_mutex", "a") as m:
            fcntl.flock(m, fcntl.LOCK_EX)
            print("held", flush=True)
            sys.stdin.readline()
            fcntl.flock(m, fcntl.LOCK_UN)
    elif cmd == "try-lock":
        print(json.dumps({"acquired": seed_bus.acquire_lock(bus, sys.argv[3], sys.argv[4])}))
    elif cmd == "release":
        print(json.dumps({"released": seed_bus.release_lock(bus, sys.argv[3], sys.argv[4])}))
    elif cmd == "heartbeat":
        seed_bus.update_worker_status(bus, sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
        print("{}")
    elif cmd == "read-messages":
        print(json.dumps({"messages": len(seed_bus.read_messages(bus))}))
    elif cmd == "slow-post":
        slow_post(bus, float(sys.argv[3]))
    elif cmd == "board-readers":
        messages = seed_bus.get_messages_for_director(bus, sys.argv[3])
        print(json.dumps({"messages": len(messages), "verdict": seed_bus.resolve_board_vote(bus)["verdict"]}))
    elif cmd == "read-all":
        print(json.dumps(read_all(bus)))
    elif cmd == "contend":
        contend(bus, sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7],
                sys.argv[8], sys.argv[9])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
