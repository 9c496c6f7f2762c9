"""Reads a syscall trace of one `pantheon mcp` process and reports what it wrote, what synced it and
when it answered; optionally lays out the root as a power cut would leave it.

Usage: trace_audit.py LOG ROOT [CUT_DIR INITIAL_COPY]

LOG is `strace -f -y -qq -xx -s 1048576 -e trace=...` output (every string and every fd path in
`\\xHH` form); ROOT the root the server ran on. Prints one JSON object:

  {"replies": N,                 # answers written to stdout (fd 1)
   "mutations": N,               # writes, renames, removals, creations under ROOT
   "syncs": {"syncfs": n, "fsync": n, "fdatasync": n},
   "uncovered": [...],           # per answer: a mutation made before it with no covering sync
                                 #  completed between the mutation and the answer
   "renamed_before_data": [...], # a temporary file (`.tmp-*.part`) renamed into place before a
                                 #  sync covering its data (a `syncfs`, or an `fsync`/`fdatasync`
                                 #  of the file, begun after the write) had finished
   "covered_per_reply": [...],   # how many mutations each answer's covering syncs covered
   "cuts": [...]}                # with CUT_DIR: one directory per answer, see below

A mutation is covered by a `syncfs` of any descriptor (the whole file system), or by an
`fsync`/`fdatasync` of the file it wrote or of the directory whose entry it changed, that began
after the mutation finished and finished before the answer began.

With CUT_DIR and INITIAL_COPY (a copy of ROOT taken before the server started, its data on the
disk), the power cut: for each answer k, CUT_DIR/k is INITIAL_COPY with every mutation replayed
that finished before the last `syncfs` finished before answer k began, and nothing else: the root a
crash of the machine at that instant leaves, under the model that a completed `syncfs` made
everything before it durable and nothing after it survived. "cuts" lists the directories.

Then the crash in the middle of an act: for each answer k and each `syncfs` round its act ran
(an act that holds its renames runs two: its data round, then its names round), CUT_DIR/mid-k-i-begin
and CUT_DIR/mid-k-i-end are INITIAL_COPY as a crash at the instant round i began, and at the instant
just before it finished (its sync not done), leaves it when the file system had committed every
change of names before that instant (creations, renames, removals, new directories: what a periodic
journal commit writes) but no data that no sync had covered: a write survives only when a
`syncfs`, or an `fsync`/`fdatasync` of the file it wrote, began after it and finished before the
instant. A file renamed into place before its data was synced is empty there. "mid_cuts" lists them
as {"reply": k, "round": i, "at": "begin" | "end", "dir": ...}.

This script only reads the trace and lays files out; the Rust test (tests/mcp/durable.rs)
decides what is right.
"""

import json
import os
import re
import shutil
import sys

LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(?:<([^>]*)>)?(.*)$", re.S)
HEX = re.compile(r"(?:\\x[0-9a-f]{2})+")


def unhex(s):
    return bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-f]{2})", s))


def parse(log):
    """The calls, each {pid, name, args, ret, ret_path, begin, end} in the order they finished."""
    pending = {}
    calls = []
    with open(log, "r", errors="replace") as f:
        for pos, raw in enumerate(f):
            m = LINE.match(raw.rstrip("\n"))
            if not m:
                continue
            pid, rest = m.group(1), m.group(2)
            if rest.endswith("<unfinished ...>"):
                pending[pid] = (pos, rest[: -len("<unfinished ...>")].rstrip())
                continue
            begin = pos
            r = re.match(r"^<\.\.\. (\w+) resumed>(.*)$", rest)
            if r:
                if pid not in pending:
                    continue
                begin, head = pending.pop(pid)
                rest = head + r.group(2)
            c = CALL.match(rest)
            if not c:
                continue
            calls.append({
                "pid": pid, "name": c.group(1), "args": c.group(2), "ret": c.group(3),
                "ret_path": unhex(c.group(4)).decode("utf-8", "replace") if c.group(4) else None,
                "begin": begin, "end": pos,
            })
    return calls


