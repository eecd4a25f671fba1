"""Tests of strata_client.py against a real daemon.

    STRATA_BIN=target/debug/strata python3 -m unittest discover -s clients/python -v

The binary is $STRATA_BIN (default: target/debug/strata in the repository); these tests build
nothing. Each test makes a store in a temporary directory and stops every daemon it started
(SIGKILL as a last resort), so none is left running.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCHEMA = REPO / "schema" / "rpc"
sys.path.insert(0, str(HERE))

import strata_client as sc  # noqa: E402
from strata_client import Client  # noqa: E402

STRATA = os.path.abspath(os.environ.get("STRATA_BIN") or REPO / "target" / "debug" / "strata")
INDEX = json.loads((SCHEMA / "index.json").read_text())
ENGINE_METHODS = [entry["method"] for entry in INDEX["methods"]]


def setUpModule() -> None:
    if not os.access(STRATA, os.X_OK):
        raise RuntimeError(f"no strata binary at {STRATA}: run `cargo build` or set STRATA_BIN")


def schema(name: str) -> dict[str, Any]:
    node: dict[str, Any] = json.loads((SCHEMA / name).read_text())
    return node


def object_keys(node: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The required keys and all keys of an object schema (oneOf/anyOf object branches count
    as optional)."""
    props = set(node.get("properties", {}))
    for key in ("oneOf", "anyOf"):
        for branch in node.get(key, []):
            props |= set(branch.get("properties", {}))
    return set(node.get("required", [])), props


def alive(pid: int) -> bool:
    return sc._alive(pid)


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def daemons_of(root: str) -> list[int]:
    """The strata processes whose command line names a path under `root`."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(root.encode() in arg for arg in cmdline) and b"serve" in cmdline and alive(int(entry)):
            pids.append(int(entry))
    return pids


class DaemonTest(unittest.TestCase):
    """A fresh store with a small tree; every daemon started for it is stopped afterwards."""

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="strata-py-")
        self.store = os.path.join(self.root, "store")
        self.tree = Path(self.root) / "tree"
        (self.tree / "sub").mkdir(parents=True)
        (self.tree / "a.txt").write_text("alpha\n")
        (self.tree / "b.md").write_text("# beta\n")
        (self.tree / "sub" / "c.py").write_text("print('gamma')\n")
        self.cli("init")
        self.pids: set[int] = set()
        # A daemon that has had a subscriber does not exit on `stop` (see
        # test_stop_with_a_subscriber_connected): tests that subscribe set this, and their
        # daemon is killed instead of being kept waiting for.
        self.subscribed = False

    def tearDown(self) -> None:
        leftovers = []
        if not self.subscribed:
            try:
                with Client.connect(self.store, start=False, timeout=5) as client:
                    client.stop(timeout=3)
            except sc.StrataError:
                pass  # none answers, or it does not stop: below
        for pid in self.pids | set(daemons_of(self.root)):
            if alive(pid):
                leftovers.append(pid)
                os.kill(pid, signal.SIGKILL)
                wait_gone(pid, 5)
        shutil.rmtree(self.root, ignore_errors=True)
        self.leftovers = leftovers

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Runs the strata CLI on the store (through its daemon when one runs)."""
        env = dict(os.environ, STRATA_IDLE_TIMEOUT="30")
        done = subprocess.run(
            [STRATA, "--store", self.store, *args], capture_output=True, text=True, env=env, timeout=30
        )
        self.assertEqual(done.returncode, 0, f"strata {' '.join(args)}: {done.stderr}")
        return done

    def connect(self, **kwargs: Any) -> Client:
        kwargs.setdefault("strata", STRATA)
        kwargs.setdefault("idle_timeout", 30)
        client = Client.connect(self.store, **kwargs)
        self.addCleanup(client.close)
        self.pids.add(client.server["pid"])
        return client

    def check(self, method: str, result: Any) -> Any:
        """Asserts that `result` has the keys of the method's result schema and of its
        TypedDict; returns it."""
        node = schema(f"{method}.result.json")
        typed = sc.METHODS[method][1]
        if node.get("type") == "array":
            self.assertIsInstance(result, list)
            items = node["items"]
            if "$ref" in items:
                items = node["$defs"][items["$ref"].split("/")[-1]]
                item_type = typed.__args__[0]
                for row in result:
                    required, props = object_keys(items)
                    self.assertLessEqual(required, set(row), f"{method} row {row}")
                    self.assertLessEqual(set(row), props, f"{method} row {row}")
                    self.assertLessEqual(item_type.__required_keys__, set(row))
            return result
        self.assertIsInstance(result, dict, method)
        required, props = object_keys(node)
        self.assertLessEqual(required, set(result), f"{method}: keys missing from {result}")
        self.assertLessEqual(typed.__required_keys__, set(result), method)
        if node.get("additionalProperties") is not True:
            self.assertLessEqual(set(result), props, f"{method}: keys beyond its schema")
            self.assertLessEqual(set(result), typed.__required_keys__ | typed.__optional_keys__, method)
        return result


