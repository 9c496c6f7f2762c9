#!/usr/bin/env python3
"""The module graph of both crates, measured from the sources (Python 3 standard library only).

    python3 scripts/module-graph.py [ROOT] [--floors-from FILE] [-v]

ROOT is a checkout of the repository (default: the current directory). It prints:

- engine: its source files (non-test part: what precedes the first `#[cfg(test)]`; `*_tests.rs` and
  `tests.rs` left out), the edges between them (a `use` leaf, or a path written in the code, starting
  `crate::`, `super::`, `self::` or a child module's name, resolved to the file that defines it, through
  the `pub use` / `pub(crate) use` re-exports of a `mod.rs`), the strongly connected components of that
  graph (import loops; the largest is what "one loop" means) and every edge between top-level modules
  that runs against the floors (to a higher floor, or within a floor but for a declared tie);
- the floors, read from `ENGINE_FLOORS` in FILE (default ROOT/src/source_checks.rs) when it has one:
  an engine module imports only modules on a lower floor, and one of its own floor only when
  ENGINE_TIES names the pair;
- the shell crate: `App`'s fields (and how many are `pub`), its methods and `impl App` blocks,
  `Result<_, String>` in both crates, `pub fn` and `pub mod` in `src/`.

With -v it also lists the loops' members and the top-level edges.
"""
import os
import re
import sys
from collections import defaultdict


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rust_files(d):
    out = []
    for base, _dirs, files in os.walk(d):
        for f in files:
            if f.endswith(".rs"):
                out.append(os.path.join(base, f))
    return sorted(out)


def non_test(text):
    end = text.find("#[cfg(test)]")
    return text if end < 0 else text[:end]


