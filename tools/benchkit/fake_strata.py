#!/usr/bin/env python3
"""A stand-in for the strata CLI, for testing tools/bench only (never for figures).

It speaks exactly the commands the harness runs, over a JSON file in the store directory:
  fake_strata.py --store DIR index PATH --quiet --json
  fake_strata.py --store DIR history PATH --json
  fake_strata.py --store DIR show PATH --as-of-tx N --json
  fake_strata.py --store DIR stats --json
Every index reads and hashes every file (no stat cache), so it is slow on purpose-free grounds;
`tools/bench --strata tools/benchkit/fake_strata.py --small` exercises the strata rows and checks.
Set FAKE_STRATA_BREAK=history to make it answer wrongly, to see the harness fail (threads: an
index with --threads skips every other file).
"""

import hashlib
import json
import os
import sys
import time


def load(store):
    try:
        with open(os.path.join(store, "state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"tx": 0, "entities": {}}


def save(store, state):
    os.makedirs(store, exist_ok=True)
    tmp = os.path.join(store, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(store, "state.json"))


def main(argv):
    if len(argv) < 3 or argv[0] != "--store":
        print("usage: fake_strata.py --store DIR COMMAND ...", file=sys.stderr)
        return 2
    store, cmd, rest = argv[1], argv[2], argv[3:]
    state = load(store)
    ents = state["entities"]
    if cmd == "index":
        t0 = time.perf_counter()
        root = os.path.abspath(rest[0])
        state["tx"] += 1
        tx = state["tx"]
        counts = dict(created=0, updated=0, unchanged=0, deleted=0, skipped=0, bytes_read=0)
        seen = set()
        broken = os.environ.get("FAKE_STRATA_BREAK") == "threads" and "--threads" in rest
        walked = 0
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in (".git", ".strata")]
            for name in names:
                path = os.path.join(dirpath, name)
                walked += 1
                if os.path.islink(path) or not os.path.isfile(path) or (broken and walked % 2):
                    counts["skipped"] += 1
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                counts["bytes_read"] += len(data)
                digest = hashlib.sha256(data).hexdigest()
                seen.add(path)
                versions = ents.setdefault(path, [])
                if not versions or versions[-1]["file_hash"] is None:
                    counts["created"] += 1
                elif versions[-1]["file_hash"] != digest:
                    counts["updated"] += 1
                else:
                    counts["unchanged"] += 1
                    continue
                versions.append({"tx_id": tx, "file_hash": digest, "size": len(data)})
        for path, versions in ents.items():
            if path.startswith(root + os.sep) and path not in seen and versions[-1]["file_hash"]:
                versions.append({"tx_id": tx, "file_hash": None, "size": 0})
                counts["deleted"] += 1
        save(store, state)
        counts["seconds"] = time.perf_counter() - t0
        print(json.dumps(counts))
    elif cmd == "history":
        versions = ents.get(os.path.abspath(rest[0]))
        if versions is None:
            print(f"no such entity: {rest[0]}", file=sys.stderr)
            return 1
        if os.environ.get("FAKE_STRATA_BREAK") == "history":
            versions = versions[:1]
        print(json.dumps(versions))
    elif cmd == "show":
        tx = int(rest[rest.index("--as-of-tx") + 1])
        versions = [v for v in ents.get(os.path.abspath(rest[0]), []) if v["tx_id"] <= tx]
        if not versions:
            print(f"nothing at tx {tx}: {rest[0]}", file=sys.stderr)
            return 1
        print(json.dumps(versions[-1]))
    elif cmd == "stats":
        print(json.dumps({"entities": len(ents), "versions": sum(map(len, ents.values())),
                          "tx": state["tx"]}))
    else:
        print(f"unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