class TypesTest(unittest.TestCase):
    """The typed part matches schema/rpc/ (no daemon needed)."""

    def test_generated_code_is_up_to_date(self) -> None:
        done = subprocess.run(
            [sys.executable, str(HERE / "gen_types.py"), "--check"], capture_output=True, text=True
        )
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_every_method_has_a_typed_wrapper_matching_its_schema(self) -> None:
        self.assertEqual(sorted(sc.METHODS), sorted(ENGINE_METHODS))
        for entry in INDEX["methods"]:
            method = entry["method"]
            params = schema(entry["params"])
            wrapper = getattr(Client, method.replace(".", "_"))
            names = [p for p in inspect.signature(wrapper).parameters if p != "self"]
            expected = [f + "_" if f in ("from",) else f for f in params.get("properties", {})]
            self.assertEqual(sorted(names), sorted(expected), method)
            required = [
                p.name
                for p in inspect.signature(wrapper).parameters.values()
                if p.name != "self" and p.default is inspect.Parameter.empty
            ]
            self.assertEqual(sorted(required), sorted(params.get("required", [])), method)
            ptype, rtype = sc.METHODS[method]
            req, props = object_keys(params)
            self.assertEqual(set(ptype.__required_keys__), req, method)
            self.assertEqual(set(ptype.__optional_keys__), props - req, method)
            result = schema(entry["result"])
            if result.get("type") == "object":
                req, props = object_keys(result)
                self.assertEqual(set(rtype.__required_keys__), req, method)
                self.assertEqual(set(rtype.__optional_keys__), props - req, method)

    def test_errors_map_kinds_and_codes(self) -> None:
        error = sc.error_from_response(
            {"code": -32001, "message": "not found: x", "data": {"kind": "not_found", "causes": ["a", "b"]}}
        )
        self.assertIsInstance(error, sc.NotFound)
        self.assertEqual((error.kind, error.code, error.causes), ("not_found", -32001, ["a", "b"]))
        self.assertEqual(str(error), "not found: x: a: b")
        unknown = sc.error_from_response({"code": -32005, "message": "m", "data": {"kind": "new_kind"}})
        self.assertIsInstance(unknown, sc.Corrupt)
        self.assertEqual(unknown.kind, "new_kind")
        self.assertIsInstance(sc.error_from_response("junk"), sc.StrataError)
        self.assertTrue(issubclass(sc.InvalidParams, sc.InvalidInput))
        self.assertTrue(issubclass(sc.ConnectionLost, ConnectionError))


