#!/usr/bin/env python3
"""Rewrites a pantheon journal the way someone who can write the root would, then recomputes the
hash chain so that the chain alone no longer shows it (20 lines of Python, as the adversarial pass did).

    forge_journal.py JOURNAL rewrite   # entry 2's actor becomes mallory, entry 4 is deleted, a forged
                                       # `approve` is inserted after the (new) entry 4; then renumber
    forge_journal.py JOURNAL rechain   # only renumber and recompute (after a deletion by hand)

An entry's hash is the SHA-256 of its compact JSON without `hash`, keys in the order written; `prev` is
the hash of the entry before (64 zeros for the first).
"""
import hashlib
import json
import sys

path, mode = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as f:
    entries = [json.loads(line) for line in f if line.strip()]

if mode == "rewrite":
    entries[1]["actor"] = "mallory"
    del entries[3]
    forged = dict(entries[3])
    forged.update(
        actor="mallory",
        source="cli",
        action="approve",
        targets={"handoff_id": "hof_20260614_f0f0f0"},
        reason=None,
        outcome="approved",
    )
    entries.insert(4, forged)

prev = "0" * 64
lines = []
for seq, entry in enumerate(entries, 1):
    entry.pop("hash", None)
    entry["seq"] = seq
    entry["prev"] = prev
    body = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
    prev = hashlib.sha256(body.encode("utf-8")).hexdigest()
    entry["hash"] = prev
    lines.append(json.dumps(entry, separators=(",", ":"), ensure_ascii=False))

with open(path, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))
