"""A client of strata's daemon (`strata serve`), standard library only (Python 3.11+).

The daemon serves a store's engine as JSON-RPC 2.0 on the Unix socket `STORE/strata.sock`, one
JSON message per line. This module connects to it, starting a daemon for the store when none
answers (as the strata CLI does), and offers every engine method as a typed wrapper (generated
from schema/rpc/ by gen_types.py) beside the generic `Client.call`:

    from strata_client import Client

    with Client.connect(".strata") as strata:
        sid = strata.session_new(system_prompt="You are terse.")["session_id"]
        strata.session_read(sid, ["/home/me/project/README.md"])
        strata.session_turn(sid, "user", "What does the README say?")
        print(strata.session_render(sid)["text"])

Errors the daemon answers with raise `StrataError` (a subclass per kind: `NotFound`,
`InvalidParams`, …; `.kind`, `.code`, `.message`, `.causes`); a connection that goes away raises
`ConnectionLost`. One `Client` may be shared by threads: calls are multiplexed over its one
connection and each gets its own answer. Notifications (`subscribe()`, then `notifications()` or
`commits()`) are best read by one thread.

Copy this one file into a project, or put clients/python/ on sys.path.
"""

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

__all__ = [
    "Client",
    "CommitEvent",
    "Handshake",
    "Notification",
    "Status",
    "METHODS",
    "PROTOCOL_VERSION",
    "StrataError",
    "NotFound",
    "Conflict",
    "InvalidPath",
    "InvalidInput",
    "InvalidParams",
    "PermissionDenied",
    "Corrupt",
    "StoreLocked",
    "FormatVersion",
    "StorageError",
    "InternalError",
    "ProtocolError",
    "MethodNotFound",
    "ProtocolVersionError",
    "ConnectionLost",
    "CallTimeout",
    "NoDaemon",
    "DaemonStartError",
    "find_store",
]

__version__ = "0.1.0"

#: The protocol version this client speaks; a daemon of another major version is refused.
PROTOCOL_VERSION = "1.0"
#: The socket's file name inside the store directory.
SOCKET_FILE = "strata.sock"
#: The daemon's log inside the store directory (auto-started daemons log there).
LOG_FILE = "daemon.log"
#: The largest message the daemon reads; a longer request is refused here, before sending.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Seconds without a client after which an auto-started daemon exits (the CLI's default).
DEFAULT_IDLE_TIMEOUT = 300
#: Seconds to wait for a daemon this client started to answer.
START_TIMEOUT = 10.0
#: Seconds to wait for the handshake's answer when the client has no timeout of its own.
HANDSHAKE_TIMEOUT = 10.0


# --- errors ----------------------------------------------------------------------------------


class StrataError(Exception):
    """An error answered by the daemon, or met by this client on the way to it.

    kind: one word a program can match: the daemon's `data.kind` (`not_found`, `conflict`,
        `invalid_path`, `invalid_input`, `invalid_params`, `permission_denied`, `corrupt`,
        `store_locked`, `format_version`, `io`, `storage`, `invariant`, `parse_error`,
        `invalid_request`, `method_not_found`, `protocol_version`), or this client's own
        (`connection_lost`, `timeout`, `no_daemon`, `daemon_start`).
    code: the JSON-RPC error code (None for this client's own errors).
    message: the error's text; causes: its causes' texts, outermost first.
    str(error) is the message and its causes joined by ": ", as the strata CLI prints them.
    """

    def __init__(
        self,
        kind: str,
        code: int | None,
        message: str,
        causes: list[str] | None = None,
        data: Any = None,
    ) -> None:
        self.kind = kind
        self.code = code
        self.message = message
        self.causes = list(causes or [])
        self.data = data
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return ": ".join([self.message, *self.causes])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, code={self.code!r}, message={self.message!r})"

    def _clone(self) -> "StrataError":
        """A fresh instance (one error can be raised in several threads)."""
        return type(self)(self.kind, self.code, self.message, self.causes, self.data)


class NotFound(StrataError):
    """The thing asked for does not exist (`not_found`, -32001)."""


class Conflict(StrataError):
    """A precondition on the current state failed (`conflict`, -32002)."""


class InvalidPath(StrataError):
    """A path was rejected (`invalid_path`, -32003)."""


class InvalidInput(StrataError):
    """A value was refused (`invalid_input`, -32602)."""


class InvalidParams(InvalidInput):
    """The params do not fit the method's schema (`invalid_params`, -32602)."""


class PermissionDenied(StrataError):
    """Refused by configuration, or the peer is another user (`permission_denied`, -32004)."""


class Corrupt(StrataError):
    """Stored data failed a check (`corrupt`, -32005): see `strata fsck`."""


class StoreLocked(StrataError):
    """The store is held by another process (`store_locked`, -32006)."""


class FormatVersion(StrataError):
    """The store has another format version (`format_version`, -32007)."""


class StorageError(StrataError):
    """An I/O or storage engine failure (`io`, `storage`, -32008)."""


class InternalError(StrataError):
    """The daemon broke one of its own invariants (`invariant`, -32603): a bug to report."""


class ProtocolError(StrataError):
    """The message was not a request the daemon understands (`parse_error`, `invalid_request`)."""


class MethodNotFound(ProtocolError):
    """No such method (`method_not_found`, -32601)."""


class ProtocolVersionError(ProtocolError):
    """The daemon speaks another major protocol version (`protocol_version`, -32009)."""


class ConnectionLost(StrataError, ConnectionError):
    """The connection to the daemon went away (it stopped or crashed, or the client was closed).
    A call that was in flight may or may not have been applied; `Client.connect` again (which
    starts a new daemon when none answers) and check."""


class CallTimeout(StrataError, TimeoutError):
    """No answer within the call's timeout (the request may still be applied)."""


class NoDaemon(StrataError):
    """No daemon answers for the store, and `start=False`."""


class DaemonStartError(StrataError):
    """A daemon could not be started for the store (its message says why)."""


_KINDS: dict[str, type[StrataError]] = {
    "not_found": NotFound,
    "conflict": Conflict,
    "invalid_path": InvalidPath,
    "invalid_input": InvalidInput,
    "invalid_params": InvalidParams,
    "permission_denied": PermissionDenied,
    "corrupt": Corrupt,
    "store_locked": StoreLocked,
    "format_version": FormatVersion,
    "io": StorageError,
    "storage": StorageError,
    "invariant": InternalError,
    "parse_error": ProtocolError,
    "invalid_request": ProtocolError,
    "method_not_found": MethodNotFound,
    "protocol_version": ProtocolVersionError,
}

_CODES: dict[int, type[StrataError]] = {
    -32700: ProtocolError,
    -32600: ProtocolError,
    -32601: MethodNotFound,
    -32602: InvalidParams,
    -32603: InternalError,
    -32001: NotFound,
    -32002: Conflict,
    -32003: InvalidPath,
    -32004: PermissionDenied,
    -32005: Corrupt,
    -32006: StoreLocked,
    -32007: FormatVersion,
    -32008: StorageError,
    -32009: ProtocolVersionError,
}


def error_from_response(error: Any) -> StrataError:
    """The `StrataError` of a JSON-RPC `error` member: the class of its `data.kind` (or, for a
    kind this client does not know, of its code)."""
    if not isinstance(error, dict):
        return StrataError("remote", None, f"the daemon answered with a malformed error: {error!r}")
    raw_data = error.get("data")
    data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
    raw_code = error.get("code")
    code = raw_code if isinstance(raw_code, int) else None
    raw_kind = data.get("kind")
    kind = raw_kind if isinstance(raw_kind, str) else "remote"
    raw_causes = data.get("causes")
    causes = [c for c in raw_causes if isinstance(c, str)] if isinstance(raw_causes, list) else []
    message = str(error.get("message", ""))
    cls = _KINDS.get(kind) or (_CODES.get(code) if code is not None else None) or StrataError
    return cls(kind, code, message, causes, error.get("data"))


# --- the daemon's own methods and notifications (not in schema/rpc/) ---------------------------


class Handshake(TypedDict):
    """What `handshake` answers."""

    protocol: str  # the protocol version the daemon speaks
    server: str  # the daemon's program and version, e.g. `strata 0.1.0`
    pid: int  # the daemon's process id


class Status(TypedDict):
    """What `status` answers: the daemon's state."""

    pid: int
    started: str  # RFC 3339
    uptime_seconds: float
    clients: int  # connected now
    requests: int  # answered since it started
    in_flight: int
    last_tx: int | None  # the latest durable transaction
    queued_writes: int
    store: str
    idle_timeout_seconds: int | None  # None: it runs until stopped
    watch: NotRequired[dict[str, Any]]  # the file watcher's counters, when a root is watched


class FileChange(TypedDict):
    """The params of a `change` notification (a subscription by `paths` or `sessions`): what
    one transaction did to one file."""

    path: str  # the file's canonical path
    entity: str  # its entity id
    tx: int  # the transaction
    kind: str  # `created`, `updated` or `deleted`


class CommitEvent(TypedDict):
    """The params of a `commit` notification: one transaction, once durable."""

    tx_id: int
    origin: str  # who wrote it: `indexer`, `session`, `cli`, …
    entities: list[str]  # the entities it wrote, in op order
    paths: list[str]  # the canonical paths of the files among them
    sessions: list[str]  # the sessions it committed
    changes: list[FileChange]  # what happened to each file among its entities


@dataclass(frozen=True)
class Notification:
    """A message from the daemon that answers no request (e.g. `commit` after `subscribe`)."""

    method: str
    params: Any


# --- generated from schema/rpc/ ----------------------------------------------------------------

# --- BEGIN GENERATED by gen_types.py from schema/rpc/: do not edit by hand ---

class AsOf(TypedDict):
    """Which version a reading request reads: at a valid time, as the store knew it at a transaction or a transaction time. Every field defaults to "now" / "latest"."""
    # Read as the store knew it after this transaction.
    as_of_tx: NotRequired[int | None]
    # Read as the store knew it at this time (RFC 3339); ignored when `as_of_tx` is given.
    tx_time: NotRequired[str | None]
    # The valid time to read at (RFC 3339); default now.
    valid_at: NotRequired[str | None]


class LsParams(TypedDict):
    """`ls`: the files the store knows under a path, as of a time."""
    # Include deleted files.
    all: NotRequired[bool]
    # Which version to list.
    as_of: NotRequired[AsOf]
    # The caller's working directory, for a relative prefix.
    cwd: NotRequired[str | None]
    # Only paths under this prefix (a host path; relative ones are taken from `cwd`).
    prefix: NotRequired[str | None]


