#!/usr/bin/env bash
# Tests of tools/bench itself, on a tiny corpus (about 20 s): the strata rows and checks through
# tools/benchkit/fake_strata.py, a wrong answer that must fail the run, and the corpus generator.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny=(--small --files 200 --large-files 1 --large-size 262144 --runs 1 --scratch "$tmp")

python3 tools/corpus/test_gen.py

tools/bench "${tiny[@]}" --strata tools/benchkit/fake_strata.py --out "$tmp/ok.json" >"$tmp/ok.md"
python3 - "$tmp/ok.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert "strata_skipped" not in r, r.get("strata_skipped")
assert all(c["ok"] for c in r["checks"]) and r["checks"], r["checks"]
for key in ("full_index_vs_git_add", "unchanged_vs_git_status", "touch_vs_git_add",
            "history_vs_git_log_p", "show_vs_git_show", "store_vs_git_after_gc",
            "full_index_vs_few_threads", "full_index_cpu_vs_few_threads_cpu"):
    assert r["ratios"][key] > 0, key
assert r["corpus"]["files"] == 201 and r["corpus"]["duplicate_files"] > 0
PY
grep -q '^| full index of a fresh store | [0-9]' "$tmp/ok.md"
grep -q '^| full index, default threads .* `--threads 1`, same run | [0-9]' "$tmp/ok.md"

if FAKE_STRATA_BREAK=history tools/bench "${tiny[@]}" --strata tools/benchkit/fake_strata.py \
    --out "$tmp/bad.json" >/dev/null 2>"$tmp/bad.err"; then
  echo "a wrong strata history did not fail the run" >&2; exit 1
fi
grep -q "strata check failed: history of" "$tmp/bad.err"

if FAKE_STRATA_BREAK=threads tools/bench "${tiny[@]}" --strata tools/benchkit/fake_strata.py \
    --out "$tmp/bad.json" >/dev/null 2>"$tmp/bad.err"; then
  echo "an index at --threads 1 that indexed other files did not fail the run" >&2; exit 1
fi
grep -q "strata check failed: index --threads 1 created" "$tmp/bad.err"

tools/bench "${tiny[@]}" --strata /bin/true --out "$tmp/skip.json" >"$tmp/skip.md"
grep -q "strata CLI not available" "$tmp/skip.md"
[ -z "$(ls -A "$tmp" | grep strata-bench- || true)" ] || { echo "scratch dir left behind" >&2; exit 1; }
echo "tools/bench tests: ok"
