//! `PgStore`: the [`Backend`] on a PostgreSQL database, for a team whose agents share one
//! history (several machines, one database; replicas, backups and failover by PostgreSQL's own
//! tools).
//!
//! Uses `object` and `hash` (and `error`), and the engine-neutral parts of `store` (the log's
//! digests and chain, the storage codec, the redb backend's op and document checks).
//!
//! A store is one PostgreSQL schema (namespace) of a database: `postgres://…/db?schema=NAME`
//! (default `strata`), its layout in `schema`. The log (headers and op bodies in the storage
//! codec) is the source of truth; versions, entities, paths and matches are derived from it
//! (`fsck --rebuild` replays it). A commit uploads its contents first (idempotent by hash), then
//! takes the head row `FOR UPDATE`, checks its matches inside the lock (a conflict changes
//! nothing), extends the chain, writes, `NOTIFY`s `strata_<schema>` with the tx id, and commits:
//! commits from any number of processes and machines are serialized by the database, ids
//! gapless. A group of transactions shares one database transaction, and each is written in
//! two statements (`commit`); the head's lock is released before the WAL flush, and a request
//! is answered after it.
//!
//! The sync `postgres` client runs its own small runtime: it is called from plain threads (the
//! daemon calls the engine through `spawn_blocking`), never from inside an async task.
//!
//! # Layout
//! - `schema`: the tables, created and migrated here. `rule`: the write rule and history over
//!   rows in memory. `commit`: group commits in few round trips. `write`: op-by-op writes.
//!   `read`: queries. `maintain`: evict, gc, fsck, rebuild. `damage`: the damage marker (a row
//!   every handle sees).

mod commit;
mod damage;
mod maintain;
mod read;
mod rule;
mod schema;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use postgres::types::ToSql;
use postgres::{Client, GenericClient, NoTls};

use super::codec::{self, EntityRec};
use super::log::{Origin, TxRecord};
use super::{
    Backend, EntityInfo, Finding, GcReport, HistoryQuery, Listing, ObjectMeta, Op, StatEntry,
    StatUpdate, Stats, Timestamp, TxId, TxReceipt, TxRequest, Version, VersionInfo,
};
use crate::error::{Error, Result};
use crate::hash::Hash;

/// Statements prepared on one connection, by their SQL.
type Prepared = std::collections::HashMap<String, postgres::Statement>;

thread_local! {
    /// The prepared statements of the connection this thread works with now (set by
    /// [`PgStore::with_client_here`] for the length of its call).
    static PREPARED: std::cell::RefCell<Option<Prepared>> = const { std::cell::RefCell::new(None) };
}