class ConnectTest(DaemonTest):
    def test_connect_starts_a_daemon_then_reuses_it(self) -> None:
        socket_path = os.path.join(self.store, "strata.sock")
        self.assertFalse(os.path.exists(socket_path))
        first = self.connect()
        self.assertEqual(first.server["protocol"], sc.PROTOCOL_VERSION)
        self.assertTrue(first.server["server"].startswith("strata "), first.server)
        self.assertTrue(os.path.exists(socket_path))
        second = self.connect(start=False)
        self.assertEqual(second.server, first.server)
        status = second.status()
        self.assertEqual(status["pid"], first.server["pid"])
        self.assertEqual(status["idle_timeout_seconds"], 30)
        self.assertEqual(os.path.realpath(status["store"]), os.path.realpath(self.store))
        self.assertGreaterEqual(status["clients"], 2)
        self.assertEqual(set(status), set(sc.Status.__required_keys__))

    def test_connect_without_start_when_none_runs(self) -> None:
        with self.assertRaises(sc.NoDaemon) as caught:
            Client.connect(self.store, start=False)
        self.assertEqual(caught.exception.kind, "no_daemon")
        self.assertIn(self.store, str(caught.exception))

    def test_connect_to_a_directory_without_a_store(self) -> None:
        empty = os.path.join(self.root, "empty")
        os.mkdir(empty)
        with self.assertRaises(sc.DaemonStartError) as caught:
            Client.connect(empty, strata=STRATA)
        self.assertIn("holds no strata store", str(caught.exception))
        self.assertIn("strata init", str(caught.exception))
        with self.assertRaises(sc.NotFound):
            Client.connect(os.path.join(self.root, "missing"), strata=STRATA)
        with self.assertRaises(sc.DaemonStartError) as caught:
            Client.connect(self.store, strata=os.path.join(self.root, "no-such-strata"))
        self.assertIn("no program", str(caught.exception))

    def test_another_major_protocol_version_is_refused(self) -> None:
        client = self.connect()
        self.assertEqual(client.handshake(protocol="1.9")["protocol"], sc.PROTOCOL_VERSION)
        with self.assertRaises(sc.ProtocolVersionError) as caught:
            client.handshake(protocol="2.0")
        self.assertEqual((caught.exception.kind, caught.exception.code), ("protocol_version", -32009))
        self.assertIn("major version 1", str(caught.exception))

        class Future(Client):
            PROTOCOL = "2.0"

        with self.assertRaises(sc.ProtocolVersionError):
            Future.connect(self.store, start=False)

    def test_the_daemon_knows_exactly_the_schema_methods(self) -> None:
        client = self.connect()
        with self.assertRaises(sc.MethodNotFound) as caught:
            client.call("no.such.method")
        self.assertEqual(caught.exception.code, -32601)
        listed = caught.exception.message.split("the methods are ", 1)[1]
        engine = listed.split(" and ", 1)[0].split(", ")
        self.assertEqual(engine, ENGINE_METHODS)


