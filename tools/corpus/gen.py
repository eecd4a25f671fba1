#!/usr/bin/env python3
"""Deterministic synthetic corpus for tools/bench (stdlib only).

The same seed and parameters always give the same tree, byte for byte (paths, contents and mtimes):

- many small source-code-like text files (.rs .py .ts .c .h .md .toml .json) built from a seeded
  pool of code lines taken in runs, as real code repeats idioms: so compression and dedup mean
  something;
- a few large files (some MiB): half text (a log-like file), half incompressible binary;
- nested directories (depth and fan-out are parameters);
- exact duplicates of earlier files at other paths (vendored copies);
- some small binary files (random bytes).

Usage as a program: gen.py OUT_DIR [--preset small|large] [--files N] [--seed S] ...
It prints the corpus statistics as JSON on stdout. As a module: generate(out_dir, params) -> stats.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

MIB = 1024 * 1024

PRESETS = {
    # about 2 000 files and 14 MB: the whole `tools/bench --small` stays well under a minute
    "small": dict(files=2000, mean_size=3000, large_files=3, large_size=2 * MIB,
                  binary_fraction=0.02, dup_fraction=0.05, depth=3, fanout=6, seed=1),
    # >= 100 000 files, about 0.45 GB
    "large": dict(files=100000, mean_size=3000, large_files=6, large_size=24 * MIB,
                  binary_fraction=0.02, dup_fraction=0.05, depth=5, fanout=8, seed=1),
}

FIXED_MTIME = 1_700_000_000  # 2023-11-14: old, so no stat cache treats the files as racy

SYLLABLES = ["ka", "lo", "mer", "tan", "vi", "sto", "re", "dex", "bu", "fer", "chan", "nel", "qu",
             "ery", "ob", "ject", "ha", "sh", "path", "node", "tree", "ver", "sion", "tx", "log",
             "blob", "doc", "map", "set", "id", "io", "cfg", "net", "sync", "pool", "cache", "walk"]
TYPES = ["u8", "u32", "u64", "i64", "usize", "String", "&str", "Vec<u8>", "Option<u64>",
         "Result<()>", "bool", "PathBuf", "Hash", "HashMap<String, u64>"]
LANGS = [("rs", 30), ("py", 15), ("ts", 15), ("c", 8), ("h", 5), ("md", 12), ("toml", 5),
         ("json", 5), ("txt", 5)]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))


def _line_pool(rng: random.Random, vocab: list[str], size: int) -> list[str]:
    """Code-ish lines, mixed templates; each line ends with a newline."""
    w = lambda: rng.choice(vocab)  # noqa: E731
    templates = [
        lambda: f"    let {w()} = {w()}.{w()}({w()}, {rng.randint(0, 999)});",
        lambda: f"fn {w()}_{w()}(&self, {w()}: {rng.choice(TYPES)}) -> {rng.choice(TYPES)} {{",
        lambda: f"    if {w()}.len() > {rng.randint(1, 4096)} {{ return Err(Error::{w()}); }}",
        lambda: f"    // {' '.join(w() for _ in range(rng.randint(3, 10)))}",
        lambda: f"def {w()}_{w()}(self, {w()}, {w()}={rng.randint(0, 64)}):",
        lambda: f"        {w()} = self.{w()}.get({w()!r}, {rng.randint(0, 9)})",
        lambda: f"export function {w()}({w()}: {rng.choice(['string', 'number', 'boolean'])}) {{",
        lambda: f"  const {w()} = await {w()}.{w()}({w()});",
        lambda: f"static int {w()}_{w()}(struct {w()} *{w()}, size_t {w()});",
        lambda: f"    for (size_t i = 0; i < {w()}->{w()}; i++) {{ {w()}[i] = {rng.randint(0, 255)}; }}",
        lambda: f"{w()} = \"{w()}-{rng.randint(0, 99)}.{rng.randint(0, 99)}\"",
        lambda: f"  \"{w()}\": {{ \"{w()}\": {rng.randint(0, 100000)}, \"{w()}\": \"{w()}\" }},",
        lambda: f"The {w()} keeps every {w()} of a {w()}; see {w()} for the {w()} rule.",
        lambda: "    }",
        lambda: "}",
        lambda: "",
        lambda: f"    assert_eq!({w()}, {rng.randint(0, 9999)});",
        lambda: f"use crate::{w()}::{{{w()}, {w()}}};",
        lambda: f"#[derive(Debug, Clone)] pub struct {w().capitalize()}{w().capitalize()} {{ {w()}: {rng.choice(TYPES)} }}",
    ]
    return [rng.choice(templates)() + "\n" for _ in range(size)]


def _text(rng: random.Random, pool: list[str], size: int, header: str) -> bytes:
    """About `size` bytes of text: runs of consecutive pool lines, a few lines made unique."""
    parts = [header]
    total = len(header)
    while total < size:
        start = rng.randrange(len(pool))
        for line in pool[start:start + rng.randint(2, 24)]:
            if rng.random() < 0.15:
                line = line.rstrip("\n") + f" // {rng.randint(0, 1 << 30):x}\n"
            parts.append(line)
            total += len(line)
    return "".join(parts).encode()


def _dirs(rng: random.Random, vocab: list[str], want: int, depth: int, fanout: int) -> list[str]:
    """About `want` nested relative directory paths (breadth first, seeded names)."""
    dirs = [""]
    frontier = [""]
    for _level in range(depth):
        nxt = []
        for parent in frontier:
            names = sorted({_word(rng) for _ in range(rng.randint(1, fanout))})
            for name in names:
                path = f"{parent}/{name}" if parent else name
                dirs.append(path)
                nxt.append(path)
                if len(dirs) >= want:
                    return dirs
        frontier = nxt
    return dirs


def generate(out: str, p: dict) -> dict:
    """Writes the corpus for parameters `p` into `out` (created, must be empty) and returns stats."""
    rng = random.Random(p["seed"])
    os.makedirs(out, exist_ok=True)
    if os.listdir(out):
        raise SystemExit(f"corpus: {out} is not empty; give an empty or new directory")
    vocab = sorted({_word(rng) for _ in range(3000)})
    pool = _line_pool(rng, vocab, 40000)
    dirs = _dirs(rng, vocab, max(4, p["files"] // 20), p["depth"], p["fanout"])
    for d in dirs[1:]:
        os.makedirs(os.path.join(out, d), exist_ok=True)
    exts = [e for e, wgt in LANGS for _ in range(wgt)]
    mu = math.log(p["mean_size"]) - 0.5  # lognormal with sigma 1 has mean exp(mu + 0.5)
    written: list[tuple[str, bytes]] = []
    used: set[str] = set()
    stats = dict(files=0, bytes=0, duplicates=0, duplicate_bytes=0, binary_files=0, large_files=0,
                 text_files=0, dirs=len(dirs), largest=0)

    def put(rel: str, data: bytes) -> None:
        path = os.path.join(out, rel)
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
        stats["files"] += 1
        stats["bytes"] += len(data)
        stats["largest"] = max(stats["largest"], len(data))

    def fresh_name(ext: str) -> str:
        while True:
            d = rng.choice(dirs)
            name = f"{_word(rng)}_{_word(rng)}.{ext}"
            rel = f"{d}/{name}" if d else name
            if rel not in used:
                used.add(rel)
                return rel

    for i in range(p["files"]):
        r = rng.random()
        if written and r < p["dup_fraction"]:
            src_rel, data = rng.choice(written)
            rel = fresh_name(src_rel.rsplit(".", 1)[-1])
            stats["duplicates"] += 1
            stats["duplicate_bytes"] += len(data)
        elif r < p["dup_fraction"] + p["binary_fraction"]:
            rel = fresh_name(rng.choice(["bin", "png", "o", "gz"]))
            data = rng.randbytes(min(int(rng.lognormvariate(mu + 1, 1.0)), 512 * 1024))
            stats["binary_files"] += 1
        else:
            ext = rng.choice(exts)
            rel = fresh_name(ext)
            size = min(int(rng.lognormvariate(mu, 1.0)), 128 * 1024)
            data = _text(rng, pool, size, f"// {rel} ({i})\n")
            stats["text_files"] += 1
        put(rel, data)
        if len(written) < 5000 or rng.random() < 0.01:  # bounded: sources of later duplicates
            written.append((rel, data))
    for j in range(p["large_files"]):
        size = p["large_size"] // 2 + rng.randrange(max(1, p["large_size"] // 2))
        if j % 2 == 0:
            rel = fresh_name("log")
            data = _text(rng, pool, size, f"# large text {j}\n")
        else:
            rel = fresh_name("bin")
            data = rng.randbytes(size)
            stats["binary_files"] += 1
        stats["large_files"] += 1
        put(rel, data)
    for d in dirs[1:]:
        os.utime(os.path.join(out, d), (FIXED_MTIME, FIXED_MTIME))
    stats["params"] = dict(p)
    return stats


def params_for(preset: str, overrides: dict) -> dict:
    """The preset's parameters with the non-None overrides applied."""
    p = dict(PRESETS[preset])
    p.update({k: v for k, v in overrides.items() if v is not None})
    for key in ("files", "mean_size", "large_files", "large_size", "depth", "fanout"):
        if p[key] < 0 or (key in ("mean_size", "fanout") and p[key] < 1):
            raise SystemExit(f"corpus: --{key.replace('_', '-')} must be positive, got {p[key]}")
    if not 0 <= p["dup_fraction"] + p["binary_fraction"] <= 1:
        raise SystemExit("corpus: --dup-fraction + --binary-fraction must lie between 0 and 1")
    return p


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Corpus size flags, shared with tools/bench."""
    ap.add_argument("--files", type=int, help="number of small files (large files come on top)")
    ap.add_argument("--mean-size", type=int, help="mean size of a small text file in bytes")
    ap.add_argument("--large-files", type=int, help="number of large files (half text, half binary)")
    ap.add_argument("--large-size", type=int, help="nominal size of a large file in bytes")
    ap.add_argument("--binary-fraction", type=float, help="share of small files that are binary")
    ap.add_argument("--dup-fraction", type=float, help="share of small files that duplicate another")
    ap.add_argument("--depth", type=int, help="directory nesting depth")
    ap.add_argument("--fanout", type=int, help="most subdirectories per directory")
    ap.add_argument("--seed", type=int, help="random seed (same seed, same corpus)")


def overrides_from(args: argparse.Namespace) -> dict:
    """The corpus flags given on the command line."""
    keys = ("files", "mean_size", "large_files", "large_size", "binary_fraction", "dup_fraction",
            "depth", "fanout", "seed")
    return {k: getattr(args, k) for k in keys}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to create the corpus in (new or empty)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    add_arguments(ap)
    args = ap.parse_args()
    stats = generate(args.out, params_for(args.preset, overrides_from(args)))
    json.dump(stats, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
