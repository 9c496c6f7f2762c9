"""The message-bus functions of the seed documents (docs/PROTOCOL.md, introduction), as Python gods
run them, with their obvious bugs fixed: `f.write_file` -> `f.write`; the append now takes flock on
queue.jsonl (docs/PROTOCOL.md §3.2); timestamps are timezone-aware so `expires_at` ("...Z") compares
with now; release and heartbeat hold .lock_mutex.
Standard library only."""

import fcntl
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import uuid4


def now_ts():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s):
    s = s.strip().replace("Z", "+00:00")
    t = datetime.fromisoformat(s)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def post_message(bus_path, msg_type, source, payload):
    message = {
        "id": f"msg-{uuid4()}",
        "type": msg_type,
        "source": source,
        "timestamp": now_ts(),
        "payload": payload,
    }
    line = json.dumps(message) + "\n"
    with open(f"{bus_path}/queue.jsonl", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(line)
            f.flush()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    if msg_type in ["TASK_COMPLETE", "FILE_UNLOCK", "BOARD_RESOLVE"]:
        os.makedirs(f"{bus_path}/events", exist_ok=True)
        event_file = f"{bus_path}/events/{msg_type}_{payload.get('task_id', 'all')}.event"
        Path(event_file).write_text(message["id"])
    return message


def read_messages(bus_path, since=None, msg_type=None):
    messages = []
    with open(f"{bus_path}/queue.jsonl", "r") as f:
        for line in f:
            msg = json.loads(line)
            if since and parse_ts(msg["timestamp"]) < parse_ts(since):
                continue
            if msg_type and msg["type"] != msg_type:
                continue
            messages.append(msg)
    return messages


def acquire_lock(bus_path, filepath, worker_id):
    """Seed semantics: returns False when the mutex is busy (LOCK_NB) or a live lock is held by another."""
    locks_file = f"{bus_path}/locks.json"
    mutex_file = f"{bus_path}/.lock_mutex"
    lock_fd = open(mutex_file, "a")
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_fd.close()
        return False
    try:
        locks = {}
        if os.path.exists(locks_file):
            with open(locks_file) as f:
                locks = json.load(f)
        existing = locks.get(filepath)
        if isinstance(existing, str):
            existing = {"worker_id": existing}
        if existing and existing.get("worker_id") != worker_id:
            exp = existing.get("expires_at")
            if exp is None or parse_ts(exp) > datetime.now(timezone.utc):
                return False
        now = datetime.now(timezone.utc)
        locks[filepath] = {
            "worker_id": worker_id,
            "acquired_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "expires_at": (now + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "lock_type": "exclusive",
        }
        tmp = locks_file + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(locks, f, indent=2)
        os.replace(tmp, locks_file)
        post_message(bus_path, "FILE_LOCK", worker_id, {"filepath": filepath})
        return True
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        lock_fd.close()


def release_lock(bus_path, filepath, worker_id):
    locks_file = f"{bus_path}/locks.json"
    with open(f"{bus_path}/.lock_mutex", "a") as m:
        fcntl.flock(m, fcntl.LOCK_EX)
        locks = json.load(open(locks_file)) if os.path.exists(locks_file) else {}
        entry = locks.get(filepath)
        holder = entry if isinstance(entry, str) else (entry or {}).get("worker_id")
        if holder != worker_id:
            return False
        del locks[filepath]
        tmp = locks_file + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(locks, f, indent=2)
        os.replace(tmp, locks_file)
        post_message(bus_path, "FILE_UNLOCK", worker_id, {"filepath": filepath})
        return True


def update_worker_status(bus_path, worker_id, task_id, status, progress):
    status_file = f"{bus_path}/worker-status.json"
    with open(f"{bus_path}/.lock_mutex", "a") as m:
        fcntl.flock(m, fcntl.LOCK_EX)
        statuses = json.load(open(status_file)) if os.path.exists(status_file) else {}
        entry = statuses.get(worker_id, {})
        entry.update({
            "task_id": task_id,
            "status": status,
            "progress_pct": progress,
            "last_heartbeat": now_ts(),
        })
        statuses[worker_id] = entry
        tmp = status_file + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(statuses, f, indent=2)
        os.replace(tmp, status_file)


def get_messages_for_director(bus_path, director):
    """The seed's director polling: every discussion line addressed to `director` or to ALL."""
    messages = []
    with open(f"{bus_path}/board/discussion.jsonl") as f:
        for line in f:
            if line.strip():
                msg = json.loads(line)
                if msg["to"] == director or msg["to"] == "ALL":
                    messages.append(msg)
    return messages


def resolve_board_vote(bus_path):
    """The seed's resolution: counts votes.json, posts BOARD_RESOLVE, touches its event."""
    votes = json.load(open(f"{bus_path}/board/votes.json"))
    approve = sum(1 for v in votes.values() if v["final_verdict"] == "APPROVE")
    reject = len(votes) - approve
    if approve >= 4:
        verdict = "APPROVED"
    elif approve == 3:
        verdict = "APPROVED_WITH_REVIEW"
    elif reject >= 3:
        verdict = "REJECTED"
    else:
        verdict = "ESCALATE"
    resolution = {"verdict": verdict, "vote_summary": {d: v["final_verdict"] for d, v in votes.items()},
                  "conditions": [], "timestamp": now_ts()}
    post_message(bus_path, "BOARD_RESOLVE", "orchestrator", resolution)
    Path(f"{bus_path}/events/BOARD_RESOLVE.event").touch()
    return resolution