class LsRow(TypedDict):
    """One file of `ls`."""
    # The canonical path.
    path: str
    # The entity id.
    id: str
    # Byte size, as the content's stored record states it (`None` when unknown: stubs, denied files, deleted files).
    size: int | None
    # How many versions the store knew then.
    versions: int
    # Start of the version in valid time (RFC 3339).
    last_change: str
    # The transaction that wrote the version.
    tx_id: int
    # `text`, `binary`, `too_large`, `denied`, `stub`, `deleted`, or `damaged` (its rows fail their checks, or its content's record is missing or its header unreadable: see `damage`; the content's bytes are not read, `fsck` checks them).
    state: str
    # What is damaged, for a `damaged` row (its other fields are then empty). A damaged row with an empty id is the listing itself: the store is marked damaged, so files may be missing.
    damage: NotRequired[str | None]


LsResult = list[LsRow]


class ShowParams(TypedDict):
    """`show`: one object's envelope and version."""
    # A path, an entity id, or an id prefix of at least 8 hex characters (`id:PREFIX` forces ids).
    reference: str
    # Which version to show.
    as_of: NotRequired[AsOf]
    # The caller's working directory, for a relative path.
    cwd: NotRequired[str | None]


class ShowResult(TypedDict):
    """What `show` answers: the envelope and what the version row adds to it."""
    # The envelope with the seed's field names (`schema/objects/<type>.schema.json`).
    object: dict[str, Any]
    # The type's own fields (the metadata hash's input).
    fields: Any
    # Start of the version in valid time (RFC 3339).
    valid_from: str
    # End of the version in valid time, when a later one starts.
    valid_to: str | None
    # The transaction that wrote it.
    tx_id: int
    # That transaction's time (RFC 3339).
    tx_time: str
    # Byte size of the file's content or kept bytes.
    size: int | None
    # Why the content is null (`binary`, `too_large`, `denied`).
    content_omitted: str | None
    # Whether the object is a stub (known by path only, never read).
    stub: bool


class CatParams(TypedDict):
    """`cat`: one object's content, raw."""
    # A path, an entity id, or an id prefix.
    reference: str
    # Which version to read.
    as_of: NotRequired[AsOf]
    # The caller's working directory, for a relative path.
    cwd: NotRequired[str | None]


class CatResult(TypedDict):
    """What `cat` answers: the content, as text when it is UTF-8, else base64."""
    # The entity id.
    id: str
    # The bytes in standard base64.
    base64: NotRequired[str]
    # The text.
    text: NotRequired[str]


class HistoryParams(TypedDict):
    """`history`: one object's versions."""
    # A path, an entity id, or an id prefix.
    reference: str
    # As the store knew it then (`valid_at` does not apply: every valid time is listed).
    as_of: NotRequired[AsOf]
    # Order by transaction instead of valid time.
    by_tx: NotRequired[bool]
    # Include corrections (versions later superseded at the same valid time).
    corrections: NotRequired[bool]
    # The caller's working directory, for a relative path.
    cwd: NotRequired[str | None]


class HistoryRow(TypedDict):
    """One version of `history`."""
    # The transaction that wrote it.
    tx_id: int
    # That transaction's time (RFC 3339).
    tx_time: str
    # Start in valid time (RFC 3339).
    valid_from: str
    # End in valid time, when a later version starts.
    valid_to: str | None
    # The object hash; `None` for a tombstone.
    object_hash: str | None
    # Whether the entity does not exist in this version.
    deleted: bool
    # Byte size of the content or kept bytes.
    size: int | None
    # Why the content is null.
    content_omitted: str | None


class HistoryResult(TypedDict):
    """What `history` answers."""
    # The entity id.
    id: str
    # Its type.
    object_type: str
    # Its canonical path, for a file.
    path: str | None
    # The versions, in the order asked for.
    versions: list[HistoryRow]


DiffParams = TypedDict(
    "DiffParams",
    {
        # A path, an entity id, or an id prefix.
        "reference": str,
        # The caller's working directory, for a relative path.
        "cwd": NotRequired[str | None],
        # The older version, as a transaction id (default: the version before `to`).
        "from": NotRequired[int | None],
        # The newer version, as a transaction id (default: the current one).
        "to": NotRequired[int | None],
    },
)
DiffParams.__doc__ = """`diff`: a unified diff between two versions of an object."""


class DiffResult(TypedDict):
    """What `diff` answers."""
    # The entity id.
    id: str
    # The transaction of the older side (`None`: the entity did not exist before).
    from_tx: int | None
    # The transaction the newer side is read at.
    to_tx: int
    # The unified diff, with `---`/`+++` labels (`/dev/null` for a side where the entity does not exist).
    text: str


class LogParams(TypedDict):
    """`log`: the transaction log."""
    # At most this many transactions: the newest, or the first after `since`.
    limit: NotRequired[int | None]
    # Only transactions after this one.
    since: NotRequired[int | None]


class LogOp(TypedDict):
    """One op of a log record: its digest always, its body unless its entity was evicted."""
    # BLAKE3 of the op's canonical JSON, hex.
    digest: str
    # The op as the JSON that was hashed (`schema/tx_record.schema.json`); `None` once evicted.
    body: Any


class LogRecord(TypedDict):
    """One transaction of the log."""
    # The transaction's number.
    tx_id: int
    # When the store committed it (RFC 3339).
    tx_time: str
    # Who wrote it.
    origin: str
    # Its ops in order.
    ops: list[LogOp]
    # The chain value after this record, hex.
    chain: str
    # The index run it belongs to (the run's first transaction), absent outside runs.
    run: NotRequired[int | None]


class ChainHead(TypedDict):
    """The chain's head: the latest transaction and the chain value after it."""
    # The latest transaction.
    tx_id: int
    # The chain value after it, hex.
    chain: str


class LogResult(TypedDict):
    """What `log` answers."""
    # The records, oldest first.
    records: list[LogRecord]
    # The chain's head (`None` in an empty store).
    head: ChainHead | None


class LogRunParams(TypedDict):
    """`log.run`: the index run that reading as of transaction `tx` would see only part of."""
    # The transaction a read is made as of (`--as-of-tx`).
    tx: int


class PartialRun(TypedDict):
    """An index run that a read as of some transaction sees only the start of."""
    # The run's first transaction (its id).
    run: int
    # The run's last transaction found.
    last: int
    # How many of the run's transactions are at or before the transaction asked about.
    seen: int
    # How many transactions the run wrote.
    transactions: int
    # What to tell a reader, one line.
    note: str


class LogRunResult(TypedDict):
    """What `log.run` answers: the run that `tx` falls inside of, when there is one."""
    # The run that began at or before `tx` and wrote transactions after it; `None` when reading as of `tx` sees every run whole.
    partial: PartialRun | None


class FsckParams(TypedDict):
    """`fsck`: verify the store, optionally rebuilding its query tables first."""
    # Rebuild the query tables from the transaction log and the content tables first (not when the log itself is damaged: the response's `rebuilt` says so).
    rebuild: NotRequired[bool]
    # Repair: re-read damaged contents from the files that still hold them (when a file's bytes hash to the recorded hash), then rebuild the query tables (unless the log itself is damaged); what still fails is reported as findings.
    repair: NotRequired[bool]


class FsckFinding(TypedDict):
    """One problem fsck found."""
    # What kind of problem (`blob_hash`, `doc_missing`, `chain`, `versions`, …).
    kind: str
    # What it is about (a hash, an entity, a tx, a table).
    subject: str
    # What is wrong.
    detail: str
    # The command that repairs it.
    repair: str
    # The entity it affects, when known.
    entity: NotRequired[str | None]
    # The path of that entity, when known.
    path: NotRequired[str | None]
    # The transaction (version or log record) it affects, when known.
    tx: NotRequired[int | None]


class FsckResult(TypedDict):
    """What `fsck` answers."""
    # Whether the query tables were rebuilt first (never from a damaged log: its findings then name salvage).
    rebuilt: bool
    # Every problem found (none: the store verifies).
    findings: list[FsckFinding]
    # The chain's head (`None` in an empty store).
    head: ChainHead | None
    # The contents a repair re-read from disk (their hashes, hex), in order.
    restored: NotRequired[list[str]]


class BackupParams(TypedDict):
    """`backup`: copy the store, as one read transaction sees it, into a new store in `dir`, and verify the copy."""
    # The directory of the copy: new, or empty.
    dir: str
    # The directory a relative `dir` is taken from.
    cwd: NotRequired[str | None]


class BackupResult(TypedDict):
    """What `backup` answers."""
    # The copy's directory.
    dir: str
    # The copy's chain head: the store as of this transaction (`None`: empty).
    head: ChainHead | None
    # The size of the copy's store file in bytes.
    bytes: int
    # What fsck found in the copy (none: the copy verifies).
    findings: list[FsckFinding]


class MigrateParams(TypedDict):
    """`migrate`: copy the store into a new store of either backend by replaying its log: every record with its own tx id, time, origin, run, digests and chain value (evicted bodies stay evicted), the documents and contents its puts name, and the settings and mounts. The copy's chain head is the original's."""
    # Where the copy goes: `postgres://user@host:port/db?schema=NAME` (a schema with no store, or an empty one), or a directory for a new redb store (new, or empty).
    to: str
    # The directory relative paths are taken from.
    cwd: NotRequired[str | None]
    # For a PostgreSQL target: the new store directory that points at it, where the copy's settings and mounts live (new, or empty).
    dir: NotRequired[str | None]


class MigrateResult(TypedDict):
    """What `migrate` answers."""
    # Where the copy lives: the PostgreSQL URL (without a password) or the redb store's directory.
    to: str
    # The copy's store directory.
    dir: str
    # The copy's chain head, the original's when the copy began (`None`: empty).
    head: ChainHead | None
    # Log records copied.
    transactions: int
    # Op bodies copied.
    ops: int
    # Evicted op bodies copied as what they are (digests only).
    evicted_ops: int
    # Stat cache entries copied, so that the copy's next index reads no unchanged file (none when the original committed while it was copied).
    stat_entries: int
    # What fsck found in the copy (none: the copy verifies).
    findings: list[FsckFinding]


class GcParams(TypedDict):
    """`gc`: drop contents and documents that no version references."""


class GcResult(TypedDict):
    """What `gc` answers."""
    # Documents no version referenced.
    documents_removed: int
    # Contents no document referenced.
    blobs_removed: int
    # Bytes of records removed.
    bytes_freed: int
    # Reference counts that were wrong and were fixed.
    counts_fixed: int
    # Damaged version rows and documents gc met (none: the store's documents all read): what they may use was kept, and nothing was removed when a row's document is unknown. `strata fsck --repair` repairs them.
    damaged: NotRequired[list[FsckFinding]]
    # Set when zeroing the store file's free pages after gc failed: gc committed, and erased bytes may still be in free pages until `strata gc` runs again; says why.
    scrub_pending: NotRequired[str | None]


