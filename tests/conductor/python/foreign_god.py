"""A foreign god that writes its own inbox by hand, as docs/PROTOCOL.md's appendix shows.

    foreign_god.py ROOT GOD WORKFLOW_ID HANDOFF_ID [--gate] [--no-lock]

Marks its dispatch `pending` (with an ETA and a message) by rewriting the inbox file in place: a
read-modify-write under the workflow's flock (section 1.5), written atomically (A.1). Prints
{"status": "rewrote"} or, when the dispatch is no longer in the inbox, {"status": "gone"}.
`--no-lock` skips the flock (what a seed god that ignores section 1.5 does), for checking that the
race tests catch it. `--gate`: say "ready" on stderr once started, then wait for one line on stdin, so a
race releases it together with the other racers.
"""
import contextlib
import fcntl
import json
import os
import sys
import tempfile
import time


@contextlib.contextmanager
def flocked(path, timeout=10.0):
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path} stayed locked for {timeout}s")
                time.sleep(0.005)
        yield fd
    finally:
        os.close(fd)


def write_json_atomic(path, value):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".part")
    try:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(value, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def mark_pending(root, god, wf, hid):
    path = f"{root}/conductor/pending/{god}/{hid}.json"
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        return "gone"
    d["ack_status"] = "pending"
    # A fixed ETA and message, so every run writes the same bytes.
    d["eta"] = "2030-01-01T00:00:00.000000Z"
    d["message"] = "python: on it soon"
    write_json_atomic(path, d)
    return "rewrote"


def main():
    root, god, wf, hid = sys.argv[1:5]
    if "--gate" in sys.argv:
        print("ready", file=sys.stderr, flush=True)
        sys.stdin.readline()
    if "--no-lock" in sys.argv:
        status = mark_pending(root, god, wf, hid)
    else:
        with flocked(f"{root}/conductor/state/.{wf}.lock"):
            status = mark_pending(root, god, wf, hid)
    print(json.dumps({"status": status}))


if __name__ == "__main__":
    main()
