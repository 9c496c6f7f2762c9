#!/usr/bin/env python3
"""Rewrites reads of `App`'s former `pub` fields into its accessors, from the compiler's errors.

`App` (src/console/app/mod.rs) has no `pub` field; code written against the old fields (a branch
merged after the change) fails with E0616 "field `x` of struct `App` is private". This reads those
errors and rewrites each read at its span:

  cargo check --all-targets --message-format=json 2>/dev/null | python3 scripts/app-accessors.py

`app.snapshot` -> `app.snapshot()`, `app.now` -> `app.now()`, `app.pane` -> `app.pane()`,
`app.panes` -> `app.panes()`, `app.mode` -> `app.mode()`, `app.keymap` -> `app.keymap()`,
`app.replay(.as_ref())` -> `app.replay()`, `app.absolute_times` -> `app.absolute_times()`,
`app.drawn` -> `app.drawn()`, `app.flash(.clone()|.as_ref())` -> `app.shown_flash()(.cloned())`.
Writes are left to a person (the errors that remain say where): `app.pane = p` is
`app.set_pane(p)`, `app.mode = m` `app.set_mode(m)`, `&mut app.mode` `app.mode_mut()`,
`app.panes.x.y = v` `app.panes_mut().x.y = v`, `app.flash = None` `app.clear_flash()`,
`app.now = t` `app.set_now(t)`, `app.replay = r` `app.set_replay(r)`. Run it until it makes no
edit, then `cargo clippy --fix` (needless borrows such as `&app.snapshot()`) and `cargo fmt --all`.
"""
import json,sys,re,collections

acc={"keymap":"keymap()","pane":"pane()","panes":"panes()","mode":"mode()","snapshot":"snapshot()",
     "now":"now()","replay":"replay()","absolute_times":"absolute_times()","drawn":"drawn()"}
edits=collections.defaultdict(set)
other=[]
for line in sys.stdin:
    try: m=json.loads(line)
    except: continue
    if m.get("reason")!="compiler-message": continue
    msg=m["message"]
    if msg.get("code") and msg["code"]["code"]=="E0616" and re.search(r"of struct `(?:[\w:]*::)?App` is private", msg["message"]):
        f=re.search(r"field `(\w+)`",msg["message"]).group(1)
        for sp in msg["spans"]:
            if sp["is_primary"]:
                edits[sp["file_name"]].add((sp["line_start"],sp["column_start"],sp["column_end"],f))
    elif msg["level"]=="error":
        sp=[s for s in msg["spans"] if s["is_primary"]]
        other.append((msg["message"], sp[0]["file_name"]+":"+str(sp[0]["line_start"]) if sp else ""))
n=0
for fn,es in edits.items():
    lines=open(fn).read().split("\n")
    for (l,c0,c1,f) in sorted(es,key=lambda e:(e[0],-e[1])):
        t=lines[l-1]
        seg=t[c0-1:c1-1]
        assert seg==f,(fn,l,seg,f)
        if f=="flash":
            rest=t[c1-1:]
            if rest.startswith(".clone()"):
                t=t[:c0-1]+"shown_flash().cloned()"+t[c1-1+len(".clone()"):]
            elif rest.startswith(".as_ref()"):
                t=t[:c0-1]+"shown_flash()"+t[c1-1+len(".as_ref()"):]
            else:
                t=t[:c0-1]+"shown_flash()"+t[c1-1:]
        elif f=="replay" and t[c1-1:].startswith(".as_ref()"):
            t=t[:c0-1]+"replay()"+t[c1-1+len(".as_ref()"):]
        else:
            t=t[:c0-1]+acc[f]+t[c1-1:]
        lines[l-1]=t; n+=1
    open(fn,"w").write("\n".join(lines))
print("edits",n)
for o in other[:60]: print(o)