class EvictParams(TypedDict):
    """`evict`: erase an entity and its whole history."""
    # A path, an entity id, or an id prefix.
    reference: str
    # Confirms it: eviction erases every version and cannot be undone.
    confirm: NotRequired[bool]
    # The caller's working directory, for a relative path.
    cwd: NotRequired[str | None]


class EvictResult(TypedDict):
    """What `evict` answers."""
    # The evicted entity.
    id: str
    # How many versions were erased.
    versions: int
    # The eviction's transaction.
    tx_id: int
    # Set when zeroing the store file's free pages after the eviction failed: the eviction committed, and its bytes may still be in free pages until `strata gc` finishes that scrub; says why.
    scrub_pending: NotRequired[str | None]


class StatsParams(TypedDict):
    """`stats`: counts and sizes."""


class StatsResult(TypedDict):
    """What `stats` answers."""
    # Entities (live or tombstoned, not evicted).
    entities: int
    # Version rows.
    versions: int
    # Transactions.
    transactions: int
    # Distinct contents.
    blobs: int
    # Distinct documents.
    documents: int
    # Bytes of content and document records stored.
    stored_bytes: int
    # Bytes of content given to puts, before deduplication.
    put_bytes: int
    # Size of the store file on disk.
    file_bytes: int
    # Bytes put per byte stored: deduplication and compression together.
    dedup_ratio: float


class MountLsParams(TypedDict):
    """`mount.ls`: the store's default mounts, given to new sessions."""


class MountMapping(TypedDict):
    """One mount: agent paths under `agent_prefix` are the files under `canonical_prefix` on the filesystem `filesystem_id`. Stored in the store's TOML settings and with each session, so it (de)serialises with serde; the CLI writes it as `AGENT=CANONICAL[:ro][:ci][:fs=ID]` ([`FromStr`], [`fmt::Display`])."""
    # The absolute path prefix the agent sees, e.g. `/workspace`.
    agent_prefix: str
    # The absolute path prefix on the filesystem that holds the files, e.g. `/home/me/project`.
    canonical_prefix: str
    # Whether names below the prefix are compared without case (the identity path is lowercased).
    case_insensitive: NotRequired[bool]
    # The filesystem holding the canonical paths; `None` means this machine's.
    filesystem_id: NotRequired[str | None]
    # Whether writes through this mount are refused.
    read_only: NotRequired[bool]


class MountLsResult(TypedDict):
    """What `mount.ls` answers."""
    # The default mounts, in order.
    mounts: list[MountMapping]


class MountAddParams(TypedDict):
    """`mount.add`: add a default mount."""
    # The mount to add.
    mount: MountMapping


class MountAddResult(TypedDict):
    """What `mount.add` and `mount.rm` answer: the mount added or removed."""
    # The mount.
    mount: MountMapping


class MountRmParams(TypedDict):
    """`mount.rm`: remove the default mount with an agent prefix."""
    # The agent prefix of the mount to remove.
    agent_prefix: str


class MountRmResult(TypedDict):
    """What `mount.add` and `mount.rm` answer: the mount added or removed."""
    # The mount.
    mount: MountMapping


class IndexParams(TypedDict):
    """`index`: record every new, changed and deleted file under the given trees or files. Under a root a daemon's watcher watches (and has reconciled), it is answered from the watcher's state: only the paths seen changing are looked at, and `files` counts those."""
    # The trees or files to index: host paths, relative ones taken from `cwd`.
    paths: list[str]
    # The caller's working directory, for relative paths.
    cwd: NotRequired[str | None]
    # Worker threads that read, hash and compress (default: one per core).
    threads: NotRequired[int | None]


SkipKind = Literal["symlink", "fifo", "socket", "device", "special", "unreadable", "unreadable_dir", "not_utf8", "store", "gone"]
# Why the walk did not index a path: the key of the counts a scan reports by reason.


class Skipped(TypedDict):
    """A file the scan did not index, and why."""
    # The path as found on disk.
    path: str
    # What kind of skip (the key of [`ScanSummary::skipped_by_kind`]).
    kind: SkipKind
    # Why it was skipped, in words.
    reason: str


class ScanThreads(TypedDict):
    """CPU seconds of a scan's threads: the walkers (stat, read, hash, compress), the planner (which compares with the store) and the writer (which commits), to show which stage bounds a scan."""
    # Walker threads that ran.
    workers: int
    # CPU seconds of each walker thread.
    worker_seconds: list[float]
    # CPU seconds of the planning thread (the caller's).
    planner_seconds: float
    # CPU seconds of the writing thread.
    writer_seconds: float


class IndexResult(TypedDict):
    """What a scan did."""
    # Files seen (every regular file under the roots that no ignore rule hid).
    files: int
    # New entities.
    created: int
    # New versions of existing entities.
    updated: int
    # Files found as they were.
    unchanged: int
    # Tombstones written for files that are gone.
    deleted: int
    # Paths not indexed (symlinks, FIFOs, sockets, devices, unreadable files and directories, non-UTF-8 names, other stores' directories).
    skipped: int
    # The skipped paths counted by kind.
    skipped_by_kind: dict[str, Any]
    # Files a deny rule kept out (stored as stubs without content).
    denied: int
    # Bytes read from files.
    bytes_read: int
    # Wall-clock seconds.
    seconds: float
    # The transactions written, in order.
    tx_ids: list[int]
    # The first skipped files (at most 100), with reasons.
    skipped_files: list[Skipped]
    # The paths given to the scan that were not indexed themselves (a FIFO, a device, an unreadable file or directory), with reasons.
    not_indexed: list[Skipped]
    # CPU seconds by thread (each thread's CPU-time clock).
    threads: NotRequired[ScanThreads | None]


class DescriptorSettings(TypedDict):
    """The descriptor settings of a session (seed 004; llmproc's `[file_descriptor]` section without `enabled`: a session has descriptors unless it was made without). In `settings.toml` a field left out takes its default; a request gives all four."""
    # Tool output longer than this many characters becomes a descriptor (default 8000).
    max_direct_output_chars: int
    # The page size of new descriptors, in characters (default 4000).
    default_page_size: int
    # User input longer than this many characters is paged when `page_user_input` (default 8000).
    max_input_chars: int
    # Whether a user turn longer than `max_input_chars` becomes a descriptor (default false: a runtime opts in).
    page_user_input: bool


class SessionNewParams(TypedDict):
    """`session.new`: create a session (its first commit)."""
    # The filesystem id of paths no mount maps (default: this machine's).
    default_filesystem: NotRequired[str | None]
    # Descriptor settings other than the store's (`settings.toml`'s `[file_descriptor]`, by default 8000, 4000, 8000, user input not paged).
    descriptor_settings: NotRequired[DescriptorSettings | None]
    # File descriptors (seed 004) for the session's tools: on unless `false`.
    descriptors: NotRequired[bool | None]
    # The session id (default: a new ULID).
    id: NotRequired[str | None]
    # Mounts added to the store's default mounts.
    mounts: NotRequired[list[MountMapping]]
    # The system prompt.
    system_prompt: NotRequired[str]


class SessionNewResult(TypedDict):
    """The commit a session request wrote: the session and its transaction."""
    # The session id.
    session_id: str
    # The commit's transaction; `None` when nothing changed.
    tx_id: int | None


class SessionLsParams(TypedDict):
    """`session.ls`: every session's id."""


SessionLsResult = list[str]


class SessionShowParams(TypedDict):
    """`session.show`: a session's document, configuration and chat."""
    # The session id.
    id: str
    # Show the commit at or before this transaction.
    as_of_tx: NotRequired[int | None]


CallerSpan = TypedDict(
    "CallerSpan",
    {
        # The caller's name (the MCP client's `clientInfo.name`).
        "caller": str,
        # The first tool call it made in this run.
        "from": str,
    },
)
CallerSpan.__doc__ = """A run of tool calls made by one caller: from tool call `from` on, until the next span."""


class Descriptors(TypedDict):
    """A session's descriptors: settings, the counter (ids are never reused) and the table."""
    # The settings.
    settings: DescriptorSettings
    # The number of the next descriptor (`fd:{next_id}`); starts at 1.
    next_id: int
    # The descriptors by id (`fd:1`, …).
    table: dict[str, Any]


class ForkOrigin(TypedDict):
    """Where a forked session came from."""
    # The parent session id.
    session_id: str
    # The parent's commit the fork starts from.
    tx_id: int


class SessionConfig(TypedDict):
    """The per-session state outside the seed's hashed session fields, stored as the content (JSON) of the `session_config:{sid}` object (type `session_config`) so that resume resolves the same paths and reads the same descriptors."""
    # The format of this JSON (1).
    format: int
    # The mounts, normalised, each with its filesystem id filled in.
    mounts: list[MountMapping]
    # The filesystem of paths no mount maps.
    default_filesystem_id: str
    # Who made the session's tool calls (an MCP client's name), as runs of calls: outside every hash of the tool calls themselves.
    callers: NotRequired[list[CallerSpan]]
    # File descriptors: settings and table; absent when the session has none.
    descriptors: NotRequired[Descriptors | None]
    # The parent, for a fork.
    forked_from: NotRequired[ForkOrigin | None]
    # The unsaved copies a runtime pushed, by agent path (seed 002's Active File List): while one stands, reads return it and the agent's writes are checked against it.
    pushed: NotRequired[dict[str, Any]]


Role = Literal["system", "user", "assistant", "tool"]
# Who speaks a chat turn.


class Turn(TypedDict):
    """One entry of a chat: who spoke, what, and the tool calls made during it."""
    # Who spoke.
    role: Role
    # What was said.
    content: str
    # Ids of the tool calls recorded during this turn, in order; omitted when there are none.
    toolcall_refs: NotRequired[list[str] | None]


class SessionShowResult(TypedDict):
    """What `session.show` answers: the session envelope's fields, with its configuration, turns and commit beside them. (Other keys may be present beside these.)"""
    # Mounts, default filesystem id, fork origin.
    config: SessionConfig
    # The chat's turns.
    turns: list[Turn]
    # The commit shown.
    tx_id: int | None


class SessionReadParams(TypedDict):
    """`session.read`: the agent reads files (indexed, then in the index, pool and active set)."""
    # The session id.
    id: str
    # Absolute paths as the agent sees them.
    paths: list[str]


Action = Literal["created", "updated", "unchanged", "deleted"]
# What indexing did to an entity.


class Touched(TypedDict):
    """What a read or a discovery did."""
    # The file's entity id.
    id: str
    # The path as the agent sees it.
    path: str
    # What indexing did (created, updated, unchanged, deleted).
    action: Action


