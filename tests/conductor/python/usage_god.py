"""A Python god doing one step of a workflow through the `pantheon` CLI, as docs/PROTOCOL.md's simplest
conforming god does, optionally reporting what the step cost on the bus.

    usage_god.py PANTHEON ROOT GOD WORKFLOW_ID silent|bus [TRACK]

Takes the workflow's dispatch from its inbox (`pantheon inbox GOD`), acks it `accepted`, and in `bus`
mode posts a USAGE line on TRACK's bus (the seed documents' post_message: one line appended under
flock), then acks it `completed` with no usage. `silent` never mentions usage. Prints the completed
ack's answer as JSON, or {"status": "empty"} when the inbox holds nothing for the workflow.
Standard library only.
"""
import fcntl
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone


def run(pantheon, root, args, doc=None):
    out = subprocess.run(
        [pantheon, "--root", root, *args],
        input=json.dumps(doc) if doc is not None else None,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def post_usage(root, track, god, workflow_id, step):
    bus = os.path.join(root, "conductor", "tracks", track, ".message-bus")
    os.makedirs(bus, exist_ok=True)
    message = {
        "id": f"msg-{uuid.uuid4()}",
        "type": "USAGE",
        "source": god,
        "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "payload": {
            "workflow_id": workflow_id,
            "step": step,
            "usage": {"input_tokens": 120000, "output_tokens": 8000, "model": "claude-sonnet-4-5"},
        },
    }
    with open(os.path.join(bus, "queue.jsonl"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(json.dumps(message) + "\n")
            f.flush()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main():
    pantheon, root, god, wf, mode = sys.argv[1:6]
    track = sys.argv[6] if len(sys.argv) > 6 else "main"
    inbox = run(pantheon, root, ["inbox", god])
    mine = [d for d in inbox["dispatches"] if d.get("workflow_id") == wf]
    if not mine:
        print(json.dumps({"status": "empty"}))
        return
    d = mine[0]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d")
    hex6 = lambda: uuid.uuid4().hex[:6]
    run(pantheon, root, ["ack"], {"ack_id": f"ack_{stamp}_{hex6()}", "handoff_id": d["handoff_id"], "status": "accepted"})
    if mode == "bus":
        post_usage(root, track, god, wf, d["step"])
    done = run(
        pantheon,
        root,
        ["ack"],
        {"ack_id": f"ack_{stamp}_{hex6()}", "handoff_id": d["handoff_id"], "status": "completed",
         "message": f"{god} did {d['step']}"},
    )
    print(json.dumps(done))


if __name__ == "__main__":
    main()
