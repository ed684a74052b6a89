#!/usr/bin/env python3
"""The import graph of each Rust crate (and the Python package) of the project: a
file imports another when it names an item of it (`use crate::a::b::C`, an inline
`super::x::Y`, a child module's item). Re-exports are followed to where the item
lives, so a facade that re-exports is not a cycle.

Prints, per crate: files, import cycles (strongly connected sets of files), layers
(the longest import chain), and imports that run back up the module tree (a child
module importing from its parent or an ancestor, which is how knots start).

Usage: python3 tests/imports.py [--check] [--self-test] [--max-up N]
--check fails (exit 1) on any cycle, or on more upward imports than --max-up (4) in core.

Hand-written (~200 lines) rather than `cargo modules`: that tool needs a nightly-only
rust-analyzer build and a full compile; this reads source text in a second, and the
rules it needs (use trees, inline paths, re-exports) are few.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUST_CRATES = {
    "core": "core/src/lib.rs",
    "gateway": "gateway/src/lib.rs",
    "openapi": "openapi/src/lib.rs",
    "codegen": "codegen/src/lib.rs",
    "bindings-python": "bindings-python/src/lib.rs",
    "bindings-node": "bindings-node/src/lib.rs",
    "bindings-kotlin": "bindings-kotlin/src/lib.rs",
}


def strip(code):
    """Code without comments, string and char literals (their text cannot import), without
    `#[cfg(test)]` modules (tests do not count), and with `super::` inside any other inline
    module read as the file's own module (one level up from the inline one)."""
    # One left-to-right pass, so that a quote inside a comment or a `//` inside a string
    # is read as what it is.
    token = re.compile(r"//[^\n]*|/\*.*?\*/|(?<!\w)b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\])'", re.S)
    code = token.sub(lambda m: '""' if m.group(0).lstrip("b").startswith(("\"", "r")) else " ", code)
    out, pos = [], 0
    for m in re.finditer(r"(#\[cfg\(test\)\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        out.append(code[pos : m.start()])
        if not m.group(1):
            out.append(code[m.start() : i].replace("super::", "self::"))
        pos = i
    out.append(code[pos:])
    return "".join(out)


class Module:
    def __init__(self, path, file, parent):
        self.path = path  # ("pipeline", "attempt")
        self.file = file
        self.parent = parent
        self.children = {}
        self.items = set()
        self.reexports = {}  # name -> path segments (absolute)
        self.code = ""


def load_tree(root_file):
    modules = {}
    inline_re = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")

    def visit(path, file, parent):
        m = Module(path, file, parent)
        modules[path] = m
        with open(file, encoding="utf-8") as f:
            m.code = strip(f.read())
        # Test modules and other inline modules stay part of their file.
        for name in re.findall(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", m.code, flags=re.M):
            base = os.path.dirname(file)
            if not (file.endswith("mod.rs") or file.endswith("lib.rs") or file.endswith("main.rs")):
                base = os.path.join(base, os.path.splitext(os.path.basename(file))[0])
            cand = [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            child_file = next((c for c in cand if os.path.exists(c)), None)
            if child_file:
                m.children[name] = visit(path + (name,), child_file, m)
        for name in inline_re.findall(m.code):
            m.items.add(name)
        for kind_name in re.findall(r"\b(?:struct|enum|fn|trait|type|const|static|union|macro_rules!)\s+(\w+)", m.code):
            m.items.add(kind_name)
        return m

    visit((), root_file, None)
    return modules


def use_paths(code):
    """Every path a `use` declaration names, expanded from its tree, with `pub`."""
    out = []
    for pub, tree in re.findall(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
        for p in expand(tree.replace("\n", " ").strip()):
            out.append((bool(pub), p))
    return out


def expand(tree):
    tree = tree.strip()
    depth, brace = 0, None
    for i, ch in enumerate(tree):
        if ch == "{" and depth == 0:
            brace = i
            break
    if brace is None:
        name = re.split(r"\s+as\s+", tree)[0].strip()
        return [name] if name else []
    prefix = tree[:brace].rstrip(":").strip()
    inner = tree[brace + 1 : tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        for p in expand(part):
            if p == "self":
                out.append(prefix)
            elif p:
                out.append(prefix + "::" + p if prefix else p)
    return out


def absolute(mod, segs):
    """Resolve a path's leading `crate`/`super`/`self`/child-module segments."""
    if not segs:
        return None
    if segs[0] == "crate":
        return list(segs[1:])
    cur = list(mod.path)
    if segs[0] in ("super", "self"):
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not cur:
                    return None
                cur.pop()
            segs = segs[1:]
        return cur + list(segs)
    if segs[0] in mod.children:
        return cur + list(segs)
    return None


def resolve(modules, segs, seen=0):
    """The module file an absolute path's item lives in."""
    m = modules[()]
    i = 0
    while i < len(segs) and segs[i] in m.children:
        m = m.children[segs[i]]
        i += 1
    if i < len(segs) and seen < 8:
        name = segs[i]
        if name not in m.items and name in m.reexports:
            return resolve(modules, m.reexports[name] + segs[i + 1 :], seen + 1)
    return m


def graph(root_file):
    modules = load_tree(os.path.join(ROOT, root_file))
    for m in modules.values():
        for pub, p in use_paths(m.code):
            segs = [s for s in p.split("::") if s]
            if pub and segs and segs[-1] != "*":
                a = absolute(m, segs)
                if a:
                    m.reexports[segs[-1]] = a
    edges = defaultdict(set)
    path_re = re.compile(r"\b((?:crate|super|self)(?:::\w+)+|\w+(?:::\w+)+)")
    for m in modules.values():
        # Only top-level use declarations and inline paths; `mod x;` lines are declarations.
        for raw in path_re.findall(m.code):
            segs = raw.split("::")
            a = absolute(m, segs)
            if a is None:
                continue
            target = resolve(modules, a)
            if target is not m:
                edges[m.file].add(target.file)
        for _, p in use_paths(m.code):
            segs = [s for s in p.split("::") if s and s != "*"]
            a = absolute(m, segs)
            if a is None:
                continue
            target = resolve(modules, a)
            if target is not m:
                edges[m.file].add(target.file)
    return modules, edges


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
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
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            strong(v)
    return out


def layers(nodes, edges, comps):
    comp_of = {v: i for i, c in enumerate(comps) for v in c}
    depth = {}

    def d(c):
        if c in depth:
            return depth[c]
        depth[c] = 1
        best = 1
        for v in comps[c]:
            for w in edges.get(v, ()):
                if comp_of[w] != c:
                    best = max(best, 1 + d(comp_of[w]))
        depth[c] = best
        return best

    return max((d(i) for i in range(len(comps))), default=0)


def report(name, root_file):
    modules, edges = graph(root_file)
    files = {m.file: m for m in modules.values()}
    comps = sccs(list(files), edges)
    cycles = [sorted(os.path.relpath(f, ROOT) for f in c) for c in comps if len(c) > 1]
    ups = []
    for a, targets in edges.items():
        pa = files[a].path
        for b in targets:
            pb = files[b].path
            if len(pb) < len(pa) and pa[: len(pb)] == pb:
                ups.append((os.path.relpath(a, ROOT), os.path.relpath(b, ROOT)))
    return len(files), cycles, sorted(ups), layers(list(files), edges, comps)


def python_package():
    """The Python package's own import graph (`from ._x import`, `from . import x`)."""
    pkg = os.path.join(ROOT, "bindings-python/python/harness")
    files = [f for f in os.listdir(pkg) if f.endswith(".py")]
    edges = defaultdict(set)
    for f in files:
        with open(os.path.join(pkg, f), encoding="utf-8") as fh:
            code = fh.read()
        for mod in re.findall(r"^\s*from\s+(?:harness)?\.(\w+)\s+import", code, flags=re.M):
            target = mod + ".py"
            if target in files and target != f:
                edges[f].add(target)
        for mods in re.findall(r"^\s*from\s+(?:harness|\.)\s+import\s+([\w, ]+)", code, flags=re.M):
            for mod in mods.split(","):
                target = mod.strip() + ".py"
                if target in files and target != f:
                    edges[f].add(target)
    comps = sccs(files, edges)
    return len(files), [sorted(c) for c in comps if len(c) > 1]


def self_test():
    """The checker finds a cycle it must find and none where a facade re-exports."""
    import tempfile

    def crate(files):
        d = tempfile.mkdtemp()
        for name, text in files.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        return os.path.join(d, "lib.rs")

    knot = crate({"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::B;\npub struct A;\n", "b.rs": "use crate::a::A;\npub struct B;\n"})
    _, cycles, _, _ = report("knot", knot)
    assert len(cycles) == 1 and len(cycles[0]) == 2, f"a two-file cycle was not found: {cycles}"
    facade = crate({"lib.rs": "mod a;\nmod b;\npub use a::A;\npub use b::B;\n", "a.rs": "pub struct A;\n", "b.rs": "use crate::A;\npub struct B;\n"})
    _, cycles, _, _ = report("facade", facade)
    assert cycles == [], f"a re-exporting facade was taken for a cycle: {cycles}"
    print("imports.py self-test: a cycle is found, a facade is not one")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--max-up", type=int, default=4)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
    failed = False
    for name, root in RUST_CRATES.items():
        n, cycles, ups, depth = report(name, root)
        print(f"{name}: {n} files, {len(cycles)} import cycles, {depth} layers, {len(ups)} imports back up the module tree")
        for c in cycles:
            print(f"  cycle of {len(c)}: {' '.join(c)}")
            failed = True
        if args.verbose or name == "core":
            for a, b in ups:
                print(f"  up: {a} -> {b}")
        if name == "core" and len(ups) > args.max_up:
            failed = True
    n, cycles = python_package()
    print(f"bindings-python (package harness): {n} files, {len(cycles)} import cycles")
    for c in cycles:
        print(f"  cycle of {len(c)}: {' '.join(c)}")
        failed = True
    if args.check and failed:
        print("import check failed: no cycles allowed, and at most", args.max_up, "upward imports in core", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
