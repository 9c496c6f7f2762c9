#!/usr/bin/env python3
"""Narrows the shell crate's surface (scripts/narrow-pub.sh runs it; see there).

  python3 scripts/narrow-pub.py prepare   # tests' paths, src/testing.rs, lib.rs's modules
  python3 scripts/narrow-pub.py count     # `pub fn` / `pub mod` of the shell crate's sources

`prepare` is idempotent: run again after a merge, it rewrites new `pantheon::<module>::` paths of the
tests, benches and examples to `pantheon::testing::<module>::`, regenerates `src/testing.rs` (the
facade) from every item they and `src/main.rs` name under `pantheon::testing::`, and declares each
top-level module of `src/lib.rs` `pub(crate)` but `testing`.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "src" / "lib.rs"
FACADE = ROOT / "src" / "testing.rs"
USERS = ["tests", "benches", "examples"]
# What src/lib.rs re-exports itself (the engine and its root types): never behind the facade.
KEEP = {"engine", "Root", "Error", "Result", "testing"}


def top_modules():
    """The top-level modules src/lib.rs declares from files (`pub mod x;`, `pub(crate) mod x;`)."""
    text = LIB.read_text()
    return re.findall(r"^(?:pub(?:\(crate\))? )?mod (\w+);", text, re.M)


def user_files():
    files = [ROOT / "src" / "main.rs"]
    for d in USERS:
        files += sorted((ROOT / d).rglob("*.rs"))
    return [f for f in files if f.is_file()]


def rewrite_paths(mods):
    """`pantheon::<module>::` -> `pantheon::testing::<module>::` in tests, benches and examples."""
    pat = re.compile(r"\bpantheon::(%s)\b" % "|".join(m for m in mods if m not in KEEP))
    changed = 0
    for f in user_files():
        if f.name == "main.rs" and f.parent.name == "src":
            continue
        text = f.read_text()
        new = pat.sub(r"pantheon::testing::\1", text)
        if new != text:
            f.write_text(new)
            changed += 1
    return changed


def split_top(s):
    """Splits `a, b::{c, d}, e` at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out if p.strip()]


def expand(prefix, tree):
    """The full paths a `use` tree names."""
    paths = []
    for part in split_top(tree):
        m = re.match(r"^([\w:]*?)(?:::)?\{(.*)\}$", part, re.S)
        if m:
            pre = [p for p in m.group(1).split("::") if p]
            paths += expand(prefix + pre, m.group(2))
            continue
        part = re.sub(r"\s+as\s+\w+$", "", part)
        if part == "self":
            paths.append(prefix)
        else:
            paths.append(prefix + [p for p in part.split("::") if p])
    return paths


def named_paths():
    """Every path the users name under `pantheon::testing::`, as lists of segments."""
    paths = []
    for f in user_files():
        text = re.sub(r"//[^\n]*", "", f.read_text())
        for m in re.finditer(r"\buse\s+pantheon::testing::([^;]*);", text, re.S):
            tree = m.group(1).strip()
            paths += expand([], tree[1:-1] if tree.startswith("{") else tree)
        for m in re.finditer(r"(?<!use )\bpantheon::testing::([\w:]+)", text):
            paths.append([p for p in m.group(1).split("::") if p])
    return paths


def module_file(segs):
    """The file of the module `segs` (`["console", "app"]`), if it is a module of src/."""
    base = ROOT / "src" / Path(*segs)
    for f in (base.with_suffix(".rs"), base / "mod.rs"):
        if f.is_file():
            return f
    return None


def inline_module(segs):
    """True when `segs` is a module declared inline (`pub mod x {`) in its parent's file."""
    parent = module_file(segs[:-1]) if len(segs) > 1 else LIB
    if parent is None:
        return False
    return re.search(r"^\s*pub(?:\([^)]*\))? mod %s \{" % re.escape(segs[-1]), parent.read_text(), re.M) is not None


def is_module(segs):
    return module_file(segs) is not None or inline_module(segs)


def reexports(mods):
    """The `pub use` lines of module `mods`: {name as seen: (source path segments, source name)}."""
    f = module_file(list(mods)) if mods else LIB
    if f is None:
        return {}
    out = {}
    text = re.sub(r"//[^\n]*", "", f.read_text())
    for m in re.finditer(r"^\s*pub(?:\([^)]*\))? use ([^;]*);", text, re.M):
        for part in split_top(m.group(1).strip()):
            for segs in expand_alias([], part):
                *path, (name, alias) = segs
                out[alias] = (path, name)
    return out