class SessionReadResult(TypedDict):
    """What `session.read` and `session.discover` answer."""
    # What happened to each file, in the order given.
    touched: list[Touched]
    # The session id.
    session_id: str
    # The commit; `None` when nothing changed.
    tx_id: int | None


class SessionDiscoverParams(TypedDict):
    """`session.discover`: files seen in ls/grep output become stubs in the index and the pool."""
    # The session id.
    id: str
    # Absolute paths as the agent sees them.
    paths: list[str]


class SessionDiscoverResult(TypedDict):
    """What `session.read` and `session.discover` answer."""
    # What happened to each file, in the order given.
    touched: list[Touched]
    # The session id.
    session_id: str
    # The commit; `None` when nothing changed.
    tx_id: int | None


SetOp = Literal["activate", "deactivate", "pin", "unpin"]
# A change to a session's sets.


class SessionSetParams(TypedDict):
    """`session.set`: activate, deactivate, pin or unpin an object."""
    # The session id.
    id: str
    # The object id (a file's id or a tool call id).
    object: str
    # What to do.
    op: SetOp


class SessionSetResult(TypedDict):
    """What `session.set` answers."""
    # The object.
    object: str
    # What was done.
    op: SetOp
    # The session id.
    session_id: str
    # The commit; `None` when nothing changed.
    tx_id: int | None


ToolStatus = Literal["ok", "fail"]
# Whether a tool call succeeded.


class SessionToolcallParams(TypedDict):
    """`session.toolcall`: record a tool call; it joins the latest turn and is activated."""
    # The session id.
    id: str
    # The tool's name.
    tool: str
    # The arguments.
    args: dict[str, Any]
    # ok or fail.
    status: ToolStatus
    # The output (or the error text of a failure).
    output: str
    # A short rendering of the arguments.
    args_display: NotRequired[str | None]
    # The tool call id (default: `toolcall:ULID`).
    call_id: NotRequired[str | None]
    # Ids of the files the call touched.
    file_refs: NotRequired[list[str]]


class SessionToolcallResult(TypedDict):
    """What `session.toolcall` answers."""
    # The tool call's id.
    id: str
    # The session id.
    session_id: str
    # The commit.
    tx_id: int | None


class SessionTurnParams(TypedDict):
    """`session.turn`: append a turn to the chat."""
    # The session id.
    id: str
    # system, user, assistant or tool.
    role: str
    # The turn's text.
    content: str
    # Tool calls made during the turn (recorded, not yet in a turn).
    toolcall_refs: NotRequired[list[str]]


class PagedInput(TypedDict):
    """A user input kept in a descriptor: the turn holds `message`, the model reads the input with `read_fd`."""
    # The descriptor (`fd:N`, source `user_input`).
    fd: str
    # The reference the turn holds and the model is given instead of the input (`<fd:N preview="…" type="user_input" size="…">` and how to read it).
    message: str


class SessionTurnResult(TypedDict):
    """What `session.turn` answers."""
    # The chat's turn count now.
    turn_count: int
    # The session id.
    session_id: str
    # The commit.
    tx_id: int | None
    # When the turn was a user input the session pages (seed 004's `page_user_input`, longer than `max_input_chars`): the descriptor holding it and the message the turn holds instead.
    paged: NotRequired[PagedInput | None]


class SessionRenderParams(TypedDict):
    """`session.render`: the context block."""
    # The session id.
    id: str
    # Render the commit at or before this transaction.
    as_of_tx: NotRequired[int | None]
    # At most this many characters (UTF-16 units) of active content.
    budget: NotRequired[int | None]


class SessionRenderResult(TypedDict):
    """What `session.render` answers."""
    # The session id.
    session_id: str
    # The commit rendered.
    tx_id: int | None
    # The context block.
    text: str


class SessionResumeParams(TypedDict):
    """`session.resume`: reconcile the session's files with disk (one commit)."""
    # The session id.
    id: str


class Reconciled(TypedDict):
    """One file whose version reconciliation changed."""
    # The file's entity id.
    id: str
    # The path as the agent sees it.
    path: str
    # created (reappeared), updated (changed or stub upgraded) or deleted.
    action: Action


class SessionResumeResult(TypedDict):
    """What [`Session::resume`] found and wrote."""
    # Files of the session checked against disk.
    checked: int
    # Files the stat cache vouched for (not read).
    vouched: int
    # Files read and hashed.
    read: int
    # Files on a filesystem strata cannot reach (kept as they were).
    unreachable: int
    # Files that exist but could not be stat'ed or read (kept as they were).
    unreadable: int
    # The changes, in session index order.
    changes: list[Reconciled]
    # The commit that recorded them (`None` when nothing changed).
    tx_id: int | None


class SessionForkParams(TypedDict):
    """`session.fork`: a new session from a commit of this one."""
    # The session to fork.
    id: str
    # Fork the commit at or before this transaction (default: the latest).
    as_of_tx: NotRequired[int | None]
    # The new session's id (default: a new ULID).
    new_id: NotRequired[str | None]


class SessionForkResult(TypedDict):
    """What `session.fork` answers."""
    # The new session's id.
    session_id: str
    # Its first commit.
    tx_id: int | None
    # The parent and the commit it was forked from.
    forked_from: ForkOrigin | None


class SessionHistoryParams(TypedDict):
    """`session.history`: the session's commits."""
    # The session id.
    id: str


class Commit(TypedDict):
    """One commit of a session: a version of its session object."""
    # The transaction.
    tx_id: int
    # Its time.
    tx_time: str
    # The session document's object hash then.
    object_hash: str | None


class SessionHistoryResult(TypedDict):
    """What `session.history` answers."""
    # The session id.
    session_id: str
    # Its commits, oldest first.
    commits: list[Commit]


class AgentCallParams(TypedDict):
    """`agent.call`: run tool `tool` with `args` on session `session`."""
    # The session id.
    session: str
    # The tool (`list_files`, `read_file`, `read_lines`, `get_excerpt`, `search`, `summarize_file`, `get_file_history`, `get_file_diff`, `read_fd`).
    tool: str
    # Its arguments, as its schema in `schema/tools/` describes them.
    args: NotRequired[dict[str, Any]]
    # Who calls (an MCP client's name), kept with the session outside every hash.
    caller: NotRequired[str | None]


class AgentCallResult(TypedDict):
    """What `agent.call` answers."""
    # The session id.
    session_id: str
    # The text: the output, a descriptor's `<fd_result>` in its place, or the error.
    text: str
    # Whether the call failed (MCP's `isError`).
    is_error: bool
    # The id the call was recorded under.
    call_id: str
    # The commit that recorded the call.
    tx_id: int | None


class AgentToolsParams(TypedDict):
    """`agent.tools`: the tools a session offers, as MCP lists them."""
    # The session id.
    session: str


class AgentToolsResult(TypedDict):
    """What `agent.tools` answers."""
    # The session id.
    session_id: str
    # Each tool's `name`, `description` and `inputSchema`, in order.
    tools: list[Any]
    # Instructions for the model when the session has descriptors (the `<file_descriptor_instructions>` its system prompt gets).
    instructions: str | None


class AgentEntrypointsParams(TypedDict):
    """`agent.entrypoints`: the excerpts of the entrypoint files (AGENTS.md, the README, the manifests) in the top directory of each of a session's mounts, for a runtime to put before the model when the session starts (seed 001, "Startup")."""
    # The session id.
    session: str


class Entrypoint(TypedDict):
    """One entrypoint file's excerpt."""
    # The session's id of the file (`f3`).
    fileId: str
    # Its path below its mount.
    filename: str
    # The SHA-256 of the whole file as stored (hex): a valid base for a write.
    sha256: str
    # Its leading lines, credentials redacted.
    excerpt: str
    # How many lines the excerpt holds.
    lines: int
    # How many lines the file has.
    totalLines: int
    # Whether the file goes on after the excerpt.
    truncated: bool
    # How many credentials were redacted (0: none).
    redacted: int


class AgentEntrypointsResult(TypedDict):
    """What `agent.entrypoints` answers."""
    # The session id.
    session_id: str
    # Each entrypoint's id, name, hash and leading lines, in the order they are offered.
    entrypoints: list[Entrypoint]
    # The commit that joined the files read to the session (none when nothing changed).
    tx_id: int | None


class WatchAddParams(TypedDict):
    """`watch.add`: watch these directories (host paths, relative ones taken from `cwd`) from now on, and whenever a daemon serves the store."""
    # The directories to watch.
    paths: list[str]
    # The caller's working directory, for relative paths.
    cwd: NotRequired[str | None]


class WatchAddResult(TypedDict):
    """What the watch requests answer: the watched roots now, and those the request added or removed."""
    # Every watched root (canonical directories), sorted.
    roots: list[str]
    # The roots this request added or removed (empty for `watch.ls`, or when nothing changed).
    changed: list[str]


class WatchRmParams(TypedDict):
    """`watch.rm`: stop watching these roots (host paths, relative ones taken from `cwd`)."""
    # The roots to stop watching, as given to `watch.add` (or any path naming the same directory).
    paths: list[str]
    # The caller's working directory, for relative paths.
    cwd: NotRequired[str | None]


class WatchRmResult(TypedDict):
    """What the watch requests answer: the watched roots now, and those the request added or removed."""
    # Every watched root (canonical directories), sorted.
    roots: list[str]
    # The roots this request added or removed (empty for `watch.ls`, or when nothing changed).
    changed: list[str]


class WatchLsParams(TypedDict):
    """`watch.ls`: the watched roots."""


class WatchLsResult(TypedDict):
    """What the watch requests answer: the watched roots now, and those the request added or removed."""
    # Every watched root (canonical directories), sorted.
    roots: list[str]
    # The roots this request added or removed (empty for `watch.ls`, or when nothing changed).
    changed: list[str]


class AgentApproveParams(TypedDict):
    """`agent.approve`: a person approves the write the agent's call was held for (seed 001's `require_approval`: `delete_file`, `rename_file`), by the token the agent was given. The call runs as the agent made it (so only if the file still has the quoted hash), is recorded and committed as `agent.call`'s. No MCP tool exposes this request: the agent cannot approve itself."""
    # The session id.
    session: str
    # The token of the held call (`approve-…`), valid once, for one hour.
    token: str
    # Who approves, kept with the session outside every hash.
    caller: NotRequired[str | None]


class AgentApproveResult(TypedDict):
    """What `agent.call` answers."""
    # The session id.
    session_id: str
    # The text: the output, a descriptor's `<fd_result>` in its place, or the error.
    text: str
    # Whether the call failed (MCP's `isError`).
    is_error: bool
    # The id the call was recorded under.
    call_id: str
    # The commit that recorded the call.
    tx_id: int | None


