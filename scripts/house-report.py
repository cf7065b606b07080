#!/usr/bin/env python3
"""Prints the shape of src/: lines per layer, the largest files, the longest functions, the
imports that climb the layers and the circles between files.

    scripts/house-report.py [--check] [--comments] [--long]

Layers, lowest first (README "Source map"): a file may import its own layer and those below.
Peers (cpu, optix, sched) do not import each other. Test code (`#[cfg(test)]` modules) is left
out of the imports and the function lengths. With --check, exits 1 when an import climbs or
files import each other in a circle. With --comments, also lists the comment blocks of 12
lines or more and the comment lines that quote measurements, dates or GPU models (their home
is docs/ or bench/results/). With --long, lists every non-test function over 80 lines.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Layer of each top-level module: lower numbers are lower layers. Equal numbers are peers,
# which may not import each other unless they share a name (the same module).
LAYERS = {
    "fnv": 0, "splitmix": 0, "colour": 0, "wording": 0, "console": 0, "bench_report": 0,
    "nvtx": 0,
    "scene": 1, "fault_injection": 1,
    "render": 2,
    "cpu": 3, "optix": 3, "sched": 3,
    "backend": 4, "session": 5,
    "cluster": 6,
    "cli": 7, "main": 7, "lib": 7,
}


def module_of(path):
    """src/a/b.rs -> a::b; src/a/mod.rs -> a."""
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return "::".join(rel)


def strip_comments_and_strings(text):
    """Blanks comments, strings and char literals, keeping the newlines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 0, i
            while j < n:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                    if depth == 0:
                        break
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif re.match(r'b?r#*"', text[i:i + 260]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\.[^']*|[^'\\])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(lines):
    """Blanks `#[cfg(test)]` items (modules and functions), keeping the line count."""
    out, i = list(lines), 0
    while i < len(out):
        if re.match(r"\s*#\[cfg\(test\)\]", out[i]):
            depth, started, j = 0, False, i
            while j < len(out):
                depth += out[j].count("{") - out[j].count("}")
                started |= "{" in out[j]
                if not started and out[j].rstrip().endswith(";") and j > i:
                    break
                out[j] = ""
                if started and depth <= 0:
                    break
                j += 1
            i = j
        i += 1
    return out


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = tree.replace(" ", "").replace("\n", "")
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "{") - (ch == "}")
        cur += ch
    parts.append(cur)
    return [prefix + q for p in parts if p for q in expand_use_tree(p)]