STRING = re.compile(r'r(#*)".*?"\1|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'', re.S)


def code_only(text):
    """The code without string and char literals and comments."""
    text = STRING.sub('""', text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def module_of(rel):
    """`conductor/mod.rs` -> ("conductor",); `lib.rs` -> ()."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def use_leaves(tree):
    """The leaves of a use tree (the text after `use ` up to `;`): [(path, visible name)]."""
    leaves = []
    stack = [""]
    path = ""
    alias = None
    tokens = re.findall(r"[{},]|[^{},]+", tree)
    expect_alias = False

    def flush():
        nonlocal path, alias
        p = path.strip()
        if p:
            full = stack[-1] + p
            if full.endswith("::self"):
                full = full[: -len("::self")]
            name = alias or full.split("::")[-1]
            leaves.append((full, name))
        path = ""
        alias = None

    for t in tokens:
        if t == "{":
            stack.append(stack[-1] + path.strip())
            path = ""
        elif t == "}":
            flush()
            stack.pop()
        elif t == ",":
            flush()
        else:
            words = t.split()
            i = 0
            while i < len(words):
                if words[i] == "as" and i + 1 < len(words):
                    alias = words[i + 1]
                    i += 2
                    continue
                path += words[i]
                i += 1
    flush()
    return leaves


USE = re.compile(r"(?m)^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
INLINE = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)")


class Engine:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module tuple -> rel path
        self.code = {}
        self.children = defaultdict(set)
        for f in rust_files(src):
            rel = os.path.relpath(f, src).replace(os.sep, "/")
            name = os.path.basename(rel)
            if name.endswith("_tests.rs") or name == "tests.rs":
                continue
            m = module_of(rel)
            self.files[m] = rel
            self.code[m] = code_only(non_test(read(f)))
        for m in self.files:
            if m:
                self.children[m[:-1]].add(m[-1])
        self.reexports = {}
        for m, code in self.code.items():
            rex = {}
            for vis, tree in USE.findall(code):
                if not vis:
                    continue
                for p, name in use_leaves(tree):
                    absolute = self.absolute(m, p)
                    if absolute:
                        rex[name] = absolute
            self.reexports[m] = rex

    def absolute(self, m, path):
        """A path written in module m, as a tuple from the crate root; None if it leaves the crate."""
        segs = path.split("::")
        if segs[0] == "crate":
            return tuple(segs[1:])
        base = m
        if segs[0] in ("super", "self"):
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
            return base + tuple(segs)
        if segs[0] in self.children[m]:
            return m + tuple(segs)
        return None

    def resolve(self, path, depth=0):
        """The module (file) that defines what an absolute path names."""
        for n in range(len(path), -1, -1):
            if path[:n] in self.files:
                mod = path[:n]
                rest = path[n:]
                if rest and depth < 8 and rest[0] in self.reexports.get(mod, {}):
                    target = self.reexports[mod][rest[0]] + rest[1:]
                    if target != path:
                        return self.resolve(target, depth + 1)
                return mod
        return None

    def edges(self, uses_only=False):
        out = defaultdict(set)
        for m, code in self.code.items():
            paths = []
            for _vis, tree in USE.findall(code):
                paths += [p for p, _ in use_leaves(tree)]
            body = "" if uses_only else USE.sub("", code)
            paths += INLINE.findall(body)
            for child in self.children[m] if body else ():
                paths += re.findall(r"(?<![\w:])(" + child + r"(?:::\w+)+)", body)
            for p in paths:
                if p.endswith("::*"):
                    p = p[:-3]
                a = self.absolute(m, p)
                if a is None:
                    continue
                t = self.resolve(a)
                if t is not None and t != m:
                    out[m].add(t)
        return out


def sccs(nodes, edges):
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def floors_from(path):
    """ENGINE_FLOORS of src/source_checks.rs: a list of floors, each a list of top-level modules,
    and ENGINE_TIES, the pairs of one floor that may import each other."""
    if not os.path.exists(path):
        return None, []
    text = read(path)
    t = re.search(r"const ENGINE_TIES:[^=]*=\s*&\[(.*?)\];", text, re.S)
    ties = re.findall(r'\("(\w+)",\s*"(\w+)"\)', t.group(1)) if t else []
    m = re.search(r"const ENGINE_FLOORS:[^=]*=\s*&\[(.*?)\];", text, re.S)
    if not m:
        return None, ties
    body = "\n".join(line.split("//", 1)[0] for line in m.group(1).splitlines())
    return [re.findall(r'"(\w+)"', f) for f in re.findall(r"&\[([^\]]*)\]", body)], ties


def name(m):
    return "::".join(m) or "lib"


def engine_report(root, floors, ties, verbose):
    eng = Engine(os.path.join(root, "crates/engine/src"))
    edges = eng.edges()
    comps = [c for c in sccs(eng.files, edges) if len(c) > 1]
    comps.sort(key=len, reverse=True)
    print(f"engine files: {len(eng.files)}, edges between them: {sum(len(v) for v in edges.values())}")
    wide = [c for c in comps if len({m[0] if m else "lib" for m in c}) > 1]
    print(f"import loops across top-level modules: {len(wide)}, files in the largest: "
          f"{len(wide[0]) if wide else 0}")
    for c in wide:
        tops = sorted({m[0] if m else "lib" for m in c})
        print(f"  a loop of {len(c)} files over {', '.join(tops)}")
        if verbose:
            print("    " + ", ".join(eng.files[m] for m in c))
    use_comps = [c for c in sccs(eng.files, eng.edges(uses_only=True)) if len(c) > 1]
    print(f"  (counting `use` lines only: {len(use_comps)} loops, the largest "
          f"{max((len(c) for c in use_comps), default=0)} files)")
    inner = [c for c in comps if c not in wide]
    print(f"import loops within one top-level module (its mod.rs and children): {len(inner)}"
          + (": " + "; ".join(f"{c[0][0]} ({len(c)} files)" for c in inner) if inner else ""))
    top = defaultdict(lambda: defaultdict(list))
    for a, ts in edges.items():
        for b in ts:
            ta, tb = (a[0] if a else "lib"), (b[0] if b else "lib")
            if ta != tb:
                top[ta][tb].append((a, b))
    top_edges = {a: set(bs) for a, bs in top.items()}
    top_comps = [c for c in sccs({m[0] if m else "lib" for m in eng.files}, top_edges) if len(c) > 1]
    print("loops among top-level modules: " + ("; ".join(" <-> ".join(c) for c in top_comps) or "none"))
    if verbose:
        for a in sorted(top):
            print(f"  {a} -> {', '.join(sorted(top[a]))}")
    if floors is None:
        print("floors: none declared (no ENGINE_FLOORS in the floors file)")
        return
    level = {}
    for i, f in enumerate(floors):
        for m in f:
            level[m] = i
    print("floors (low to high): " + " < ".join(", ".join(f) for f in floors)
          + "; ties: " + (", ".join(f"{a}/{b}" for a, b in ties) or "none"))
    against = []
    for a in sorted(top):
        for b in sorted(top[a]):
            tie = (a, b) in ties or (b, a) in ties
            if a not in level or b not in level or level[b] > level[a] or (
                level[b] == level[a] and not tie
            ):
                for fa, fb in sorted(top[a][b]):
                    against.append(f"{eng.files[fa]} -> {eng.files[fb]}")
    print(f"imports against the floors (file to file): {len(against)}")
    for x in against:
        print(f"  {x}")


def balanced_after(text, start):
    """The text between the `<` at start and its matching `>`."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">" and text[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return ""


def string_results(code):
    n = 0
    for m in re.finditer(r"\bResult<", code):
        inner = balanced_after(code, m.end() - 1)
        depth, last = 0, 0
        for i, c in enumerate(inner):
            if c in "<([":
                depth += 1
            elif c in ">)]":
                depth -= 1
            elif c == "," and depth == 0:
                last = i + 1
        if last and inner[last:].strip() == "String":
            n += 1
    return n


def shell_report(root):
    src = os.path.join(root, "src")
    files = [f for f in rust_files(src) if not f.endswith("source_checks.rs")]
    app_fields = app_pub = 0
    methods = blocks = 0
    pub_fn = pub_mod = results = console_results = 0
    for f in files:
        rel = os.path.relpath(f, root)
        name = os.path.basename(f)
        test_file = name.endswith("_tests.rs") or name == "tests.rs"
        code = code_only(non_test(read(f))) if not test_file else ""
        if rel.startswith(os.path.join("src", "console") + os.sep):
            console_results += string_results(code)
        m = re.search(r"(?m)^pub(?:\([^)]*\))? struct App \{\n(.*?)^\}", code, re.S)
        if m:
            for line in m.group(1).splitlines():
                fm = re.match(r"\s*(pub(?:\([^)]*\))?\s+)?(\w+):", line)
                if fm and re.match(r"    \S", line):
                    app_fields += 1
                    app_pub += 1 if fm.group(1) and fm.group(1).strip() == "pub" else 0
        for im in re.finditer(r"(?m)^impl(?:<[^>]*>)? (?:[\w:]+::)?App \{\n", code):
            blocks += 1
            end = re.compile(r"(?m)^\}").search(code, im.end())
            body = code[im.end() : end.start() if end else len(code)]
            methods += len(re.findall(r"(?m)^    (?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?fn \w+", body))
        pub_fn += len(re.findall(r"(?m)^\s*pub (?:const |async |unsafe )*fn ", code))
        pub_mod += len(re.findall(r"(?m)^\s*pub mod ", code))
        results += string_results(code)
    for f in rust_files(os.path.join(root, "crates")):
        name = os.path.basename(f)
        if not (name.endswith("_tests.rs") or name == "tests.rs"):
            results += string_results(code_only(non_test(read(f))))
    print(f"App: {app_fields} fields ({app_pub} pub), {methods} methods in {blocks} `impl App` blocks")
    print(
        f"Result<_, String> (non-test code of both crates): {results}"
        f" ({console_results} in src/console, {results - console_results} outside it)"
    )
    print(f"shell crate (src/): {pub_fn} `pub fn`, {pub_mod} `pub mod`")


def main():
    args = sys.argv[1:]
    verbose = "-v" in args
    floors_file = None
    if "--floors-from" in args:
        i = args.index("--floors-from")
        floors_file = args[i + 1]
        del args[i : i + 2]
    pos = [a for a in args if not a.startswith("-")]
    root = pos[0] if pos else "."
    floors, ties = floors_from(floors_file or os.path.join(root, "src/source_checks.rs"))
    engine_report(root, floors, set(ties), verbose)
    shell_report(root)


if __name__ == "__main__":
    main()