/// The client calls strata makes, each statement prepared once per connection and reused: an
/// unprepared call costs a round trip more (parse, then bind and execute). Only for the
/// connection [`PgStore::with_client`] lends (its statements are the ones cached).
pub(crate) trait Cached: GenericClient {
    /// `execute` through the cache.
    fn run(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<u64, postgres::Error> {
        let statement = prepared(self, sql)?;
        self.execute(&statement, params)
    }

    /// `query` through the cache.
    fn rows(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<postgres::Row>, postgres::Error> {
        let statement = prepared(self, sql)?;
        self.query(&statement, params)
    }

    /// `query_one` through the cache.
    fn row(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<postgres::Row, postgres::Error> {
        let statement = prepared(self, sql)?;
        self.query_one(&statement, params)
    }

    /// `query_opt` through the cache.
    fn maybe_row(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Option<postgres::Row>, postgres::Error> {
        let statement = prepared(self, sql)?;
        self.query_opt(&statement, params)
    }
}

impl<T: GenericClient> Cached for T {}

/// `sql` prepared on the connection `client` is part of: from the cache of the connection this
/// thread works with, else prepared now (and cached when there is a cache).
fn prepared(
    client: &mut (impl GenericClient + ?Sized),
    sql: &str,
) -> std::result::Result<postgres::Statement, postgres::Error> {
    if let Some(statement) = PREPARED.with(|p| {
        p.borrow()
            .as_ref()
            .and_then(|cache| cache.get(sql).cloned())
    }) {
        return Ok(statement);
    }
    let statement = client.prepare(sql)?;
    PREPARED.with(|p| {
        if let Some(cache) = p.borrow_mut().as_mut() {
            cache.insert(sql.to_string(), statement.clone());
        }
    });
    Ok(statement)
}

/// How many idle connections a handle keeps.
const POOL: usize = 8;
/// The schema a URL without `schema=` names.
pub const DEFAULT_SCHEMA: &str = "strata";

/// Maps a PostgreSQL client error into [`Error::Storage`].
pub(crate) trait PgResult<T> {
    /// The result with its error turned into [`Error::Storage`], saying what was being done.
    fn pg(self, what: &str) -> Result<T>;
}

impl<T> PgResult<T> for std::result::Result<T, postgres::Error> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| {
            let detail = match e.as_db_error() {
                Some(db) => format!("{}: {}", db.code().code(), db.message()),
                None => e.to_string(),
            };
            Error::storage(format!("PostgreSQL, {what}"), detail)
        })
    }
}

/// Where a PostgreSQL store lives: the connection URL (without `schema=`) and the schema.
#[derive(Clone, PartialEq, Eq)]
pub struct PgLocation {
    url: String,
    schema: String,
}

impl std::fmt::Debug for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl PgLocation {
    /// Parses `postgres://user@host:port/db?schema=NAME` (or `postgresql://`); other query
    /// parameters go to the client as given.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a URL that is not PostgreSQL's or a schema name that is not
    /// lowercase letters, digits and `_`.
    pub fn parse(url: &str) -> Result<Self> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::invalid_input(format!(
                "{url:?} is not a PostgreSQL URL; give postgres://user@host:port/database"
            )));
        }
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut schema = DEFAULT_SCHEMA.to_string();
        let mut rest = Vec::new();
        for param in query.split('&').filter(|p| !p.is_empty()) {
            match param.strip_prefix("schema=") {
                Some(name) => schema = name.to_string(),
                None => rest.push(param),
            }
        }
        let valid = !schema.is_empty()
            && schema.len() <= 48
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::invalid_input(format!(
                "schema {schema:?} in the PostgreSQL URL: give up to 48 lowercase letters, digits \
                 and _, starting with a letter"
            )));
        }
        let url = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        url.parse::<postgres::Config>().map_err(|e| {
            Error::invalid_input(format!("PostgreSQL URL {base:?}: {e}; check its form"))
        })?;
        Ok(PgLocation { url, schema })
    }

    /// The URL with `schema=` as given to [`PgLocation::parse`].
    pub fn url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.url, self.schema)
    }

    /// The URL without its password, for messages.
    pub fn redacted(&self) -> String {
        let url = self.url();
        match (url.find("://"), url.find('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let userinfo = &url[scheme + 3..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                    None => url,
                }
            }
            _ => url,
        }
    }

    /// The store's schema (namespace) in the database.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The `LISTEN`/`NOTIFY` channel of the store's commits (the payload is the tx id).
    pub fn channel(&self) -> String {
        format!("strata_{}", self.schema)
    }

    /// A new connection with the store's schema on its search path.
    ///
    /// # Errors
    /// [`Error::Storage`] when the database cannot be reached.
    pub fn connect(&self) -> Result<Client> {
        self.session(false)
    }

    /// A new connection with the store's schema on its search path; `read_only`: every
    /// transaction on it is read-only unless it asks otherwise (`SET
    /// default_transaction_read_only`), so the database itself refuses a write.
    fn session(&self, read_only: bool) -> Result<Client> {
        let mut config: postgres::Config = self
            .url
            .parse()
            .map_err(|e| Error::invalid_input(format!("PostgreSQL URL: {e}")))?;
        with_network_defaults(&mut config);
        let mut client = connect_within(config, &self.redacted())?;
        let only = if read_only {
            "; SET default_transaction_read_only = on"
        } else {
            ""
        };
        // No JIT: strata's statements read and write a few rows by index, and a generic
        // plan's guesses (a log read's LIMIT, an unnest's 100 rows) made some look costly
        // enough to be compiled at every execution.
        client
            .batch_execute(&format!(
                "SET search_path TO {}; SET jit = off{only}",
                self.schema
            ))
            .pg("setting the search path")?;
        Ok(client)
    }
}