class MethodsTest(DaemonTest):
    def test_the_agent_loop(self) -> None:
        client = self.connect()
        new = self.check("session.new", client.session_new(system_prompt="You are terse."))
        sid = new["session_id"]
        turn = self.check("session.turn", client.session_turn(sid, "user", "What is in a.txt?"))
        self.assertEqual(turn["turn_count"], 1)
        a = str(self.tree / "a.txt")
        read = self.check("session.read", client.session_read(sid, [a]))
        self.assertEqual([(t["path"], t["action"]) for t in read["touched"]], [(a, "created")])
        file_id = read["touched"][0]["id"]
        call = self.check(
            "session.toolcall",
            client.session_toolcall(sid, "cat", {"path": a}, "ok", "alpha\n", file_refs=[file_id]),
        )
        self.assertTrue(call["id"].startswith("toolcall:"), call)
        answer = self.check("session.turn", client.session_turn(sid, "assistant", "alpha"))
        self.assertGreater(answer["tx_id"], call["tx_id"])
        render = self.check("session.render", client.session_render(sid))
        self.assertIn("You are terse.", render["text"])
        self.assertIn("alpha", render["text"])
        self.assertIn(call["id"], render["text"])

        (self.tree / "a.txt").write_text("alpha, changed\n")
        resume = self.check("session.resume", client.session_resume(sid))
        self.assertEqual([(c["path"], c["action"]) for c in resume["changes"]], [(a, "updated")])
        self.assertIn("alpha, changed", client.session_render(sid)["text"])
        past = client.session_render(sid, as_of_tx=render["tx_id"], budget=100_000)
        self.assertNotIn("alpha, changed", past["text"])

        shown = self.check("session.show", client.session_show(sid))
        self.assertEqual([t["role"] for t in shown["turns"]], ["user", "assistant"])
        history = self.check("session.history", client.session_history(sid))
        self.assertEqual(history["session_id"], sid)
        self.assertGreaterEqual(len(history["commits"]), 5)
        discover = self.check("session.discover", client.session_discover(sid, [str(self.tree / "b.md")]))
        self.assertEqual(discover["touched"][0]["action"], "created")
        pinned = self.check("session.set", client.session_set(sid, file_id, "pin"))
        self.assertEqual(pinned["op"], "pin")
        fork = self.check("session.fork", client.session_fork(sid, new_id="forked-one"))
        self.assertEqual(fork["session_id"], "forked-one")
        self.assertEqual(fork["forked_from"]["session_id"], sid)
        self.assertEqual(sorted(self.check("session.ls", client.session_ls())), sorted([sid, "forked-one"]))

    def test_large_user_input_is_paged_when_the_session_says_so(self) -> None:
        client = self.connect()
        settings = {
            "max_direct_output_chars": 8000,
            "default_page_size": 4000,
            "max_input_chars": 100,
            "page_user_input": True,
        }
        sid = client.session_new(descriptor_settings=settings)["session_id"]
        text = "  ab " + "y" * 96
        at_limit = self.check("session.turn", client.session_turn(sid, "user", text[:100]))
        self.assertNotIn("paged", at_limit)
        turn = self.check("session.turn", client.session_turn(sid, "user", text))
        self.assertEqual(turn["paged"]["fd"], "fd:1")
        self.assertTrue(turn["paged"]["message"].startswith('<fd:1 preview="ab..." type="user_input" size="101">'))
        read = client.agent_call(sid, "read_fd", args={"fd": "fd:1", "read_all": True})
        self.assertFalse(read["is_error"], read)
        self.assertEqual(read["text"].split(">\n", 1)[1].rsplit("\n</fd_content>", 1)[0], text)
        shown = client.session_show(sid)
        self.assertEqual(shown["turns"][-1]["content"], turn["paged"]["message"])
        off = client.session_new()["session_id"]
        self.assertNotIn("paged", client.session_turn(off, "user", text))

    def test_a_pushed_copy_is_read_and_refuses_the_agents_writes(self) -> None:
        client = self.connect()
        sid = client.session_new(mounts=[{"agent_prefix": "/work", "canonical_prefix": str(self.tree)}])[
            "session_id"
        ]
        pushed = self.check("agent.push", client.agent_push(sid, "a.txt", text="alpha, unsaved\n", caller="editor"))
        self.assertTrue(pushed["standing"], pushed)
        self.assertEqual(pushed["sha256"], hashlib.sha256(b"alpha, unsaved\n").hexdigest())
        read = client.agent_call(sid, "read_file", args={"filepath": "a.txt"})
        self.assertEqual(sc.tool_parts(read["text"])[1], "alpha, unsaved\n")
        write = client.agent_call(
            sid, "write_file", args={"filepath": "a.txt", "content": "x\n", "expected_sha256": pushed["sha256"]}
        )
        self.assertTrue(write["is_error"])
        self.assertEqual(json.loads(write["text"])["conflict"]["kind"], "overlapping_edits")
        self.assertEqual((self.tree / "a.txt").read_text(), "alpha\n")
        with self.assertRaises(sc.InvalidInput):
            client.agent_push(sid, "a.txt", base64="//79")
        self.check("agent.withdraw", client.agent_withdraw(sid, "a.txt"))
        with self.assertRaises(sc.NotFound):
            client.agent_withdraw(sid, "a.txt")

    def test_agent_tools(self) -> None:
        client = self.connect()
        sid = client.session_new(mounts=[{"agent_prefix": "/work", "canonical_prefix": str(self.tree)}])[
            "session_id"
        ]
        tools = self.check("agent.tools", client.agent_tools(sid))
        self.assertEqual(tools["tools"][0]["name"], "list_files")
        self.assertIn("<file_descriptor_instructions>", tools["instructions"])
        listed = self.check("agent.call", client.agent_call(sid, "list_files", caller="python"))
        files = json.loads(listed["text"])["files"]
        self.assertEqual([(f["fileId"], f["filename"]) for f in files], [("f1", "a.txt"), ("f2", "b.md"), ("f3", "sub/c.py")])
        read = client.agent_call(sid, "read_lines", args={"filepath": "f1", "start": 1, "end": 1})
        self.assertFalse(read["is_error"], read)
        header, body = sc.tool_parts(read["text"])
        self.assertEqual(body, "alpha\n")
        self.assertEqual(header["sha256"], hashlib.sha256(b"alpha\n").hexdigest())
        failed = client.agent_call(sid, "read_file", args={"filepath": "f9"})
        self.assertTrue(failed["is_error"])
        self.assertEqual(json.loads(failed["text"])["error"], "not_found")
        with self.assertRaises(sc.InvalidInput):
            client.agent_call(sid, "no_such_tool")

    def test_agent_writes_and_approval(self) -> None:
        client = self.connect()
        sid = client.session_new(mounts=[{"agent_prefix": "/work", "canonical_prefix": str(self.tree)}])[
            "session_id"
        ]
        read = client.agent_call(sid, "read_lines", args={"filepath": "a.txt", "start": 1, "end": 1})
        sha = sc.tool_parts(read["text"])[0]["sha256"]
        patched = self.check("agent.call", client.agent_call(sid, "apply_patch", args={"files": [
            {"docPath": "a.txt", "originalSha256": sha, "changes": [
                {"operation": "replace", "startLine": 1, "endLine": 1,
                 "expectedOriginalLines": ["alpha"], "newLines": ["ALPHA"]}]}]}))
        answer = json.loads(patched["text"])
        self.assertTrue(answer["success"], answer)
        self.assertEqual((self.tree / "a.txt").read_text(), "ALPHA\n")
        new_sha = answer["files"][0]["newSha256"]
        self.assertEqual(new_sha, hashlib.sha256(b"ALPHA\n").hexdigest())
        stale = json.loads(client.agent_call(sid, "write_file", args={
            "filepath": "a.txt", "content": "x", "expected_sha256": sha})["text"])
        self.assertEqual(stale["conflict"]["kind"], "stale_buffer")
        held = json.loads(client.agent_call(sid, "delete_file", args={
            "filepath": "a.txt", "expected_sha256": new_sha})["text"])
        self.assertEqual(held["errorCode"], "APPROVAL_REQUIRED")
        self.assertTrue((self.tree / "a.txt").exists())
        approved = self.check("agent.approve", client.agent_approve(sid, held["approval"]["token"]))
        self.assertFalse(approved["is_error"], approved)
        self.assertFalse((self.tree / "a.txt").exists())
        with self.assertRaises(sc.NotFound):
            client.agent_approve(sid, held["approval"]["token"])

    def test_objects_log_and_maintenance(self) -> None:
        client = self.connect()
        (self.tree / "blob.bin").write_bytes(b"\x00\xff\x00binary")
        indexed = self.check("index", client.index([str(self.tree)]))
        self.assertEqual(indexed["created"], 4)
        rows = self.check("ls", client.ls(prefix=str(self.tree)))
        self.assertEqual(len(rows), 4)
        a = str(self.tree / "a.txt")
        shown = self.check("show", client.show(a))
        self.assertEqual(shown["object"]["content"], "alpha\n")
        self.assertEqual(self.check("cat", client.cat(a))["text"], "alpha\n")
        blob = self.check("cat", client.cat(str(self.tree / "blob.bin")))
        self.assertIn("base64", blob)

        # Relative references are taken from this process's working directory, as the CLI does.
        here = os.getcwd()
        os.chdir(self.tree)
        try:
            self.assertEqual(client.cat("a.txt")["text"], "alpha\n")
            self.assertEqual(client.call("cat", reference="a.txt", cwd=str(self.tree))["text"], "alpha\n")
        finally:
            os.chdir(here)

        (self.tree / "a.txt").write_text("alpha 2\n")
        self.assertEqual(client.index([str(self.tree)])["updated"], 1)
        history = self.check("history", client.history(a))
        self.assertEqual(len(history["versions"]), 2)
        first_tx = history["versions"][0]["tx_id"]
        self.assertEqual(client.cat(a, as_of={"as_of_tx": first_tx})["text"], "alpha\n")
        diff = self.check("diff", client.diff(a, from_=first_tx))
        self.assertIn("-alpha\n+alpha 2\n", diff["text"])
        log = self.check("log", client.log(limit=1))
        self.assertEqual(len(log["records"]), 1)
        self.assertEqual(log["head"]["tx_id"], log["records"][0]["tx_id"])
        stats = self.check("stats", client.stats())
        self.assertGreaterEqual(stats["entities"], 4)
        fsck = self.check("fsck", client.fsck())
        self.assertEqual(fsck["findings"], [])
        evicted = self.check("evict", client.evict(str(self.tree / "b.md"), confirm=True))
        self.assertEqual(evicted["versions"], 1)
        self.check("gc", client.gc())
        self.assertEqual(client.fsck(rebuild=True)["findings"], [])

    def test_mounts(self) -> None:
        client = self.connect()
        mount: sc.MountMapping = {"agent_prefix": "/work", "canonical_prefix": str(self.tree), "read_only": True}
        added = self.check("mount.add", client.mount_add(mount))
        self.assertEqual(added["mount"]["canonical_prefix"], str(self.tree))
        self.assertEqual([m["agent_prefix"] for m in self.check("mount.ls", client.mount_ls())["mounts"]], ["/work"])
        sid = client.session_new()["session_id"]
        read = client.session_read(sid, ["/work/a.txt"])
        self.assertEqual(read["touched"][0]["path"], "/work/a.txt")
        self.assertEqual(client.show(read["touched"][0]["id"])["object"]["source"]["path"], str(self.tree / "a.txt"))
        removed = self.check("mount.rm", client.mount_rm("/work"))
        self.assertEqual(removed["mount"]["agent_prefix"], "/work")
        self.assertEqual(client.mount_ls()["mounts"], [])

    def test_errors(self) -> None:
        client = self.connect()
        with self.assertRaises(sc.NotFound) as caught1:
            client.session_read("no-such-session", [str(self.tree / "a.txt")])
        error = caught1.exception
        self.assertEqual((error.kind, error.code), ("not_found", -32001))
        self.assertIn("no-such-session", error.message)
        with self.assertRaises(sc.InvalidParams) as caught2:
            client.call("session.read", id=5, paths=[])
        self.assertEqual((caught2.exception.kind, caught2.exception.code), ("invalid_params", -32602))
        self.assertIn("session.read.params.json", caught2.exception.message)
        with self.assertRaises(sc.InvalidParams) as caught3:
            client.call("session.turn", {"id": "x", "role": "user", "content": "hi", "colour": "red"})
        self.assertIn("unknown field `colour`", caught3.exception.message)
        with self.assertRaises(sc.InvalidParams):
            client.call("session.turn", id="x")  # missing fields
        with self.assertRaises(sc.InvalidParams) as caught4:
            client.call("session.turn", id=object())  # not JSON: refused here
        self.assertIn("not JSON", str(caught4.exception))
        with self.assertRaises(sc.InvalidInput) as caught5:
            client.session_set(client.session_new()["session_id"], "not-in-the-pool", "pin")
        self.assertEqual(caught5.exception.code, -32602)
        with self.assertRaises(sc.InvalidPath):
            client.index(["no-such-dir"])
        with self.assertRaises(sc.StrataError) as caught6:
            client.show(str(self.tree / "never-indexed"))
        self.assertIn("never-indexed", str(caught6.exception))
        with self.assertRaises(sc.CallTimeout):
            client.call_with_timeout("fsck", {"rebuild": True}, 1e-6)
        self.assertEqual(client.status()["pid"], client.server["pid"])  # late answers are dropped

    def test_threads_share_one_client(self) -> None:
        client = self.connect()
        sessions = [client.session_new()["session_id"] for _ in range(2)]
        txs: list[int | None] = []
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(5):
                    txs.append(client.session_turn(sessions[n % 2], "user", f"{n}.{i}")["tx_id"])
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(set(txs)), 40)
        for sid in sessions:
            self.assertEqual(len(client.session_show(sid)["turns"]), 20)