class AgentAuditParams(TypedDict):
    """`agent.audit`: the writes agents made (every call of a writing tool), oldest first."""
    # At most this many entries (default all).
    limit: NotRequired[int | None]
    # Only this session's writes.
    session: NotRequired[str | None]
    # Only writes recorded after this transaction.
    since: NotRequired[int | None]


class AuditFile(TypedDict):
    """One file of an audited write."""
    # The path below its mount, as the answer names it.
    filename: str
    # The file's SHA-256 before the write (`None` for a file it created).
    previous_sha256: str | None
    # The file's SHA-256 after it (`None` for a file it deleted).
    sha256: str | None


class AuditEntry(TypedDict):
    """One call of a writing tool, as the audit shows it."""
    # The transaction that recorded the call.
    tx_id: int
    # When (RFC 3339).
    tx_time: str
    # The session that made it.
    session: str
    # The tool call's id.
    call_id: str
    # Who made it (the MCP client's name), when the session knows it.
    caller: str | None
    # The tool.
    tool: str
    # Its arguments.
    args: Any
    # Whether it wrote.
    success: bool
    # Why not (`CONFLICT`, `APPROVAL_REQUIRED`, `VALIDATION_FAILED`, …), when it did not.
    error_code: str | None
    # The files it wrote, with their hashes before and after.
    files: list[AuditFile]


class AgentAuditResult(TypedDict):
    """What `agent.audit` answers."""
    # One entry per call of a writing tool, oldest first.
    entries: list[AuditEntry]


class AgentPushParams(TypedDict):
    """`agent.push`: a runtime pushes its unsaved copy of a file into session `session` (seed 002's client copy precedence). While the copy stands the agent's reads return it, and the agent's writes over it are refused (`overlapping_edits`) unless `caller` is the agent's own caller, whose writes build on it. It goes when the file on disk gets the copy's hash (the user saved it) or with `agent.withdraw`. Give the copy as `text`, or as `base64` for bytes that may not be UTF-8 (they must be: anything else is refused). No MCP tool exposes this request: the agent cannot push."""
    # The session id.
    session: str
    # The file, as the tools name it: an id (`f3`), a path relative to a mount, or an absolute agent path.
    filepath: str
    # The copy's bytes in standard base64 (instead of `text`).
    base64: NotRequired[str | None]
    # Who pushes (a runtime's name), kept with the copy.
    caller: NotRequired[str | None]
    # The copy, as text.
    text: NotRequired[str | None]


class AgentPushResult(TypedDict):
    """What `agent.push` and `agent.withdraw` answer."""
    # The session id.
    session_id: str
    # The file's id in the session (`fN`).
    fileId: str
    # The path below its mount.
    filename: str
    # The agent path.
    path: str
    # The SHA-256 of the copy: what reads return while it stands.
    sha256: str
    # Whether the copy stands now (false when it equals the file on disk, or was withdrawn).
    standing: bool
    # The commit (none when nothing changed).
    tx_id: int | None


class AgentWithdrawParams(TypedDict):
    """`agent.withdraw`: the runtime withdraws its pushed copy of a file (the user discarded the edits): reads and writes see the file on disk again."""
    # The session id.
    session: str
    # The file, as the tools name it.
    filepath: str


class AgentWithdrawResult(TypedDict):
    """What `agent.push` and `agent.withdraw` answer."""
    # The session id.
    session_id: str
    # The file's id in the session (`fN`).
    fileId: str
    # The path below its mount.
    filename: str
    # The agent path.
    path: str
    # The SHA-256 of the copy: what reads return while it stands.
    sha256: str
    # Whether the copy stands now (false when it equals the file on disk, or was withdrawn).
    standing: bool
    # The commit (none when nothing changed).
    tx_id: int | None


# Every engine method: its params type and its result type.
METHODS: dict[str, tuple[Any, Any]] = {
    "ls": (LsParams, LsResult),
    "show": (ShowParams, ShowResult),
    "cat": (CatParams, CatResult),
    "history": (HistoryParams, HistoryResult),
    "diff": (DiffParams, DiffResult),
    "log": (LogParams, LogResult),
    "log.run": (LogRunParams, LogRunResult),
    "fsck": (FsckParams, FsckResult),
    "backup": (BackupParams, BackupResult),
    "migrate": (MigrateParams, MigrateResult),
    "gc": (GcParams, GcResult),
    "evict": (EvictParams, EvictResult),
    "stats": (StatsParams, StatsResult),
    "mount.ls": (MountLsParams, MountLsResult),
    "mount.add": (MountAddParams, MountAddResult),
    "mount.rm": (MountRmParams, MountRmResult),
    "index": (IndexParams, IndexResult),
    "session.new": (SessionNewParams, SessionNewResult),
    "session.ls": (SessionLsParams, SessionLsResult),
    "session.show": (SessionShowParams, SessionShowResult),
    "session.read": (SessionReadParams, SessionReadResult),
    "session.discover": (SessionDiscoverParams, SessionDiscoverResult),
    "session.set": (SessionSetParams, SessionSetResult),
    "session.toolcall": (SessionToolcallParams, SessionToolcallResult),
    "session.turn": (SessionTurnParams, SessionTurnResult),
    "session.render": (SessionRenderParams, SessionRenderResult),
    "session.resume": (SessionResumeParams, SessionResumeResult),
    "session.fork": (SessionForkParams, SessionForkResult),
    "session.history": (SessionHistoryParams, SessionHistoryResult),
    "agent.call": (AgentCallParams, AgentCallResult),
    "agent.tools": (AgentToolsParams, AgentToolsResult),
    "agent.entrypoints": (AgentEntrypointsParams, AgentEntrypointsResult),
    "watch.add": (WatchAddParams, WatchAddResult),
    "watch.rm": (WatchRmParams, WatchRmResult),
    "watch.ls": (WatchLsParams, WatchLsResult),
    "agent.approve": (AgentApproveParams, AgentApproveResult),
    "agent.audit": (AgentAuditParams, AgentAuditResult),
    "agent.push": (AgentPushParams, AgentPushResult),
    "agent.withdraw": (AgentWithdrawParams, AgentWithdrawResult),
}