/// How long a connection attempt may take before it fails, unless the URL sets
/// `connect_timeout`.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the server may stay silent (idle, or not acknowledging what was sent) before the
/// connection is probed or dropped, unless the URL sets `keepalives_idle` or `tcp_user_timeout`.
const DEAD_PEER_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// Bounds what the URL leaves unbounded, so that an unreachable or vanished server is an error
/// within seconds rather than a commit hung for hours: a connect timeout (libpq's default is
/// none), keepalives after 30 s idle instead of the system's 2 hours, and a TCP user timeout.
fn with_network_defaults(config: &mut postgres::Config) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(DEAD_PEER_AFTER);
    }
    // The library's default; a URL that sets another keeps it.
    if config.get_keepalives_idle() == std::time::Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(DEAD_PEER_AFTER);
    }
}

/// Connects as `config` says, the whole of it (the socket, the startup and authentication)
/// within its connect timeout, as libpq's `connect_timeout` is: the client library bounds only
/// the socket's connect, and a peer that accepts and never answers (a hung server, or a socket
/// connected to itself) would hold the caller forever. A connect that outlives the timeout is
/// left to finish or fail on a thread of its own.
fn connect_within(config: postgres::Config, redacted: &str) -> Result<Client> {
    let what = format!("connecting to {redacted}");
    let Some(&timeout) = config.get_connect_timeout().filter(|t| !t.is_zero()) else {
        return config.connect(NoTls).pg(&what);
    };
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pg-connect".into())
        .spawn(move || {
            // The caller may have given up: nobody to tell then.
            let _ = sender.send(config.connect(NoTls));
        })
        .map_err(|e| Error::io("starting a thread to connect to PostgreSQL", e))?;
    match receiver.recv_timeout(timeout) {
        Ok(connected) => connected.pg(&what),
        Err(_) => Err(Error::storage(
            &what,
            format!(
                "the server did not complete the connection within {} s (set connect_timeout= \
                 in the URL for another limit); check that it is up and reachable",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// A connection that `LISTEN`s on a store's commit channel: what a daemon learns other
/// processes' commits through. Call it from a plain thread (the sync client may not block
/// inside an async runtime).
pub struct PgListener {
    client: Client,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgListener")
    }
}

impl PgListener {
    /// The greatest tx id of the commits notified within `timeout` (all those waiting are
    /// read); `None` when none was.
    ///
    /// # Errors
    /// [`Error::Storage`] when the connection fails (listen again with a new one).
    pub fn wait(&mut self, timeout: std::time::Duration) -> Result<Option<u64>> {
        use postgres::fallible_iterator::FallibleIterator as _;
        let tx_of = |note: postgres::Notification| note.payload().parse::<u64>().ok();
        let first = self
            .client
            .notifications()
            .timeout_iter(timeout)
            .next()
            .pg("waiting for commits")?;
        let Some(first) = first else {
            return Ok(None);
        };
        let mut latest = tx_of(first);
        // What else is waiting is read without waiting again.
        let mut more = self.client.notifications();
        let mut more = more.iter();
        while let Some(note) = more.next().pg("reading commits")? {
            latest = latest.max(tx_of(note));
        }
        Ok(latest)
    }
}

impl PgLocation {
    /// A new connection `LISTEN`ing on the store's channel ([`PgLocation::channel`]).
    ///
    /// # Errors
    /// [`Error::Storage`] when the database cannot be reached.
    pub fn listen(&self) -> Result<PgListener> {
        let mut client = self.connect()?;
        client
            .batch_execute(&format!("LISTEN {}", self.channel()))
            .pg("listening for commits")?;
        Ok(PgListener { client })
    }
}

/// How [`crate::Store::postgres`] treats a schema with no store in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgOpen {
    /// Make the store; an existing one is an error.
    Create,
    /// Open an existing store; none is [`Error::NotFound`].
    Open,
    /// Open it, making it when there is none.
    OpenOrCreate,
    /// Open an existing store for reading only (none is [`Error::NotFound`]): nothing is
    /// created or upgraded, every session is read-only, and a write is refused with
    /// [`Error::PermissionDenied`]. What a streaming standby (a read replica) allows.
    ReadOnly,
}

/// A bitemporal object store in one schema of a PostgreSQL database; any number of handles in
/// any number of processes share it.
pub(crate) struct PgStore {
    location: PgLocation,
    dir: Option<PathBuf>,
    /// Opened with [`PgOpen::ReadOnly`]: reads only.
    read_only: bool,
    /// The layout version of the store's tables (older than [`schema::SCHEMA_VERSION`] only
    /// when read-only: there is then no damage marker table).
    layout: i64,
    /// Why this handle found the store damaged (a read that met damage, or its own fsck),
    /// beside the marker row other handles see.
    damage: Mutex<Option<String>>,
    /// Idle connections and their prepared statements.
    pool: Mutex<Vec<(Client, Prepared)>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.location)
            .finish()
    }
}

impl Drop for PgStore {
    /// Closes the pooled connections on a thread of their own: each sync client owns a small
    /// runtime, which may not be dropped from inside the daemon's async runtime.
    fn drop(&mut self) {
        let clients = std::mem::take(
            self.pool
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if clients.is_empty() {
            return;
        }
        let closing = std::thread::spawn(move || drop(clients));
        let _ = closing.join();
    }
}

/// A read's answer `out`; "not found" comes with the store's damage mark (read on `t`, only
/// then; layouts before 2 have none).
fn marked_if_not_found<T>(
    t: &mut impl GenericClient,
    layout: i64,
    out: Result<T>,
) -> Result<std::result::Result<T, (String, Option<String>)>> {
    match out {
        Ok(out) => Ok(Ok(out)),
        Err(Error::NotFound { what }) if layout >= 2 => {
            let marked: Option<String> = t
                .maybe_row("SELECT reason FROM strata_damage WHERE id = 1", &[])
                .pg("reading the damage marker")?
                .map(|row| row.get(0));
            Ok(Err((what, marked)))
        }
        Err(Error::NotFound { what }) => Ok(Err((what, None))),
        Err(e) => Err(e),
    }
}

/// A read-only transaction on one snapshot of the database (repeatable read); `what` names the
/// step in an error.
fn snapshot<'c>(client: &'c mut Client, what: &str) -> Result<postgres::Transaction<'c>> {
    client
        .build_transaction()
        .read_only(true)
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .start()
        .pg(what)
}