class NotificationsTest(DaemonTest):
    def test_one_commit_notification_per_commit(self) -> None:
        listener = self.connect()
        writer = self.connect()
        self.subscribed = True
        self.assertEqual(listener.subscribe(), {"subscribed": True})
        self.assertEqual(listener.subscribe(), {"subscribed": True})  # sent once
        new = writer.session_new()
        sid = new["session_id"]
        txs: list[int | None] = [new["tx_id"]]
        txs.append(writer.session_read(sid, [str(self.tree / "a.txt")])["tx_id"])
        txs.append(writer.session_turn(sid, "user", "hi")["tx_id"])
        txs.append(listener.session_turn(sid, "assistant", "hello")["tx_id"])  # its own too
        indexed = writer.index([str(self.tree)])["tx_ids"]
        self.assertNotEqual(indexed, [])
        txs += indexed
        self.cli("session", "turn", sid, "--role", "user", "--content", "from the CLI")
        txs.append(writer.session_show(sid)["tx_id"])
        self.assertEqual(len(set(txs)), len(txs))
        seen: list[sc.CommitEvent] = []
        for event in listener.commits(timeout=5):
            seen.append(event)
            if len(seen) == len(txs):
                break
        self.assertEqual(sorted(e["tx_id"] for e in seen), sorted(t for t in txs if t is not None))
        self.assertIsNone(listener.next_notification(timeout=0.2), "a commit notified twice")
        by_tx: dict[int | None, sc.CommitEvent] = {e["tx_id"]: e for e in seen}
        self.assertEqual(by_tx[txs[0]]["sessions"], [sid])
        self.assertEqual(by_tx[txs[1]]["paths"], [str(self.tree / "a.txt")])
        self.assertEqual(set(by_tx[txs[1]]), set(sc.CommitEvent.__required_keys__))
        self.assertIn("indexer", {e["origin"] for e in seen})


