//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.
//!
//! Environment variables that scale the slow tests (defaults keep `cargo test` quick):
//! - `STRATA_ORACLE_CASES=2000`: random histories of the bitemporal oracle, per backend
//!   (`temporal`; default 64, about 3 s; 2000 take about 100 s).
//! - `STRATA_TRANSCRIPT_TURNS=300`: turns of the growing chat committed on disk (`store`; default
//!   60, about 1 s; 300 take about 10 s).
//! - `STRATA_CORRUPTION_CASES=10000`: damaged copies of a real store (`corruption`; default
//!   200); `STRATA_CORRUPTION_REPORT=1` prints the class counts and the failing cases.
//! - `STRATA_WATCH_STORM=10000`: changes of the watcher's storm tests (`watch`; default 600).
//! - `STRATA_TEST_POSTGRES_URL=postgres://…`: the PostgreSQL server the `postgres` backend's
//!   suites and `postgres` use (`tools/pg-cluster start DIR` makes a private one and prints it);
//!   without it they skip and say why, under CI (`CI` set) they fail. `STRATA_PG_WRITES`: commits
//!   per writer of the two-writer test (default 40); the oracle's default on PostgreSQL is 16.
//! - `STRATA_SCAN_CASES=100`: thread counts, batch sizes and budgets of the scan property
//!   (`scan`; default 6).
//! - `STRATA_TEST_MCP_VENV=DIR`: the virtualenv with the official Python MCP SDK (`mcp`; made
//!   and `pip install`ed on the first run); default `~/.cache/strata-tests/mcp-python-sdk`, kept
//!   across clones and target directories so that only the first run downloads it.
//! - `PROPTEST_CASES` (proptest's own) sets the cases of the one property test that does not fix
//!   its count (`resolve`).
//!
//! The crash and lock tests set `STRATA_TEST_CHILD`, `STRATA_TEST_BACKEND` and
//! `STRATA_TEST_STORE` for their child process (`backends::child_process`, an ignored test).

// The backends the contract suites run on (redb in memory and on disk), the crash test's child.
mod backends;
// Canonical JSON properties (proptest): round trip, fixed point, key order, unsafe integers.
mod canonical;
// The strata binary end to end: index, edit, inspect, errors.
mod cli;
// The CLI's bad inputs as a table (exit code, first stderr line), index reporting, ls and diff
// answers, the README tour run as written.
mod cli_errors;
// Damaged stores: zeroed pages and flipped bytes against every command, fsck, repair, salvage.
mod corruption;
// The daemon with real processes and sockets: protocol, bad input, lifecycle, concurrency, SIGKILL.
mod daemon;
// Store privacy: modes under any umask, the lock file, deny rules in every case, another uid.
mod privacy;
// `strata migrate`: redb → PostgreSQL → redb answers alike (library and binary), bad targets.
mod migrate;
// PostgreSQL only: two writers, LISTEN, SIGKILL of the postmaster, bad URLs.
mod postgres;
// The mount resolver: mappings, path checks, symlinks, properties.
mod resolve;
// `strata mcp` over stdio: docs mode's tools, errors, configuration, many servers, Python SDK.
mod mcp;
// The layering check of .ci/layering, on this tree and on copies with bad imports.
mod layering;
// The JSON Schemas of schema/objects/ against the envelopes strata prints.
mod schema;
// The JSON Schemas of schema/rpc/: no drift from the types, one pair per method, real responses valid.
mod rpc_schema;
// Sessions: triggers, sets, activation, render, resume, views, forks, deltas, CLI.
mod session;
// Review: session reads through links out of a mount, kept JSON after loads and forks.
mod session_review;
// Tree scans: any thread count, batch size and byte budget give the same store answers.
mod scan;
// The bitemporal store: transactions, queries, log, evict, fsck, crashes.
mod store;
// The session tools through `strata mcp` in session mode: every tool and error, hashes,
// descriptors across restarts and forks, recorded calls, a daemon; schema/tools/ drift.
mod tools;
// The writing tools through `strata mcp`: writes, both patch forms, every conflict and
// validation path with disk and store unchanged, two writers through a daemon.
mod writing;
// What every module shares: TestResult, whose failure names the line of its `?`.
mod support;
// The proptest oracle: as_of and history against a BTreeMap model.
mod temporal;
// The watcher with a real daemon and real files: every kind of change, storms, SIGKILL, overflow,
// the watch limit, index after a cookie sync, subscriptions by path, live sessions.
mod watch;
// Canonical JSON and hash vectors of schema/vectors.json, recomputed with strata.
mod vectors;