fn ts(micros: i64) -> Timestamp {
    Timestamp::saturating_from_micros(micros)
}

/// A hash column's value as 32 bytes.
fn hash32(bytes: &[u8], what: &str) -> Result<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| Error::corrupt(format!("{what} is {} bytes, not 32", bytes.len())))
}

/// u64 ids and µs are stored as `bigint`: tx ids and entity numbers never reach 2^63.
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn unbig(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn entity_of(id: &str, eid: i64, rec: &[u8]) -> Result<(u64, EntityRec)> {
    let rec: EntityRec = codec::decode(rec, &format!("entity {id}"))?;
    Ok((unbig(eid), rec))
}

impl PgStore {
    /// Opens the store at `location` as `mode` says; `dir` is the store directory that points
    /// at it, when there is one.
    ///
    /// # Errors
    /// [`Error::Storage`] when the database cannot be reached; [`Error::NotFound`] or
    /// [`Error::InvalidInput`] as `mode` says; [`Error::FormatVersion`] for a layout this build
    /// does not know.
    pub fn open(location: PgLocation, dir: Option<PathBuf>, mode: PgOpen) -> Result<Self> {
        let mut store = PgStore {
            location,
            dir,
            read_only: mode == PgOpen::ReadOnly,
            layout: schema::SCHEMA_VERSION,
            damage: Mutex::new(None),
            pool: Mutex::new(Vec::new()),
        };
        store.layout =
            store.with_client(|client| schema::prepare(client, &store.location, mode))?;
        Ok(store)
    }

    /// Refuses a write on a read-only handle.
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::PermissionDenied {
                reason: "the store was opened read-only; open it read-write to write".into(),
            });
        }
        Ok(())
    }

    /// Runs `f` with a pooled connection (a new one when none is idle). Inside an async
    /// runtime (the daemon's), where the sync client may not block, on a thread of its own.
    fn with_client<T: Send>(&self, f: impl FnOnce(&mut Client) -> Result<T> + Send) -> Result<T> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.with_client_here(f);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| self.with_client_here(f))
                .join()
                .unwrap_or_else(|_| Err(Error::invariant("a PostgreSQL call panicked")))
        })
    }

    /// [`PgStore::with_client`] on this thread, with the connection's prepared statements as
    /// this thread's cache for the length of the call.
    fn with_client_here<T>(&self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        let pooled = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let (mut client, prepared) = match pooled {
            Some((client, prepared)) if !client.is_closed() => (client, prepared),
            _ => (self.location.session(self.read_only)?, Prepared::new()),
        };
        let outer = PREPARED.with(|p| p.replace(Some(prepared)));
        let result = f(&mut client);
        let prepared = PREPARED.with(|p| p.replace(outer)).unwrap_or_default();
        if !client.is_closed() {
            let mut pool = self
                .pool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if pool.len() < POOL {
                pool.push((client, prepared));
            }
        }
        result
    }

    /// Runs the read `f` in one read-only, repeatable-read transaction (one snapshot). Damage
    /// it meets marks the store damaged; on a store marked damaged, "not found" may be what
    /// the damage lost, and says so (the mark is read in the same transaction, only then).
    fn read<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T> + Send,
    ) -> Result<T> {
        let layout = self.layout;
        let result = self.with_client(|client| {
            let mut tx = snapshot(client, "beginning a read")?;
            let out = f(&mut tx);
            let out = marked_if_not_found(&mut tx, layout, out)?;
            if out.is_ok() {
                tx.commit().pg("ending a read")?;
            }
            Ok(out)
        });
        self.settle_read(result)
    }

    /// [`PgStore::read`] for a read of one statement, which is a snapshot of its own: without
    /// a transaction around it (two round trips fewer).
    fn read_statement<T: Send>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T> + Send,
    ) -> Result<T> {
        let layout = self.layout;
        let result = self.with_client(|client| {
            let out = f(client);
            marked_if_not_found(client, layout, out)
        });
        self.settle_read(result)
    }

    /// What a read came to: its answer, or "not found" with the damage mark when the store
    /// is marked damaged, or its error (damage it met marks the store).
    fn settle_read<T>(
        &self,
        result: Result<std::result::Result<T, (String, Option<String>)>>,
    ) -> Result<T> {
        match result {
            Ok(Ok(out)) => Ok(out),
            Ok(Err((what, marked))) => match marked.or_else(|| self.remembered_damage()) {
                Some(reason) => Err(Error::corrupt(format!(
                    "not found: {what}; but the store is marked damaged ({reason}), so it may be \
                     what the damage lost; run `strata fsck` to see what is affected and `{}` \
                     to repair it",
                    super::damage::REPAIR
                ))),
                None => Err(Error::NotFound { what }),
            },
            Err(e @ Error::Corrupt { .. }) => {
                self.note_damage(&e.to_string());
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs the read `f` in one read-only, repeatable-read transaction, as it is.
    fn read_here<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T> + Send,
    ) -> Result<T> {
        self.with_client(|client| {
            let mut tx = snapshot(client, "beginning a read")?;
            let out = f(&mut tx)?;
            tx.commit().pg("ending a read")?;
            Ok(out)
        })
    }
}

impl Backend for PgStore {
    fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn damage(&self) -> Option<String> {
        PgStore::damage(self)
    }

    fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt> {
        let request = TxRequest {
            ops,
            origin,
            stat: None,
        };
        self.commit_group(vec![request])
            .pop()
            .unwrap_or_else(|| Err(Error::invariant("a commit answered nothing")))?
            .ok_or_else(|| Error::invariant("a transaction wrote no log record"))
    }

    fn transact_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>> {
        let request = TxRequest {
            ops,
            origin,
            stat: Some(stat),
        };
        self.commit_group(vec![request])
            .pop()
            .unwrap_or_else(|| Err(Error::invariant("a commit answered nothing")))
    }

    fn transact_group(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.commit_group(group)
    }

    fn as_of(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        self.read(|t| read::version_at(t, id, valid_time, tx))
    }

    fn version_info(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        self.read(|t| {
            let (eid, _) = read::entity(t, id)?.ok_or_else(|| super::redb::unknown_entity(id))?;
            read::info_at(t, id, eid, valid_time, tx).map(|found| found.map(|(info, _)| info))
        })
    }

    fn get_if_known(&self, id: &str) -> Result<Option<Version>> {
        match self.as_of(id, None, None) {
            Err(Error::NotFound { .. }) => Ok(None),
            other => other,
        }
    }

    fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<VersionInfo>> {
        self.read(|t| read::history(t, id, query))
    }

    fn version_sizes(&self, id: &str, versions: &[VersionInfo]) -> Result<Vec<Option<u64>>> {
        self.read(|t| read::version_sizes(t, id, versions))
    }

    fn listings(
        &self,
        ids: &[&str],
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
        deleted: bool,
    ) -> Result<Vec<Result<Option<Listing>>>> {
        let layout = self.layout;
        // One snapshot for them all; each answer settles as its own read would.
        let answers = self.read(|t| {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let answer = read::listing(t, id, valid_time, tx, deleted);
                out.push(marked_if_not_found(t, layout, answer));
            }
            Ok(out)
        })?;
        Ok(answers
            .into_iter()
            .map(|answer| self.settle_read(answer))
            .collect())
    }

    fn log(&self, since: Option<TxId>, limit: usize) -> Result<Vec<TxRecord>> {
        self.read(|t| read::log(t, since, limit))
    }

    fn chain_head(&self) -> Result<Option<(TxId, [u8; 32])>> {
        self.read(read::chain_head)
    }

    fn tx_at_time(&self, time: Timestamp) -> Result<Option<TxId>> {
        self.read(|t| read::tx_at_time(t, time))
    }

    fn entity(&self, id: &str) -> Result<EntityInfo> {
        self.read_statement(|t| {
            let (_, rec) = read::entity(t, id)?.ok_or_else(|| super::redb::unknown_entity(id))?;
            super::redb::entity_info(id, &rec)
        })
    }

    fn entity_exists(&self, id: &str) -> Result<bool> {
        self.read_statement(|t| Ok(read::entity(t, id)?.is_some()))
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        self.read(|t| read::ids_with_prefix(t, prefix, limit))
    }

    fn entity_at_path(&self, filesystem_id: &str, path: &str) -> Result<Option<String>> {
        self.read(|t| read::entity_at_path(t, filesystem_id, path))
    }

    fn paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        self.read(|t| read::paths_under(t, filesystem_id, prefix))
    }

    fn indexed_paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>> {
        self.read(|t| {
            Ok(read::paths_under(t, filesystem_id, prefix)?
                .into_iter()
                .map(|(path, _)| path)
                .collect())
        })
    }

    fn content(&self, hash: &Hash) -> Result<Option<Vec<u8>>> {
        self.read(|t| read::content(t, &hash.0))
    }

    fn live_entities(&self) -> Result<Vec<EntityInfo>> {
        self.read(read::live_entities)
    }

    fn metadata(&self, id: &str, tx: Option<TxId>) -> Result<Option<ObjectMeta>> {
        Ok(self.metadata_many(&[id], tx)?.pop().flatten())
    }

    fn metadata_many(&self, ids: &[&str], tx: Option<TxId>) -> Result<Vec<Option<ObjectMeta>>> {
        self.read(|t| {
            let now = read::now(t)?;
            ids.iter()
                .map(|id| Ok(read::meta_at(t, id, now, tx)?.map(|(meta, _)| meta)))
                .collect()
        })
    }

    fn metadata_with_json(
        &self,
        id: &str,
        tx: Option<TxId>,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        self.read(|t| {
            let now = read::now(t)?;
            read::meta_at(t, id, now, tx)
        })
    }

    fn stat_cache(
        &self,
        filesystem_id: &str,
        prefix: &str,
    ) -> Result<rustc_hash::FxHashMap<String, StatEntry>> {
        self.read(|t| read::stat_cache(t, filesystem_id, prefix))
    }

    fn stats(&self) -> Result<Stats> {
        let schema = self.location.schema.clone();
        self.read(|t| read::stats(t, &schema))
    }

    fn evict(&self, id: &str, origin: Origin) -> Result<TxReceipt> {
        let erasure = self.erasable_damage()?;
        let request = TxRequest {
            ops: vec![Op::Evict {
                entity: id.to_string(),
            }],
            origin,
            stat: None,
        };
        self.commit_group_as(vec![request], erasure)
            .pop()
            .unwrap_or_else(|| Err(Error::invariant("a commit answered nothing")))?
            .ok_or_else(|| Error::invariant("a transaction wrote no log record"))
    }

    fn append_log(&self, records: &[super::ReplayRecord]) -> Result<()> {
        self.check_writable()?;
        PgStore::append_log(self, records)
    }

    fn fsck(&self) -> Result<Vec<Finding>> {
        let findings = self.with_client(|client| maintain::fsck(client, self.layout))?;
        self.settle_damage(&findings)?;
        Ok(findings)
    }

    fn fsck_rebuild(&self) -> Result<()> {
        // A repair: allowed on a damaged store.
        self.check_writable()?;
        self.with_client(maintain::rebuild)
    }

    fn restore_contents(&self, contents: Vec<([u8; 32], Vec<u8>)>) -> Result<()> {
        self.check_writable()?;
        self.with_client(|client| maintain::restore_contents(client, contents))
    }

    fn gc(&self) -> Result<GcReport> {
        self.check_writable()?;
        self.with_client(maintain::gc)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{CONNECT_TIMEOUT, DEAD_PEER_AFTER, connect_within, with_network_defaults};
    use crate::error::Error;

    fn configured(url: &str) -> Result<postgres::Config, postgres::Error> {
        let mut config: postgres::Config = url.parse()?;
        with_network_defaults(&mut config);
        Ok(config)
    }

    /// A URL that bounds nothing gets strata's bounds; one that sets its own keeps them.
    #[test]
    fn connections_are_bounded_unless_the_url_says_otherwise() -> Result<(), postgres::Error> {
        let plain = configured("postgres://u@h:1/db")?;
        assert_eq!(plain.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(plain.get_tcp_user_timeout(), Some(&DEAD_PEER_AFTER));
        assert_eq!(plain.get_keepalives_idle(), DEAD_PEER_AFTER);
        let own = configured("postgres://u@h:1/db?connect_timeout=3&keepalives_idle=90")?;
        assert_eq!(own.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(own.get_keepalives_idle(), Duration::from_secs(90));
        Ok(())
    }

    /// A server that accepts the connection and never answers (a hung server, or a client's
    /// socket connected to itself) fails the connect within its timeout instead of hanging.
    #[test]
    fn a_server_that_never_answers_fails_the_connect_within_its_timeout()
    -> Result<(), Box<dyn std::error::Error>> {
        let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = silent.local_addr()?.port();
        let url = format!("postgres://u@127.0.0.1:{port}/db?connect_timeout=1");
        let started = std::time::Instant::now();
        let err = match connect_within(url.parse()?, "the silent server") {
            Ok(_) => return Err("a silent server gave a connection".into()),
            Err(e) => e,
        };
        assert!(matches!(err, Error::Storage { .. }), "{err}");
        assert!(err.full_message().contains("within 1 s"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        drop(silent);
        Ok(())
    }
}