class _EngineMethods:
    """The engine's methods, one typed wrapper each (schema/rpc/index.json)."""

    def _request(self, method: str, params: dict[str, Any], optional: dict[str, Any]) -> Any:
        raise NotImplementedError

    def ls(
        self,
        *,
        all: bool = False,
        as_of: AsOf | None = None,
        cwd: str | None = None,
        prefix: str | None = None,
    ) -> LsResult:
        """`ls`: the files the store knows under a path, as of a time.

        all: Include deleted files.
        as_of: Which version to list.
        cwd: The caller's working directory, for a relative prefix. Default: this process's working directory.
        prefix: Only paths under this prefix (a host path; relative ones are taken from `cwd`).
        Returns schema/rpc/ls.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "ls",
            {},
            {
                "all": all,
                "as_of": as_of,
                "cwd": cwd if cwd is not None else os.getcwd(),
                "prefix": prefix,
            },
        )
        return cast(LsResult, result)

    def show(
        self,
        reference: str,
        *,
        as_of: AsOf | None = None,
        cwd: str | None = None,
    ) -> ShowResult:
        """`show`: one object's envelope and version.

        reference: A path, an entity id, or an id prefix of at least 8 hex characters (`id:PREFIX` forces ids).
        as_of: Which version to show.
        cwd: The caller's working directory, for a relative path. Default: this process's working directory.
        Returns schema/rpc/show.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "show",
            {
                "reference": reference,
            },
            {
                "as_of": as_of,
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(ShowResult, result)

    def cat(
        self,
        reference: str,
        *,
        as_of: AsOf | None = None,
        cwd: str | None = None,
    ) -> CatResult:
        """`cat`: one object's content, raw.

        reference: A path, an entity id, or an id prefix.
        as_of: Which version to read.
        cwd: The caller's working directory, for a relative path. Default: this process's working directory.
        Returns schema/rpc/cat.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "cat",
            {
                "reference": reference,
            },
            {
                "as_of": as_of,
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(CatResult, result)

    def history(
        self,
        reference: str,
        *,
        as_of: AsOf | None = None,
        by_tx: bool = False,
        corrections: bool = False,
        cwd: str | None = None,
    ) -> HistoryResult:
        """`history`: one object's versions.

        reference: A path, an entity id, or an id prefix.
        as_of: As the store knew it then (`valid_at` does not apply: every valid time is listed).
        by_tx: Order by transaction instead of valid time.
        corrections: Include corrections (versions later superseded at the same valid time).
        cwd: The caller's working directory, for a relative path. Default: this process's working directory.
        Returns schema/rpc/history.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "history",
            {
                "reference": reference,
            },
            {
                "as_of": as_of,
                "by_tx": by_tx,
                "corrections": corrections,
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(HistoryResult, result)

    def diff(
        self,
        reference: str,
        *,
        cwd: str | None = None,
        from_: int | None = None,
        to: int | None = None,
    ) -> DiffResult:
        """`diff`: a unified diff between two versions of an object.

        reference: A path, an entity id, or an id prefix.
        cwd: The caller's working directory, for a relative path. Default: this process's working directory.
        from_: The older version, as a transaction id (default: the version before `to`).
        to: The newer version, as a transaction id (default: the current one).
        Returns schema/rpc/diff.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "diff",
            {
                "reference": reference,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
                "from": from_,
                "to": to,
            },
        )
        return cast(DiffResult, result)

    def log(self, *, limit: int | None = None, since: int | None = None) -> LogResult:
        """`log`: the transaction log.

        limit: At most this many transactions: the newest, or the first after `since`.
        since: Only transactions after this one.
        Returns schema/rpc/log.result.json (optional params left at None are not sent).
        """
        return cast(LogResult, self._request("log", {}, {"limit": limit, "since": since}))

    def log_run(self, tx: int) -> LogRunResult:
        """`log.run`: the index run that reading as of transaction `tx` would see only part of.

        tx: The transaction a read is made as of (`--as-of-tx`).
        Returns schema/rpc/log.run.result.json (optional params left at None are not sent).
        """
        return cast(LogRunResult, self._request("log.run", {"tx": tx}, {}))

    def fsck(self, *, rebuild: bool = False, repair: bool = False) -> FsckResult:
        """`fsck`: verify the store, optionally rebuilding its query tables first.

        rebuild: Rebuild the query tables from the transaction log and the content tables first (not when the log itself is damaged: the response's `rebuilt` says so).
        repair: Repair: re-read damaged contents from the files that still hold them (when a file's bytes hash to the recorded hash), then rebuild the query tables (unless the log itself is damaged); what still fails is reported as findings.
        Returns schema/rpc/fsck.result.json (optional params left at None are not sent).
        """
        return cast(FsckResult, self._request("fsck", {}, {"rebuild": rebuild, "repair": repair}))

    def backup(self, dir: str, *, cwd: str | None = None) -> BackupResult:
        """`backup`: copy the store, as one read transaction sees it, into a new store in `dir`, and verify the copy.

        dir: The directory of the copy: new, or empty.
        cwd: The directory a relative `dir` is taken from. Default: this process's working directory.
        Returns schema/rpc/backup.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "backup",
            {
                "dir": dir,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(BackupResult, result)

    def migrate(self, to: str, *, cwd: str | None = None, dir: str | None = None) -> MigrateResult:
        """`migrate`: copy the store into a new store of either backend by replaying its log: every record with its own tx id, time, origin, run, digests and chain value (evicted bodies stay evicted), the documents and contents its puts name, and the settings and mounts. The copy's chain head is the original's.

        to: Where the copy goes: `postgres://user@host:port/db?schema=NAME` (a schema with no store, or an empty one), or a directory for a new redb store (new, or empty).
        cwd: The directory relative paths are taken from. Default: this process's working directory.
        dir: For a PostgreSQL target: the new store directory that points at it, where the copy's settings and mounts live (new, or empty).
        Returns schema/rpc/migrate.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "migrate",
            {
                "to": to,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
                "dir": dir,
            },
        )
        return cast(MigrateResult, result)

    def gc(self) -> GcResult:
        """`gc`: drop contents and documents that no version references.

        Returns schema/rpc/gc.result.json (optional params left at None are not sent).
        """
        return cast(GcResult, self._request("gc", {}, {}))

    def evict(
        self,
        reference: str,
        *,
        confirm: bool = False,
        cwd: str | None = None,
    ) -> EvictResult:
        """`evict`: erase an entity and its whole history.

        reference: A path, an entity id, or an id prefix.
        confirm: Confirms it: eviction erases every version and cannot be undone.
        cwd: The caller's working directory, for a relative path. Default: this process's working directory.
        Returns schema/rpc/evict.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "evict",
            {
                "reference": reference,
            },
            {
                "confirm": confirm,
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(EvictResult, result)

    def stats(self) -> StatsResult:
        """`stats`: counts and sizes.

        Returns schema/rpc/stats.result.json (optional params left at None are not sent).
        """
        return cast(StatsResult, self._request("stats", {}, {}))

    def mount_ls(self) -> MountLsResult:
        """`mount.ls`: the store's default mounts, given to new sessions.

        Returns schema/rpc/mount.ls.result.json (optional params left at None are not sent).
        """
        return cast(MountLsResult, self._request("mount.ls", {}, {}))

    def mount_add(self, mount: MountMapping) -> MountAddResult:
        """`mount.add`: add a default mount.

        mount: The mount to add.
        Returns schema/rpc/mount.add.result.json (optional params left at None are not sent).
        """
        return cast(MountAddResult, self._request("mount.add", {"mount": mount}, {}))

    def mount_rm(self, agent_prefix: str) -> MountRmResult:
        """`mount.rm`: remove the default mount with an agent prefix.

        agent_prefix: The agent prefix of the mount to remove.
        Returns schema/rpc/mount.rm.result.json (optional params left at None are not sent).
        """
        return cast(MountRmResult, self._request("mount.rm", {"agent_prefix": agent_prefix}, {}))

    def index(
        self,
        paths: list[str],
        *,
        cwd: str | None = None,
        threads: int | None = None,
    ) -> IndexResult:
        """`index`: record every new, changed and deleted file under the given trees or files. Under a root a daemon's watcher watches (and has reconciled), it is answered from the watcher's state: only the paths seen changing are looked at, and `files` counts those.

        paths: The trees or files to index: host paths, relative ones taken from `cwd`.
        cwd: The caller's working directory, for relative paths. Default: this process's working directory.
        threads: Worker threads that read, hash and compress (default: one per core).
        Returns schema/rpc/index.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "index",
            {
                "paths": paths,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
                "threads": threads,
            },
        )
        return cast(IndexResult, result)

    def session_new(
        self,
        *,
        default_filesystem: str | None = None,
        descriptor_settings: DescriptorSettings | None = None,
        descriptors: bool | None = None,
        id: str | None = None,
        mounts: list[MountMapping] | None = None,
        system_prompt: str = '',
    ) -> SessionNewResult:
        """`session.new`: create a session (its first commit).

        default_filesystem: The filesystem id of paths no mount maps (default: this machine's).
        descriptor_settings: Descriptor settings other than the store's (`settings.toml`'s `[file_descriptor]`, by default 8000, 4000, 8000, user input not paged).
        descriptors: File descriptors (seed 004) for the session's tools: on unless `false`.
        id: The session id (default: a new ULID).
        mounts: Mounts added to the store's default mounts.
        system_prompt: The system prompt.
        Returns schema/rpc/session.new.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.new",
            {},
            {
                "default_filesystem": default_filesystem,
                "descriptor_settings": descriptor_settings,
                "descriptors": descriptors,
                "id": id,
                "mounts": mounts,
                "system_prompt": system_prompt,
            },
        )
        return cast(SessionNewResult, result)

    def session_ls(self) -> SessionLsResult:
        """`session.ls`: every session's id.

        Returns schema/rpc/session.ls.result.json (optional params left at None are not sent).
        """
        return cast(SessionLsResult, self._request("session.ls", {}, {}))

    def session_show(self, id: str, *, as_of_tx: int | None = None) -> SessionShowResult:
        """`session.show`: a session's document, configuration and chat.

        id: The session id.
        as_of_tx: Show the commit at or before this transaction.
        Returns schema/rpc/session.show.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.show",
            {
                "id": id,
            },
            {
                "as_of_tx": as_of_tx,
            },
        )
        return cast(SessionShowResult, result)

    def session_read(self, id: str, paths: list[str]) -> SessionReadResult:
        """`session.read`: the agent reads files (indexed, then in the index, pool and active set).

        id: The session id.
        paths: Absolute paths as the agent sees them.
        Returns schema/rpc/session.read.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.read",
            {
                "id": id,
                "paths": paths,
            },
            {},
        )
        return cast(SessionReadResult, result)

    def session_discover(self, id: str, paths: list[str]) -> SessionDiscoverResult:
        """`session.discover`: files seen in ls/grep output become stubs in the index and the pool.

        id: The session id.
        paths: Absolute paths as the agent sees them.
        Returns schema/rpc/session.discover.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.discover",
            {
                "id": id,
                "paths": paths,
            },
            {},
        )
        return cast(SessionDiscoverResult, result)

    def session_set(self, id: str, object: str, op: SetOp) -> SessionSetResult:
        """`session.set`: activate, deactivate, pin or unpin an object.

        id: The session id.
        object: The object id (a file's id or a tool call id).
        op: What to do.
        Returns schema/rpc/session.set.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.set",
            {
                "id": id,
                "object": object,
                "op": op,
            },
            {},
        )
        return cast(SessionSetResult, result)

    def session_toolcall(
        self,
        id: str,
        tool: str,
        args: dict[str, Any],
        status: ToolStatus,
        output: str,
        *,
        args_display: str | None = None,
        call_id: str | None = None,
        file_refs: list[str] | None = None,
    ) -> SessionToolcallResult:
        """`session.toolcall`: record a tool call; it joins the latest turn and is activated.

        id: The session id.
        tool: The tool's name.
        args: The arguments.
        status: ok or fail.
        output: The output (or the error text of a failure).
        args_display: A short rendering of the arguments.
        call_id: The tool call id (default: `toolcall:ULID`).
        file_refs: Ids of the files the call touched.
        Returns schema/rpc/session.toolcall.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.toolcall",
            {
                "id": id,
                "tool": tool,
                "args": args,
                "status": status,
                "output": output,
            },
            {
                "args_display": args_display,
                "call_id": call_id,
                "file_refs": file_refs,
            },
        )
        return cast(SessionToolcallResult, result)

    def session_turn(
        self,
        id: str,
        role: str,
        content: str,
        *,
        toolcall_refs: list[str] | None = None,
    ) -> SessionTurnResult:
        """`session.turn`: append a turn to the chat.

        id: The session id.
        role: system, user, assistant or tool.
        content: The turn's text.
        toolcall_refs: Tool calls made during the turn (recorded, not yet in a turn).
        Returns schema/rpc/session.turn.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.turn",
            {
                "id": id,
                "role": role,
                "content": content,
            },
            {
                "toolcall_refs": toolcall_refs,
            },
        )
        return cast(SessionTurnResult, result)

    def session_render(
        self,
        id: str,
        *,
        as_of_tx: int | None = None,
        budget: int | None = None,
    ) -> SessionRenderResult:
        """`session.render`: the context block.

        id: The session id.
        as_of_tx: Render the commit at or before this transaction.
        budget: At most this many characters (UTF-16 units) of active content.
        Returns schema/rpc/session.render.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.render",
            {
                "id": id,
            },
            {
                "as_of_tx": as_of_tx,
                "budget": budget,
            },
        )
        return cast(SessionRenderResult, result)

    def session_resume(self, id: str) -> SessionResumeResult:
        """`session.resume`: reconcile the session's files with disk (one commit).

        id: The session id.
        Returns schema/rpc/session.resume.result.json (optional params left at None are not sent).
        """
        return cast(SessionResumeResult, self._request("session.resume", {"id": id}, {}))

    def session_fork(
        self,
        id: str,
        *,
        as_of_tx: int | None = None,
        new_id: str | None = None,
    ) -> SessionForkResult:
        """`session.fork`: a new session from a commit of this one.

        id: The session to fork.
        as_of_tx: Fork the commit at or before this transaction (default: the latest).
        new_id: The new session's id (default: a new ULID).
        Returns schema/rpc/session.fork.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "session.fork",
            {
                "id": id,
            },
            {
                "as_of_tx": as_of_tx,
                "new_id": new_id,
            },
        )
        return cast(SessionForkResult, result)

    def session_history(self, id: str) -> SessionHistoryResult:
        """`session.history`: the session's commits.

        id: The session id.
        Returns schema/rpc/session.history.result.json (optional params left at None are not sent).
        """
        return cast(SessionHistoryResult, self._request("session.history", {"id": id}, {}))

    def agent_call(
        self,
        session: str,
        tool: str,
        *,
        args: dict[str, Any] | None = None,
        caller: str | None = None,
    ) -> AgentCallResult:
        """`agent.call`: run tool `tool` with `args` on session `session`.

        session: The session id.
        tool: The tool (`list_files`, `read_file`, `read_lines`, `get_excerpt`, `search`, `summarize_file`, `get_file_history`, `get_file_diff`, `read_fd`).
        args: Its arguments, as its schema in `schema/tools/` describes them.
        caller: Who calls (an MCP client's name), kept with the session outside every hash.
        Returns schema/rpc/agent.call.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.call",
            {
                "session": session,
                "tool": tool,
            },
            {
                "args": args,
                "caller": caller,
            },
        )
        return cast(AgentCallResult, result)

    def agent_tools(self, session: str) -> AgentToolsResult:
        """`agent.tools`: the tools a session offers, as MCP lists them.

        session: The session id.
        Returns schema/rpc/agent.tools.result.json (optional params left at None are not sent).
        """
        return cast(AgentToolsResult, self._request("agent.tools", {"session": session}, {}))

    def agent_entrypoints(self, session: str) -> AgentEntrypointsResult:
        """`agent.entrypoints`: the excerpts of the entrypoint files (AGENTS.md, the README, the manifests) in the top directory of each of a session's mounts, for a runtime to put before the model when the session starts (seed 001, "Startup").

        session: The session id.
        Returns schema/rpc/agent.entrypoints.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.entrypoints",
            {
                "session": session,
            },
            {},
        )
        return cast(AgentEntrypointsResult, result)

    def watch_add(self, paths: list[str], *, cwd: str | None = None) -> WatchAddResult:
        """`watch.add`: watch these directories (host paths, relative ones taken from `cwd`) from now on, and whenever a daemon serves the store.

        paths: The directories to watch.
        cwd: The caller's working directory, for relative paths. Default: this process's working directory.
        Returns schema/rpc/watch.add.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "watch.add",
            {
                "paths": paths,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(WatchAddResult, result)

    def watch_rm(self, paths: list[str], *, cwd: str | None = None) -> WatchRmResult:
        """`watch.rm`: stop watching these roots (host paths, relative ones taken from `cwd`).

        paths: The roots to stop watching, as given to `watch.add` (or any path naming the same directory).
        cwd: The caller's working directory, for relative paths. Default: this process's working directory.
        Returns schema/rpc/watch.rm.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "watch.rm",
            {
                "paths": paths,
            },
            {
                "cwd": cwd if cwd is not None else os.getcwd(),
            },
        )
        return cast(WatchRmResult, result)

    def watch_ls(self) -> WatchLsResult:
        """`watch.ls`: the watched roots.

        Returns schema/rpc/watch.ls.result.json (optional params left at None are not sent).
        """
        return cast(WatchLsResult, self._request("watch.ls", {}, {}))

    def agent_approve(
        self,
        session: str,
        token: str,
        *,
        caller: str | None = None,
    ) -> AgentApproveResult:
        """`agent.approve`: a person approves the write the agent's call was held for (seed 001's `require_approval`: `delete_file`, `rename_file`), by the token the agent was given. The call runs as the agent made it (so only if the file still has the quoted hash), is recorded and committed as `agent.call`'s. No MCP tool exposes this request: the agent cannot approve itself.

        session: The session id.
        token: The token of the held call (`approve-…`), valid once, for one hour.
        caller: Who approves, kept with the session outside every hash.
        Returns schema/rpc/agent.approve.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.approve",
            {
                "session": session,
                "token": token,
            },
            {
                "caller": caller,
            },
        )
        return cast(AgentApproveResult, result)

    def agent_audit(
        self,
        *,
        limit: int | None = None,
        session: str | None = None,
        since: int | None = None,
    ) -> AgentAuditResult:
        """`agent.audit`: the writes agents made (every call of a writing tool), oldest first.

        limit: At most this many entries (default all).
        session: Only this session's writes.
        since: Only writes recorded after this transaction.
        Returns schema/rpc/agent.audit.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.audit",
            {},
            {
                "limit": limit,
                "session": session,
                "since": since,
            },
        )
        return cast(AgentAuditResult, result)

    def agent_push(
        self,
        session: str,
        filepath: str,
        *,
        base64: str | None = None,
        caller: str | None = None,
        text: str | None = None,
    ) -> AgentPushResult:
        """`agent.push`: a runtime pushes its unsaved copy of a file into session `session` (seed 002's client copy precedence). While the copy stands the agent's reads return it, and the agent's writes over it are refused (`overlapping_edits`) unless `caller` is the agent's own caller, whose writes build on it. It goes when the file on disk gets the copy's hash (the user saved it) or with `agent.withdraw`. Give the copy as `text`, or as `base64` for bytes that may not be UTF-8 (they must be: anything else is refused). No MCP tool exposes this request: the agent cannot push.

        session: The session id.
        filepath: The file, as the tools name it: an id (`f3`), a path relative to a mount, or an absolute agent path.
        base64: The copy's bytes in standard base64 (instead of `text`).
        caller: Who pushes (a runtime's name), kept with the copy.
        text: The copy, as text.
        Returns schema/rpc/agent.push.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.push",
            {
                "session": session,
                "filepath": filepath,
            },
            {
                "base64": base64,
                "caller": caller,
                "text": text,
            },
        )
        return cast(AgentPushResult, result)

    def agent_withdraw(self, session: str, filepath: str) -> AgentWithdrawResult:
        """`agent.withdraw`: the runtime withdraws its pushed copy of a file (the user discarded the edits): reads and writes see the file on disk again.

        session: The session id.
        filepath: The file, as the tools name it.
        Returns schema/rpc/agent.withdraw.result.json (optional params left at None are not sent).
        """
        result = self._request(
            "agent.withdraw",
            {
                "session": session,
                "filepath": filepath,
            },
            {},
        )
        return cast(AgentWithdrawResult, result)


# --- END GENERATED ---


# --- the client ----------------------------------------------------------------------------------


def tool_parts(text: str) -> tuple[dict[str, Any] | None, str]:
    """Splits the text of an `agent.call` answer: the tools that give file content (read_file,
    read_lines, get_excerpt, summarize_file, get_file_diff) answer with one line of JSON (fileId,
    filename, sha256…) and then the text as it is; the others with JSON alone (header None and
    the JSON text as body); a descriptor's `<fd_result>` or `read_fd`'s XML also come as body."""
    head, sep, body = text.partition("\n")
    if head.startswith("{") and head.endswith("}"):
        try:
            parsed = json.loads(head)
        except ValueError:
            return None, text
        if isinstance(parsed, dict) and "fileId" in parsed and sep:
            return parsed, body
    return None, text


def find_store(store_dir: str | os.PathLike[str] | None = None) -> str:
    """The store directory, absolute: `store_dir` if given, else `$STRATA_STORE`, else the
    nearest `.strata/` in the working directory or above (as the CLI finds it)."""
    if store_dir is not None:
        return os.path.abspath(os.fspath(store_dir))
    env = os.environ.get("STRATA_STORE")
    if env:
        return os.path.abspath(env)
    here = os.getcwd()
    while True:
        candidate = os.path.join(here, ".strata")
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            raise NotFound(
                "not_found",
                None,
                f"no strata store in {os.getcwd()} or above; pass store_dir or run `strata init`",
            )
        here = parent


class _Pending:
    __slots__ = ("event", "result", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Any = None
        self.error: StrataError | None = None


class Client(_EngineMethods):
    """A connection to a store's daemon. Make one with `Client.connect(store_dir)`.

    Thread-safe: any thread may call; the calls share the connection and run concurrently in
    the daemon. Close it with `close()` or a `with` block.
    """

    #: The protocol version sent in the handshake.
    PROTOCOL = PROTOCOL_VERSION

    def __init__(self, sock: socket.socket, *, store_dir: str, timeout: float | None = None) -> None:
        """Wraps a socket connected to the daemon of the store in `store_dir` and handshakes
        (`connect` is the usual way in). `timeout`: the default seconds to wait for each answer
        (None: as long as it takes; an `index` of a large tree can take long)."""
        self.store_dir = store_dir
        self.socket_path = os.path.join(store_dir, SOCKET_FILE)
        self.timeout = timeout
        self._sock = sock
        self._rfile = sock.makefile("rb")
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._failure: StrataError | None = None
        self._refusal: StrataError | None = None
        self._closed = False
        self._subscribed = False
        self._notes: queue.SimpleQueue[Notification | StrataError] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_loop, name="strata-client-reader", daemon=True)
        self._reader.start()
        try:
            #: The daemon's handshake answer: its protocol, program and version, pid.
            self.server: Handshake = self.handshake()
        except BaseException:
            self.close()
            raise

    # --- connecting ------------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        store_dir: str | os.PathLike[str] | None = None,
        *,
        start: bool = True,
        strata: str = "strata",
        idle_timeout: int | None = DEFAULT_IDLE_TIMEOUT,
        timeout: float | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> "Client":
        """Connects to the daemon of the store in `store_dir` (see `find_store`) and checks its
        protocol version. When none answers and `start` is true, starts one, as the CLI does:
        `STRATA --store DIR serve --idle-timeout IDLE`, detached, logging to DIR/daemon.log, and
        waits up to `start_timeout` seconds for it to answer.

        Raises NoDaemon (none answers and start is false), DaemonStartError (with the daemon's
        own message, e.g. that DIR holds no store), ProtocolVersionError.
        """
        store = find_store(store_dir)
        path = os.path.join(store, SOCKET_FILE)
        # A daemon that has just died can still accept for a moment (its last threads hold the
        # socket while they exit) and then drops the connection: that is no daemon, so look
        # again a few times before giving up.
        for attempt in range(5):
            sock = _connect_socket(path)
            if sock is None:
                if not start:
                    raise NoDaemon(
                        "no_daemon",
                        None,
                        f"no strata daemon serves {store} (no answer on {path}); start one "
                        f"with `strata --store {store} serve`, or connect with start=True",
                    )
                sock = _start_daemon(store, strata, idle_timeout, start_timeout)
            try:
                return cls(sock, store_dir=store, timeout=timeout)
            except ConnectionLost:
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def handshake(self, *, protocol: str | None = None, client: str | None = None) -> Handshake:
        """Exchanges versions with the daemon (`connect` does it). Raises ProtocolVersionError
        when the daemon speaks another major version than `protocol` (default: this client's)."""
        mine = protocol or self.PROTOCOL
        name = client or f"strata_client.py {__version__} (python {sys.version.split()[0]})"
        wait = self.timeout if self.timeout is not None else HANDSHAKE_TIMEOUT
        answer: Handshake = self._call("handshake", {"protocol": mine, "client": name}, wait)
        theirs = str(answer.get("protocol", ""))
        if theirs.split(".")[0] != mine.split(".")[0]:
            raise ProtocolVersionError(
                "protocol_version",
                None,
                f"the daemon for {self.store_dir} ({answer.get('server')}, pid {answer.get('pid')}) "
                f"speaks protocol {theirs}, this client {mine}; use a strata_client.py of major "
                f"version {theirs.split('.')[0]}",
            )
        return answer

    # --- calling ----------------------------------------------------------------------------

    def call(self, method: str, params: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Calls any method: `call("session.turn", {"id": sid, ...})` or
        `call("session.turn", id=sid, ...)`. Returns the result; raises the daemon's error as a
        StrataError. No defaults are filled in (the typed wrappers send `cwd`; this does not)."""
        merged = dict(params or {})
        merged.update(kwargs)
        return self._call(method, merged, self.timeout)

    def call_with_timeout(self, method: str, params: Mapping[str, Any] | None, timeout: float | None) -> Any:
        """As `call`, waiting at most `timeout` seconds for the answer (CallTimeout after)."""
        return self._call(method, dict(params or {}), timeout)

    def _request(self, method: str, params: dict[str, Any], optional: dict[str, Any]) -> Any:
        """The typed wrappers' way in: `optional` params left at None are not sent."""
        merged = dict(params)
        merged.update({k: v for k, v in optional.items() if v is not None})
        return self._call(method, merged, self.timeout)

    def _call(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        with self._lock:
            if self._failure is not None:
                raise self._failure._clone()
            call_id = self._next_id
            self._next_id += 1
        try:
            line = json.dumps(
                {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise InvalidParams("invalid_params", -32602, f"the params of {method} are not JSON: {e}") from None
        if len(line) >= MAX_MESSAGE_BYTES:
            raise ProtocolError(
                "invalid_request",
                -32600,
                f"the request {method} is {len(line)} bytes, over the daemon's limit of "
                f"{MAX_MESSAGE_BYTES} bytes; send smaller messages",
            )
        pending = _Pending()
        with self._lock:
            if self._failure is not None:
                raise self._failure._clone()
            self._pending[call_id] = pending
        try:
            with self._write_lock:
                self._sock.sendall(line + b"\n")
        except OSError as e:
            with self._lock:
                self._pending.pop(call_id, None)
            self._fail(self._lost(f"sending {method} failed ({e.strerror or e})"))
            raise (self._failure or self._lost(str(e)))._clone() from None
        if not pending.event.wait(timeout):
            with self._lock:
                self._pending.pop(call_id, None)
            if not pending.event.is_set():
                raise CallTimeout(
                    "timeout",
                    None,
                    f"no answer to {method} from the daemon for {self.store_dir} within {timeout} s "
                    "(the request may still be applied)",
                )
        if pending.error is not None:
            raise pending.error
        return pending.result

    # --- the daemon's own methods -------------------------------------------------------------

    def status(self) -> Status:
        """The daemon's state: pid, uptime, clients, requests, last tx, queued writes."""
        return cast(Status, self.call("status"))

    def stop(self, *, wait: bool = True, timeout: float = 10.0) -> None:
        """Asks the daemon to stop (it finishes what is in flight, removes its socket and
        exits). With `wait`, returns once its process is gone; raises CallTimeout if it is
        still there after `timeout` seconds. The connection is lost either way."""
        pid = self.server["pid"]
        try:
            self.call("stop")
        except ConnectionLost:
            # The daemon may close the connection before its answer to `stop` is written; it
            # is stopping all the same (the wait below tells).
            pass
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() >= deadline:
                raise CallTimeout(
                    "timeout",
                    None,
                    f"the daemon for {self.store_dir} (pid {pid}) acknowledged stop but is still "
                    f"running after {timeout} s; see {os.path.join(self.store_dir, LOG_FILE)}",
                )
            time.sleep(0.01)

    def subscribe(
        self, paths: list[str] | None = None, sessions: list[str] | None = None
    ) -> dict[str, Any]:
        """From now on, every commit to the store reaches this client as a `commit`
        notification; read them with `commits()` or `notifications()`. With `paths` (canonical
        path prefixes) or `sessions` (session ids), each file change under those prefixes or
        held by those sessions comes as a `change` notification instead (`changes()`). Once per
        client (a second call sends nothing: the daemon would send every notification twice)."""
        with self._lock:
            if self._subscribed:
                return {"subscribed": True}
            self._subscribed = True
        params: dict[str, Any] = {}
        if paths:
            params["paths"] = list(paths)
        if sessions:
            params["sessions"] = list(sessions)
        try:
            return cast(dict[str, Any], self.call("subscribe", params))
        except BaseException:
            with self._lock:
                self._subscribed = False
            raise

    def next_notification(self, timeout: float | None = None) -> Notification | None:
        """The next notification, waiting up to `timeout` seconds (None: forever); None when
        none came in time. Raises ConnectionLost when the connection is gone."""
        try:
            item = self._notes.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, StrataError):
            self._notes.put(item)  # every later read fails the same way
            raise item._clone()
        return item

    def notifications(self, timeout: float | None = None) -> Iterator[Notification]:
        """Yields notifications as they come; ends when none comes for `timeout` seconds (None:
        never). Raises ConnectionLost when the connection is gone."""
        while True:
            note = self.next_notification(timeout)
            if note is None:
                return
            yield note

    def commits(self, timeout: float | None = None) -> Iterator[CommitEvent]:
        """The `commit` notifications' params (see `notifications`), after `subscribe()`."""
        for note in self.notifications(timeout):
            if note.method == "commit":
                yield note.params

    def changes(self, timeout: float | None = None) -> Iterator[FileChange]:
        """The `change` notifications' params (see `notifications`), after `subscribe(paths=…)`."""
        for note in self.notifications(timeout):
            if note.method == "change":
                yield note.params

    # --- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection (the daemon keeps running). Calls in flight raise ConnectionLost."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
        self._rfile.close()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """Whether the connection is still up (a lost one never comes back: connect again)."""
        return self._failure is None

    # --- the reader thread -------------------------------------------------------------------

    def _lost(self, why: str) -> ConnectionLost:
        if self._closed:
            return ConnectionLost("connection_lost", None, "this Client was closed")
        log = os.path.join(self.store_dir, LOG_FILE)
        return ConnectionLost(
            "connection_lost",
            None,
            f"connection lost: {why} (the daemon for {self.store_dir} stopped or crashed; see "
            f"{log}); Client.connect() again starts a new one; a call that was in flight may or "
            "may not have been applied",
        )

    def _read_loop(self) -> None:
        why = "the daemon closed the connection"
        try:
            while True:
                raw = self._rfile.readline()
                if not raw:
                    break
                if not raw.endswith(b"\n"):
                    why = "the daemon closed the connection in the middle of a message"
                    break
                try:
                    message = json.loads(raw)
                except ValueError as e:
                    self._fail(
                        ProtocolError(
                            "parse_error",
                            None,
                            f"the daemon for {self.store_dir} sent a line that is not JSON ({e}): "
                            f"{raw[:200]!r}",
                        )
                    )
                    return
                self._dispatch(message)
        except (OSError, ValueError) as e:
            why = f"reading from the daemon failed ({e})"
        self._fail(self._refusal or self._lost(why))

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" in message and "id" not in message:
            if self._subscribed:
                self._notes.put(Notification(str(message["method"]), message.get("params")))
            return
        call_id = message.get("id")
        if call_id is None:
            # An error for no request of ours: the daemon refused the connection (another
            # user) and closes it next. Later calls raise it.
            if "error" in message:
                self._refusal = error_from_response(message["error"])
            return
        with self._lock:
            pending = self._pending.pop(call_id, None) if isinstance(call_id, int) else None
        if pending is None:
            return  # a call that timed out
        if "error" in message:
            pending.error = error_from_response(message["error"])
        else:
            pending.result = message.get("result")
        pending.event.set()

    def _fail(self, error: StrataError) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = error
            failure = self._failure
            pending = list(self._pending.values())
            self._pending.clear()
        for p in pending:
            p.error = failure._clone()
            p.event.set()
        self._notes.put(failure)


def _connect_socket(path: str) -> socket.socket | None:
    """A connection to the socket at `path`; None when nothing answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as e:
        sock.close()
        raise StorageError("io", None, f"connecting to {path}: {e.strerror or e}") from None
    return sock


def _start_daemon(store: str, strata: str, idle_timeout: int | None, start_timeout: float) -> socket.socket:
    """Starts `strata serve` for `store` (detached, logging to daemon.log) and connects to it."""
    path = os.path.join(store, SOCKET_FILE)
    if not os.path.isdir(store):
        raise NotFound(
            "not_found",
            None,
            f"{store} holds no strata store; run `strata init --store {store}` to create one",
        )
    program = strata if os.sep in strata else shutil.which(strata)
    if program is None or not os.access(program, os.X_OK):
        raise DaemonStartError(
            "daemon_start",
            None,
            f"cannot start a daemon for {store}: no program {strata!r} "
            f"{'there' if os.sep in strata else 'on PATH'}; pass strata=PATH to Client.connect",
        )
    log_path = os.path.join(store, LOG_FILE)
    command = [program, "--store", store, "serve"]
    if idle_timeout is not None:
        command += ["--idle-timeout", str(int(idle_timeout))]
    env = {k: v for k, v in os.environ.items() if k != "STRATA_NO_DAEMON"}
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        log_start = os.fstat(log_fd).st_size
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        raise DaemonStartError(
            "daemon_start", None, f"starting a daemon for {store} ({program}): {e.strerror or e}"
        ) from None
    finally:
        os.close(log_fd)
    # Reap it when it exits (this process may live longer than the daemon).
    threading.Thread(target=process.wait, name="strata-daemon-reaper", daemon=True).start()
    deadline = time.monotonic() + start_timeout
    exited_at: float | None = None
    delay = 0.002
    while True:
        sock = _connect_socket(path)
        if sock is not None:
            return sock
        now = time.monotonic()
        if process.returncode is not None:
            # It may have lost a race to a daemon started at the same moment: give that one
            # a moment to bind its socket (it holds the store already).
            exited_at = exited_at or now
            if now - exited_at > 0.3:
                raise DaemonStartError(
                    "daemon_start",
                    None,
                    f"the daemon started for {store} exited ({process.returncode}): "
                    f"{_log_says(log_path, log_start)}; see {log_path}",
                )
        elif now >= deadline:
            raise DaemonStartError(
                "daemon_start",
                None,
                f"the daemon started for {store} (pid {process.pid}) did not answer on {path} "
                f"within {start_timeout} s; see {log_path}",
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _log_says(log_path: str, offset: int) -> str:
    """What a daemon wrote to its log from `offset`: its error lines, else its last lines."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return "its log cannot be read"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("strata:")]
    return " / ".join(errors or lines[-3:]) or "it logged nothing"


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not count)."""
    if os.path.isdir("/proc/self"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
        except FileNotFoundError:
            return False
        except OSError:
            pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