def expand_alias(prefix, tree):
    """Like `expand`, with each leaf a (name, alias) pair."""
    res = []
    for part in split_top(tree):
        m = re.match(r"^([\w:]*?)(?:::)?\{(.*)\}$", part, re.S)
        if m:
            pre = [p for p in m.group(1).split("::") if p]
            res += expand_alias(prefix + pre, m.group(2))
            continue
        a = re.match(r"^([\w:]+?)(?:\s+as\s+(\w+))?$", part.strip())
        if not a:
            continue
        segs = [p for p in a.group(1).split("::") if p]
        name = segs[-1]
        res.append(prefix + segs[:-1] + [(name, a.group(2) or name)])
    return res


def absolute(mods, path):
    """A `use` path written in module `mods`, from the crate root (`None`: another crate's)."""
    if not path:
        return list(mods)
    head = path[0]
    if head == "crate":
        rest = path[1:]
        return None if rest and rest[0] in KEEP else rest
    if head == "super":
        return absolute(list(mods)[:-1], ["self"] + path[1:])
    if head == "self":
        return list(mods) + path[1:]
    if is_module(list(mods) + [head]):
        return list(mods) + path
    return None


def accessible(mods):
    """True when every module of the path is declared `pub` or `pub(crate)` (so `crate::testing`
    may name what is in it)."""
    for i in range(len(mods)):
        parent = module_file(list(mods[:i])) if i else LIB
        if parent is None:
            return False
        if not re.search(r"^\s*pub(?:\(crate\))? mod %s\b" % re.escape(mods[i]), parent.read_text(), re.M):
            return False
    return True


def previous_facade():
    """What the facade re-exported last time: {(facade module path, name): (source path, name)}.
    A run that narrowed an intermediate re-export away (an unused `pub(crate) use`) still knows where
    the item lives."""
    out = {}
    if not FACADE.is_file():
        return out
    stack = []
    for line in FACADE.read_text().splitlines():
        m = re.match(r"^\s*pub mod (\w+) \{", line)
        if m:
            stack.append(m.group(1))
            continue
        if re.match(r"^\s*\}", line) and stack:
            stack.pop()
            continue
        m = re.match(r"^\s*pub use crate::([\w:]+?)::(\w+)(?: as (\w+))?;", line)
        if m:
            out[(tuple(stack), m.group(3) or m.group(2))] = (m.group(1).split("::"), m.group(2))
    return out


PREVIOUS = previous_facade()


def declares(mods, name):
    f = module_file(list(mods)) if mods else LIB
    if f is None:
        return False
    pat = r"^\s*(?:pub(?:\([^)]*\))? )?(?:async |const |unsafe )*(?:fn|struct|enum|trait|type|const|static|mod|macro_rules!) ?%s\b"
    return re.search(pat % re.escape(name), f.read_text(), re.M) is not None


def original(mods, name, depth=0):
    """Where the item `name` of module `mods` is declared (following `pub use` lines as far as the
    modules on the way are visible from the crate's root): (module path, its name there). A facade
    naming the item where it is declared keeps working when the re-exports on the way are narrowed."""
    r = reexports(tuple(mods)).get(name)
    if r is None and depth == 0 and not declares(mods, name) and (tuple(mods), name) in PREVIOUS:
        return PREVIOUS[(tuple(mods), name)]
    if r is None or depth > 8:
        return list(mods), name
    path, src = r
    where = absolute(mods, path)
    if where is None:
        # Another crate's item (the engine's): re-exported by its full path.
        return ["engine"] + path[2:] if path[:2] == ["crate", "engine"] else path, src
    if not accessible(where):
        return list(mods), name
    return original(where, src, depth + 1)


def facade_tree(paths):
    """{module path: set of item names} and the set of modules re-exported whole."""
    items, whole = {}, set()
    for segs in paths:
        mods = []
        for i, s in enumerate(segs):
            if is_module(mods + [s]):
                mods.append(s)
                continue
            items.setdefault(tuple(mods), set()).add(s)
            break
        else:
            # The path names a module itself (`use pantheon::testing::console::views;`).
            if len(mods) > 1:
                whole.add(tuple(mods))
    # A module re-exported whole covers what is named inside it.
    def covered(m):
        return any(m[: len(w)] == w for w in whole)
    items = {m: v for m, v in items.items() if not covered(m)}
    return items, {w for w in whole if not any(w != o and w[: len(o)] == o for o in whole)}