def split_args(args):
    """Top-level comma-separated arguments (strings are hex, so no comma hides in them)."""
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def fd_of(arg):
    """(fd number or AT_FDCWD, its path) of `5<\\x2f...>`."""
    m = re.match(r"^(\w+)<(.*)>$", arg)
    if not m:
        return arg, None
    return m.group(1), unhex(m.group(2)).decode("utf-8", "replace")


def string_of(arg):
    if arg.startswith('"'):
        return unhex(arg.split('"')[1])
    return b""


def mutations_and_syncs(calls, root):
    """Mutations under root: {kind, paths (what a covering fsync may name), apply, end}; syncs and
    replies: {kind, path, begin, end}."""
    muts, syncs, replies = [], [], []
    offsets = {}
    # The group commit's own count (`.tmp/commit.lock`) is written after the round it counts and
    # is no record of an act: it is not audited, nor replayed.
    lock = os.path.join(root, ".tmp", "commit.lock")
    under = lambda p: p is not None and p != lock and (p == root or p.startswith(root + "/"))
    for c in calls:
        a = split_args(c["args"])
        n = c["name"]
        if c["ret"].startswith("-") or c["ret"] == "?":
            continue
        if n in ("syncfs", "fsync", "fdatasync"):
            syncs.append({"kind": n, "path": fd_of(a[0])[1], "begin": c["begin"], "end": c["end"]})
        elif n in ("write", "pwrite64"):
            fd, path = fd_of(a[0])
            if fd == "1":
                replies.append({"begin": c["begin"], "end": c["end"]})
                continue
            if not under(path):
                continue
            data = string_of(a[1])[: int(c["ret"])]
            key = (c["pid"], fd)
            if n == "pwrite64":
                at = int(a[3])
            else:
                at = offsets.get(key, {"append": True, "at": 0})
                at = None if at["append"] else at["at"]
            muts.append({"kind": "write", "paths": [path], "op": ("write", path, at, data), "end": c["end"]})
            if n == "write" and key in offsets and not offsets[key]["append"]:
                offsets[key]["at"] += len(data)
        elif n == "openat":
            dfd, dpath = fd_of(a[0])
            name = string_of(a[1]).decode("utf-8", "replace")
            path = c["ret_path"] or (os.path.join(dpath, name) if dpath else name)
            offsets[(c["pid"], c["ret"])] = {"append": "O_APPEND" in a[2], "at": 0}
            if under(path) and "O_CREAT" in a[2]:
                muts.append({"kind": "create", "paths": [os.path.dirname(path)],
                             "op": ("create", path, "O_TRUNC" in a[2]), "end": c["end"]})
        elif n == "ftruncate":
            fd, path = fd_of(a[0])
            if under(path):
                muts.append({"kind": "truncate", "paths": [path], "op": ("truncate", path, int(a[1])), "end": c["end"]})
        elif n in ("renameat", "renameat2"):
            _, d1 = fd_of(a[0])
            _, d2 = fd_of(a[2])
            src = os.path.join(d1, string_of(a[1]).decode("utf-8", "replace"))
            dst = os.path.join(d2, string_of(a[3]).decode("utf-8", "replace"))
            if under(dst) or under(src):
                muts.append({"kind": "rename", "paths": [d1, d2], "op": ("rename", src, dst),
                             "begin": c["begin"], "end": c["end"]})
        elif n == "unlinkat":
            _, d = fd_of(a[0])
            p = os.path.join(d, string_of(a[1]).decode("utf-8", "replace"))
            if under(p):
                muts.append({"kind": "unlink", "paths": [d], "op": ("unlink", p, "AT_REMOVEDIR" in a[2]), "end": c["end"]})
        elif n == "mkdirat":
            _, d = fd_of(a[0])
            p = os.path.join(d, string_of(a[1]).decode("utf-8", "replace"))
            if under(p):
                muts.append({"kind": "mkdir", "paths": [d], "op": ("mkdir", p), "end": c["end"]})
    return muts, syncs, replies


def audit(muts, syncs, replies):
    uncovered, covered = [], []
    start = 0
    for k, r in enumerate(replies):
        before = [m for m in muts if m["end"] < r["begin"] and m["end"] >= start]
        done = [s for s in syncs if s["end"] < r["begin"]]
        n = 0
        for m in before:
            ok = any(
                s["begin"] > m["end"] and (s["kind"] == "syncfs" or all(p == s["path"] for p in set(m["paths"])))
                for s in done
            )
            if ok:
                n += 1
            else:
                uncovered.append({"reply": k, "kind": m["kind"], "op": [str(x)[:200] for x in m["op"][:2]]})
        covered.append(n)
        start = r["begin"]
    return uncovered, covered