def referenced_paths(code, module):
    """Absolute module paths the code names: `use` trees and `crate::`/`super::` paths."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        paths += expand_use_tree(m.group(1))
    paths += re.findall(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", code)
    out = []
    here = module.split("::") if module else []
    for p in paths:
        p = re.sub(r"::\*$", "", re.split(r"\s+as\s+", p)[0])
        segs = [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            out.append(segs[1:])
        elif segs[0] in ("super", "self"):
            base = list(here)
            if segs[0] == "self":
                segs = segs[1:]
            while segs and segs[0] == "super":
                segs, base = segs[1:], base[:-1]
            out.append(base + segs)
    return out


MOD_FILES = set()


def main():
    check = "--check" in sys.argv
    files = {}
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(p)] = p
                if n == "mod.rs" or os.path.isdir(p[:-3]):
                    MOD_FILES.add(module_of(p))
    layer_lines, sizes, funcs, edges = {}, [], [], {}
    for mod, path in sorted(files.items()):
        raw = open(path, encoding="utf-8").read()
        lines = raw.split("\n")
        top = mod.split("::")[0] if mod else "lib"
        layer_lines[top] = layer_lines.get(top, 0) + len(lines)
        sizes.append((len(lines), os.path.relpath(path, os.path.join(SRC, ".."))))
        code_lines = drop_test_modules(strip_comments_and_strings(raw).split("\n"))
        funcs += function_lengths(code_lines, os.path.relpath(path, os.path.join(SRC, "..")))
        code = "\n".join(code_lines)
        # `super::` inside a non-mod file names the parent of the file's module.
        for segs in referenced_paths(code, mod):
            target = resolve(segs, files)
            if target is not None and target != mod:
                edges.setdefault(mod, set()).add(target)
    print("lines per layer (top-level module: lines, tests included):")
    for top, n in sorted(layer_lines.items(), key=lambda kv: (LAYERS.get(kv[0], 9), kv[0])):
        print(f"  {top:14} {n:7}")
    print(f"  {'total':14} {sum(layer_lines.values()):7}")
    print("\nthe 10 largest files:")
    for n, p in sorted(sizes, reverse=True)[:10]:
        print(f"  {n:6} {p}")
    print("\nthe 10 longest non-test functions (lines):")
    for n, p, name in sorted(funcs, reverse=True)[:10]:
        print(f"  {n:6} {p} {name}")
    over = [f for f in funcs if f[0] > 80]
    print(f"  non-test functions over 80 lines: {len(over)}; over 100: "
          f"{len([f for f in funcs if f[0] > 100])}")
    if "--long" in sys.argv:
        for n, p, name in sorted(over, reverse=True):
            print(f"  {n:6} {p} {name}")
    climbs = climbing(edges)
    print(f"\nimports that climb or cross between peers: {len(climbs)}")
    for a, b in climbs:
        print(f"  {a} -> {b}")
    circles = cycles(edges)
    print(f"\nimport circles between files: {len(circles)}")
    for c in circles:
        print("  " + " <-> ".join(sorted(c)))
    if "--comments" in sys.argv:
        print_comments(files)
    if check and (climbs or circles):
        sys.exit(1)


# A measurement, a date or a GPU model in a comment: "4.7 ms", "1.73x", "2026-11-27", "H200".
MEASURED = re.compile(
    r"\d[\d.,]*\s*(ms|us|µs|ns|s|%|x|MiB|GiB|MB|GB|Mtri/s|M samples/s|M rays/s)\b"
    r"|\b20\d\d-\d\d-\d\d\b|\bH[12]00\b|RTX \d{4}"
)


def print_comments(files):
    """Comment blocks of 12 lines or more, and comment lines that quote measurements."""
    long_blocks, measured = [], []
    for _, path in sorted(files.items()):
        rel = os.path.relpath(path, os.path.join(SRC, ".."))
        lines = open(path, encoding="utf-8").read().split("\n")
        start = None
        for i, line in enumerate(lines + [""]):
            is_comment = line.strip().startswith("//")
            if is_comment and MEASURED.search(line):
                measured.append(f"{rel}:{i + 1}: {line.strip()}")
            if is_comment and start is None:
                start = i
            elif not is_comment and start is not None:
                if i - start >= 12:
                    long_blocks.append(f"{rel}:{start + 1}: {i - start} lines")
                start = None
    print(f"\ncomment blocks of 12 lines or more: {len(long_blocks)}")
    for b in long_blocks:
        print("  " + b)
    print(f"\ncomment lines that quote measurements, dates or GPU models: {len(measured)}")
    for m in measured:
        print("  " + m)


def resolve(segs, files):
    """The longest prefix of `segs` that is a file's module."""
    for k in range(len(segs), 0, -1):
        name = "::".join(segs[:k])
        if name in files:
            return name
    return None


def function_lengths(lines, path):
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+\"?\w*\"?\s*)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(lines)):
            if not started and ";" in lines[j] and "{" not in lines[j]:
                break
            depth += lines[j].count("{") - lines[j].count("}")
            started |= "{" in lines[j]
            if started and depth <= 0:
                out.append((j - i + 1, path, m.group(1)))
                break
    return out


def layer(mod):
    return LAYERS.get(mod.split("::")[0], 9)


def climbing(edges):
    out = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            ta, tb = a.split("::")[0], b.split("::")[0]
            if ta == tb:
                continue
            if layer(b) > layer(a) or (layer(b) == layer(a)):
                out.append((a, b))
    return out


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            if len(comp) > 1:
                out.append(comp)

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    main()
