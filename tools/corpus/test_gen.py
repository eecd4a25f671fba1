#!/usr/bin/env python3
"""Tests of the synthetic corpus generator: python3 tools/corpus/test_gen.py (stdlib unittest)."""

import hashlib
import os
import sys
import tempfile
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

SMALL = dict(files=300, large_files=2, large_size=256 * 1024)


def snapshot(root):
    """{relative path: (sha256, mtime)} of every file under root."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = (hashlib.sha256(f.read()).hexdigest(),
                                                    os.stat(full).st_mtime)
    return out


class CorpusTest(unittest.TestCase):
    def make(self, **over):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        out = os.path.join(tmp.name, "c")
        stats = gen.generate(out, gen.params_for("small", dict(SMALL, **over)))
        return out, stats

    def test_same_seed_same_tree_other_seed_other_tree(self):
        a, _ = self.make(seed=7)
        b, _ = self.make(seed=7)
        c, _ = self.make(seed=8)
        self.assertEqual(snapshot(a), snapshot(b))
        self.assertNotEqual(snapshot(a), snapshot(c))

    def test_stats_match_the_tree_and_the_mix_is_there(self):
        out, stats = self.make()
        snap = snapshot(out)
        self.assertEqual(len(snap), stats["files"])
        self.assertEqual(stats["files"], SMALL["files"] + SMALL["large_files"])
        self.assertEqual(sum(os.path.getsize(os.path.join(out, p)) for p in snap), stats["bytes"])
        digests = [d for d, _ in snap.values()]
        self.assertEqual(len(digests) - len(set(digests)), stats["duplicates"])
        self.assertGreater(stats["duplicates"], 0)
        self.assertGreater(stats["binary_files"], 0)
        self.assertTrue(any(os.sep in p for p in snap), "nested directories")
        self.assertGreaterEqual(stats["largest"], SMALL["large_size"] // 2)

    def test_text_compresses_like_code(self):
        out, _ = self.make(binary_fraction=0.0, large_files=0)
        data = b"".join(open(os.path.join(d, n), "rb").read()
                        for d, _, ns in os.walk(out) for n in sorted(ns))
        ratio = len(zlib.compress(data, 6)) / len(data)
        self.assertTrue(0.1 < ratio < 0.6, f"zlib ratio {ratio}")

    def test_bad_parameters_and_non_empty_dir_are_refused(self):
        with self.assertRaisesRegex(SystemExit, "--files must be positive"):
            gen.params_for("small", {"files": -1})
        with self.assertRaisesRegex(SystemExit, "between 0 and 1"):
            gen.params_for("small", {"dup_fraction": 0.9, "binary_fraction": 0.2})
        out, _ = self.make()
        with self.assertRaisesRegex(SystemExit, "not empty"):
            gen.generate(out, gen.params_for("small", SMALL))


if __name__ == "__main__":
    unittest.main()