class LifecycleTest(DaemonTest):
    def test_change_notifications_of_watched_files(self) -> None:
        client = self.connect()
        self.subscribed = True
        tree = str(self.tree.resolve())
        client.call("watch.add", {"paths": [tree]})
        self.assertEqual(client.subscribe(paths=[str(self.tree.resolve() / "sub")]), {"subscribed": True})
        (self.tree / "a.txt").write_text("not under the prefix\n")
        (self.tree / "sub" / "c.py").write_text("print('changed')\n")
        change = next(client.changes(timeout=10))
        self.assertEqual(change["path"], str(self.tree.resolve() / "sub" / "c.py"))
        self.assertIn(change["kind"], ("created", "updated"))
        self.assertIsInstance(change["tx"], int)

    def test_stop(self) -> None:
        client = self.connect()
        pid = client.server["pid"]
        client.stop()
        self.assertFalse(alive(pid))
        self.assertFalse(os.path.exists(os.path.join(self.store, "strata.sock")))
        with self.assertRaises(sc.ConnectionLost):
            client.status()
        self.assertFalse(client.connected)
        with self.assertRaises(sc.NoDaemon):
            Client.connect(self.store, start=False)

    def test_connection_lost_when_the_daemon_is_killed(self) -> None:
        client = self.connect()
        listener = self.connect()
        listener.subscribe()
        sid = client.session_new()["session_id"]
        pid = client.server["pid"]
        failures: list[BaseException] = []

        def listen() -> None:
            try:
                for _ in listener.commits():
                    pass
            except BaseException as e:  # noqa: BLE001
                failures.append(e)

        thread = threading.Thread(target=listen)
        thread.start()
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_gone(pid, 5))
        thread.join(5)
        self.assertEqual([type(e) for e in failures], [sc.ConnectionLost])
        with self.assertRaises(sc.ConnectionLost) as caught:
            client.session_turn(sid, "user", "anyone there?")
        self.assertIn("connection lost", str(caught.exception))
        self.assertIn("daemon.log", str(caught.exception))
        self.assertTrue(os.path.exists(os.path.join(self.store, "strata.sock")), "the stale socket stays")

        # The next connect replaces the stale socket with a new daemon, and nothing is lost.
        again = self.connect()
        self.assertNotEqual(again.server["pid"], pid)
        self.assertIn(sid, again.session_ls())
        self.assertEqual(again.fsck()["findings"], [])

    def test_stop_with_a_subscriber_connected(self) -> None:
        # The daemon stops (and closes the store) with a subscriber connected.
        client = self.connect()
        self.subscribed = True
        self.connect().subscribe()
        client.stop(timeout=10)

    def test_example_agent(self) -> None:
        done = subprocess.run(
            [sys.executable, str(HERE / "example_agent.py"), "--store", self.store, "--strata", STRATA],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("resume: ", done.stdout)
        self.assertIn("updated", done.stdout)
        self.assertIn("a line added while the agent was away", done.stdout)


if __name__ == "__main__":
    unittest.main()