def renamed_before_data(muts, syncs):
    """Temporary files renamed into place before a sync covering every write to them finished."""
    out = []
    for m in muts:
        if m["kind"] != "rename":
            continue
        src = m["op"][1]
        name = os.path.basename(src)
        if not (name.startswith(".tmp-") and name.endswith(".part")):
            continue
        for w in muts:
            if w["kind"] != "write" or w["paths"] != [src] or w["end"] >= m["begin"]:
                continue
            if not any(s["begin"] > w["end"] and s["end"] < m["begin"]
                       and (s["kind"] == "syncfs" or s["path"] == src) for s in syncs):
                out.append({"rename": [str(x)[:200] for x in m["op"][1:3]]})
                break
    return out


def replay(initial, target, root, ops):
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(initial, target, symlinks=True)
    moved = lambda p: target + p[len(root):]
    for op in ops:
        kind, path = op[0], moved(op[1])
        try:
            if kind == "write":
                _, _, at, data = op
                with open(path, "r+b" if os.path.exists(path) else "w+b") as f:
                    f.seek(0, 2) if at is None else f.seek(at)
                    f.write(data)
            elif kind == "create":
                if op[2] or not os.path.exists(path):
                    open(path, "wb").close()
            elif kind == "truncate":
                os.truncate(path, op[2])
            elif kind == "rename":
                os.replace(path, moved(op[2]))
            elif kind == "unlink":
                shutil.rmtree(path) if op[2] else os.unlink(path)
            elif kind == "mkdir":
                os.mkdir(path)
        except FileNotFoundError:
            # What an earlier cut of the same log left out is not there to change.
            pass


def data_survives(m, t, syncs):
    """A write's data is on the disk at instant t: a sync covering it began after it and ended before t."""
    return any(
        s["begin"] > m["end"] and s["end"] < t and (s["kind"] == "syncfs" or s["path"] in m["paths"])
        for s in syncs
    )


def mid_act_cuts(muts, syncs, replies, cut_dir, initial, root):
    out = []
    previous = -1
    for k, r in enumerate(replies):
        rounds = [s for s in syncs if s["kind"] == "syncfs" and previous < s["begin"] < r["begin"]]
        previous = r["end"]
        for i, s in enumerate(rounds):
            for at, t in (("begin", s["begin"]), ("end", s["end"])):
                ops = [m["op"] for m in muts
                       if m["end"] < t and (m["kind"] != "write" or data_survives(m, t, syncs))]
                target = os.path.join(cut_dir, "mid-%d-%d-%s" % (k, i, at))
                replay(initial, target, root, ops)
                out.append({"reply": k, "round": i, "at": at, "dir": target})
    return out


def main():
    log, root = sys.argv[1], os.path.realpath(sys.argv[2])
    calls = parse(log)
    muts, syncs, replies = mutations_and_syncs(calls, root)
    uncovered, covered = audit(muts, syncs, replies)
    counts = {k: sum(1 for s in syncs if s["kind"] == k) for k in ("syncfs", "fsync", "fdatasync")}
    out = {"replies": len(replies), "mutations": len(muts), "syncs": counts,
           "uncovered": uncovered, "renamed_before_data": renamed_before_data(muts, syncs),
           "covered_per_reply": covered, "cuts": []}
    if len(sys.argv) > 4:
        cut_dir, initial = sys.argv[3], sys.argv[4]
        for k, r in enumerate(replies):
            barriers = [s for s in syncs if s["kind"] == "syncfs" and s["end"] < r["begin"]]
            last = max((s["begin"] for s in barriers), default=-1)
            ops = [m["op"] for m in muts if m["end"] < last]
            target = os.path.join(cut_dir, str(k))
            replay(initial, target, root, ops)
            out["cuts"].append(target)
        out["mid_cuts"] = mid_act_cuts(muts, syncs, replies, cut_dir, initial, root)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
