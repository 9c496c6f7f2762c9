"""A foreign reader of a paused root, written from docs/PROTOCOL.md alone (standard library only).

    paused_reader.py ROOT GOD

Reads `conductor/paused.json` as a plain JSON file (a missing file: nothing is paused) and the god's
inbox directory by hand, as the seed documents' gods do, and prints
{"paused": bool, "until": ..., "reason": ..., "inbox": [handoff ids], "deadlines": {hid: ack_deadline},
 "held": [handoff ids held for a pause]}.
"""
import glob
import json
import os
import sys


def main():
    root, god = sys.argv[1], sys.argv[2]
    path = os.path.join(root, "conductor", "paused.json")
    try:
        with open(path) as f:
            paused = json.load(f)
    except FileNotFoundError:
        paused = {"pauses": []}
    mine = [
        p
        for p in paused.get("pauses", [])
        if p.get("kind") == "all" or (p.get("kind") == "god" and p.get("name") == god)
    ]
    inbox, deadlines = [], {}
    for f in sorted(glob.glob(os.path.join(root, "conductor", "pending", god, "*.json"))):
        with open(f) as fh:
            d = json.load(fh)
        inbox.append(d["handoff_id"])
        deadlines[d["handoff_id"]] = d.get("ack_deadline")
    held = []
    for f in sorted(glob.glob(os.path.join(root, "conductor", "pending", "_quarantine", "*.json"))):
        with open(f) as fh:
            d = json.load(fh)
        parts = (d.get("held_because") or "").split("; ")
        if any(part == "paused" or part.startswith("paused: ") for part in parts):
            held.append(d["handoff_id"])
    print(
        json.dumps(
            {
                "paused": bool(mine),
                "until": mine[0].get("until") if mine else None,
                "reason": mine[0].get("reason") if mine else None,
                "inbox": inbox,
                "deadlines": deadlines,
                "held": held,
            }
        )
    )


if __name__ == "__main__":
    main()
