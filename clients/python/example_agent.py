#!/usr/bin/env python3
"""An agent loop over strata's daemon: new session -> read a file -> tool call -> turn -> render
-> (the file changes on disk) -> resume -> render.

    python3 clients/python/example_agent.py --store DIR [--strata PATH]

DIR is a store (`strata init --store DIR`); a daemon is started for it when none runs (and exits
after 5 idle minutes; `strata --store DIR stop` stops it now). The agent works on a notes file it
writes into a new temporary directory, and removes that directory when done.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from strata_client import Client, StrataError  # noqa: E402


def run(store: str, strata: str, file: Path) -> None:
    with Client.connect(store, strata=strata) as client:
        print(f"connected to {client.server['server']} (pid {client.server['pid']}) for {client.store_dir}")

        # One commit per step; each answer carries its transaction id.
        sid = client.session_new(system_prompt="You are a terse assistant.")["session_id"]
        print(f"session {sid}")
        client.session_turn(sid, "user", f"What does {file.name} say?")

        read = client.session_read(sid, [str(file)])
        file_id = read["touched"][0]["id"]
        print(f"read {file} ({read['touched'][0]['action']}, tx {read['tx_id']})")

        # The agent runs a tool; its call and output become an object of the session.
        content = client.cat(file_id).get("text", "")
        call = client.session_toolcall(
            sid, "wc", {"path": str(file)}, "ok", f"{len(content.splitlines())} lines\n", file_refs=[file_id]
        )
        turn = client.session_turn(sid, "assistant", f"It has {len(content.splitlines())} lines.")
        print(f"tool call {call['id']} and turn {turn['turn_count']} (tx {turn['tx_id']})")

        print("--- context ---")
        print(client.session_render(sid)["text"], end="")
        print("---")

        # The world moves on: the file changes behind the agent's back.
        file.write_text(content + "a line added while the agent was away\n")
        resumed = client.session_resume(sid)
        for change in resumed["changes"]:
            print(f"resume: {change['path']} {change['action']}")
        print(f"resume checked {resumed['checked']} file(s), read {resumed['read']} (tx {resumed['tx_id']})")

        rendered = client.session_render(sid)
        print(f"--- context after resume (tx {rendered['tx_id']}) ---")
        print(rendered["text"], end="")
        print("---")
        print(f"{len(client.session_history(sid)['commits'])} commits in session {sid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store directory (holding store.redb)")
    parser.add_argument("--strata", default="strata", help="the strata program, to start a daemon")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="strata-agent-")).resolve()
    file = workdir / "notes.md"
    file.write_text("# Notes\nstrata keeps every version.\n")
    try:
        run(args.store, args.strata, file)
    except StrataError as e:
        print(f"example_agent: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