def write_facade(items, whole):
    tops = sorted({m[0] for m in list(items) + list(whole) if m})
    lines = [
        "//! The shell crate's testing facade: the items the integration tests, benches and examples (and",
        "//! `src/main.rs`) name, at the paths they name them (`pantheon::testing::console::app::App`).",
        "//! Everything else of the crate is `pub(crate)` (`#![deny(unreachable_pub)]` in lib.rs keeps it",
        "//! so). Generated by `scripts/narrow-pub.sh` from what they name: do not edit by hand, re-run it.",
        "",
    ]

    def emit(prefix, indent):
        pad = "    " * indent
        here = tuple(prefix)
        out = []
        for n in sorted(items.get(here, set())) if here else []:
            where, src = original(prefix, n)
            alias = "" if src == n else f" as {n}"
            out.append(f"{pad}pub use crate::{'::'.join(where)}::{src}{alias};")
        subs = sorted({m[len(prefix)] for m in list(items) + list(whole)
                       if len(m) > len(prefix) and m[: len(prefix)] == here})
        for s in subs:
            child = here + (s,)
            if child in whole:
                out.append(f"{pad}pub use crate::{'::'.join(child)};")
                continue
            doc = f"{pad}/// `crate::{'::'.join(child)}`, as the tests name it."
            out.append(doc)
            out.append(f"{pad}pub mod {s} {{")
            out += emit(list(child), indent + 1)
            out.append(f"{pad}}}")
        return out

    for t in tops:
        if (t,) in whole:
            lines.append(f"pub use crate::{t};")
            continue
        lines.append(f"/// `crate::{t}`, as the tests name it.")
        lines.append(f"pub mod {t} {{")
        lines += emit([t], 1)
        lines.append("}")
    FACADE.write_text("\n".join(lines) + "\n")


def widen(items):
    """Declares each item the facade names `pub` where it is declared (an earlier run may have
    narrowed it to `pub(crate)` before a test named it)."""
    n = 0
    for mods, names in items.items():
        for name in names:
            where, src = original(list(mods), name)
            f = module_file(where)
            if f is None or (where and where[0] == "engine"):
                continue
            text = f.read_text()
            pat = re.compile(
                r"^(\s*)pub\(crate\) ((?:async |const |unsafe )*(?:fn|struct|enum|trait|type|const|static|mod) %s\b)"
                % re.escape(src), re.M)
            new = pat.sub(r"\1pub \2", text)
            if new != text:
                f.write_text(new)
                n += 1
    return n


def narrow_lib(mods):
    text = LIB.read_text()
    for m in mods:
        if m == "testing":
            continue
        text = re.sub(r"^pub mod %s;" % m, "pub(crate) mod %s;" % m, text, flags=re.M)
    if not re.search(r"^pub mod testing;", text, re.M):
        text = re.sub(r"^(pub\(crate\) mod \w+;\n)(?!pub\(crate\) mod)", r"\1pub mod testing;\n", text, count=1, flags=re.M)
        # Keep `mod` lines sorted.
        block = re.search(r"(?:^(?:pub(?:\(crate\))? )?mod \w+;\n)+", text, re.M)
        if block:
            lines = block.group(0).splitlines(keepends=True)
            lines.sort(key=lambda l: re.search(r"mod (\w+);", l).group(1))
            text = text[: block.start()] + "".join(lines) + text[block.end():]
    LIB.write_text(text)


def count():
    """`pub fn` and `pub mod` (exactly `pub`, not `pub(crate)`) in the shell crate's non-test sources."""
    fns = mods = 0
    for f in (ROOT / "src").rglob("*.rs"):
        if f.name in ("tests.rs", "source_checks.rs") or f.name.endswith("_tests.rs"):
            continue
        text = f.read_text()
        cut = re.search(r"^#\[cfg\(test\)\]\s*\nmod tests", text, re.M)
        if cut:
            text = text[: cut.start()]
        fns += len(re.findall(r"^\s*pub (?:const |async |unsafe )*fn ", text, re.M))
        mods += len(re.findall(r"^\s*pub mod ", text, re.M))
    print(f"shell crate: {fns} pub fn, {mods} pub mod")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "prepare"
    if what == "count":
        return count()
    mods = top_modules()
    n = rewrite_paths(mods)
    items, whole = facade_tree(named_paths())
    write_facade(items, whole)
    widened = widen(items)
    narrow_lib(mods)
    print(f"narrow-pub: {n} file(s) of tests/benches/examples rewritten; src/testing.rs names "
          f"{sum(len(v) for v in items.values())} item(s) and {len(whole)} whole module(s); "
          f"{widened} declaration(s) made `pub` again")


if __name__ == "__main__":
    main()
