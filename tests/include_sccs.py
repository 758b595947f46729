#!/usr/bin/env python3
"""Include loops inside the library's folders: the strongly connected components of the
quoted-include graph, per folder (tests/check_layering.sh keeps includes between folders running
down the stack, so a loop can only form inside one folder).

A node is a module, a header and its source together (runtime/ops.h and runtime/ops.cc are
`runtime/ops`): `ops.cc` including `autograd.h` while `autograd.cc` includes `ops.h` is the loop
that makes the two one library, even though no header includes itself. Prints each folder's
largest component and every component of more than one module.

Usage: tests/include_sccs.py [source root] [--max FOLDER=N ...]
  --max FOLDER=N  exit 1 when FOLDER's largest component has more than N modules.
"""
import os
import re
import sys

FOLDERS = ["ir", "lowering", "backends", "runtime", "autograd", "capture", "nn", "include",
           "bindings", "tools"]
SOURCES = (".h", ".cc", ".cpp", ".cu", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def module(path):
    stem, ext = os.path.splitext(path)
    return path if ext == ".def" else stem


def graph(root):
    files = {}
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if name.endswith(SOURCES):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    files[rel] = os.path.join(dirpath, name)
    edges = {}
    for rel, full in files.items():
        src = module(rel)
        edges.setdefault(src, set())
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            beside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            hit = target if target in files else beside if beside in files else None
            if hit and module(hit) != src:
                edges[src].add(module(hit))
    return edges


def sccs(edges):
    """Tarjan's algorithm, iterative (a deep include chain must not hit the recursion limit)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main(argv):
    root, limits = None, {}
    args = iter(argv)
    for a in args:
        if a == "--max":
            folder, n = next(args).split("=")
            limits[folder] = int(n)
        else:
            root = a
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    comps = sccs(graph(root))
    bad = 0
    for folder in FOLDERS:
        mine = [c for c in comps if c[0].split("/")[0] == folder]
        if not mine:
            continue
        largest = max(len(c) for c in mine)
        loops = sorted((c for c in mine if len(c) > 1), key=len, reverse=True)
        modules = sum(len(c) for c in mine)
        print(f"{folder}: {modules} modules, largest include loop {largest}")
        for c in loops:
            print(f"  {len(c)}: " + " ".join(m.split("/", 1)[1] for m in c))
        if folder in limits and largest > limits[folder]:
            print(f"include_sccs: {folder}/'s largest include loop has {largest} modules, "
                  f"more than {limits[folder]}")
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
