//! Opening a store: create, open, open read-only, in memory; the format check and the
//! informational lock file.

use std::path::Path;

use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, WriteTransaction};

use super::*;
use crate::store::private;

/// The older format versions a read-write open upgrades in place (see
/// [`RedbStore::check_format`]): their rows are read as they are.
const UPGRADES_FROM: [u32; 7] = [3, 4, 5, 6, 7, 8, 9];

/// A transaction of a store's handle, counted while it lives so that the handle is never
/// reopened under it ([`RedbStore::reopen`]). It derefs to the redb transaction.
pub(crate) struct Live<T> {
    tx: T,
    _count: LiveCount,
}

/// The transactions of a store's handle: how many run, and what a scrub of the free pages
/// needs to know of those that may hold pages an erasure freed ([`RedbStore::scrub_free_pages`]).
#[derive(Debug, Default)]
pub(crate) struct LiveCounts {
    /// Transactions running now.
    pub(crate) running: std::sync::atomic::AtomicUsize,
    /// Erasures (evicts, gcs) committed: a transaction begun before the latest is old, and
    /// may hold pages it freed.
    pub(crate) erasures: std::sync::atomic::AtomicU64,
    /// Old transactions ended: each may have let pages an erasure freed go free.
    pub(crate) old_ended: std::sync::atomic::AtomicU64,
}

/// One count in a store's live transactions, given back when dropped, with the number of
/// erasures committed when it began.
struct LiveCount(std::sync::Arc<LiveCounts>, u64);

impl Drop for LiveCount {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        let LiveCount(counts, began_after) = self;
        if counts.erasures.load(Ordering::SeqCst) > *began_after {
            counts.old_ended.fetch_add(1, Ordering::SeqCst);
        }
        counts.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T> Live<T> {
    /// `tx`, counted in `live`; `began_after` is the erasures committed as read before it
    /// began (read after, an erasure committing meanwhile would not make it old).
    fn new(tx: T, live: &std::sync::Arc<LiveCounts>, began_after: u64) -> Self {
        live.running
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Live {
            tx,
            _count: LiveCount(std::sync::Arc::clone(live), began_after),
        }
    }
}

impl<T> std::ops::Deref for Live<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.tx
    }
}

impl<T> std::ops::DerefMut for Live<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.tx
    }
}

impl Live<WriteTransaction> {
    /// Commits the transaction (it stops counting once the commit is done).
    pub(crate) fn commit(self) -> std::result::Result<(), redb::CommitError> {
        let Live { tx, _count } = self;
        tx.commit()
    }

    /// Aborts the transaction: what it wrote, and any growth of the file, is taken back.
    pub(crate) fn abort(self) -> std::result::Result<(), redb::StorageError> {
        let Live { tx, _count } = self;
        tx.abort()
    }
}

/// The redb handle of a store: read-write, or read-only.
pub(crate) enum Handle {
    /// Opened by `create`, `open` or `in_memory`: reads and writes.
    ReadWrite(Database),
    /// Opened by [`RedbStore::open_read_only`]: reads only.
    ReadOnly(ReadOnlyDatabase),
    /// Closed: the database was dropped at the end of the store's own drop (under the guard,
    /// since redb may panic while it frees a damaged allocator page).
    Closed,
}

impl Handle {
    /// Begins a read transaction.
    pub(crate) fn begin_read(&self) -> Result<ReadTransaction, redb::TransactionError> {
        match self {
            Handle::ReadWrite(db) => db.begin_read(),
            Handle::ReadOnly(db) => db.begin_read(),
            Handle::Closed => Err(redb::TransactionError::Storage(redb::StorageError::Io(
                std::io::Error::other("the store is closed"),
            ))),
        }
    }

    /// Begins a write transaction; refused on a read-only handle.
    pub(crate) fn begin_write(&self) -> Result<WriteTransaction> {
        match self {
            Handle::ReadWrite(db) => db.begin_write().db(),
            Handle::ReadOnly(_) => Err(Error::PermissionDenied {
                reason: "the store was opened read-only; open it read-write to write".into(),
            }),
            Handle::Closed => Err(Error::Invariant {
                what: "a write began on a closed store".into(),
            }),
        }
    }

    /// The read-write handle, for what only it can do (compaction).
    pub(crate) fn writable(&mut self) -> Option<&mut Database> {
        match self {
            Handle::ReadWrite(db) => Some(db),
            Handle::ReadOnly(_) | Handle::Closed => None,
        }
    }

    /// Whether this handle only reads.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, Handle::ReadOnly(_))
    }
}

/// The holder of a store as its lock file records it, for [`Error::StoreLocked`]: the `pid=`,
/// `program=` and `started=` lines only (a lock file left by an older strata also held the
/// whole command line, which is not repeated).
pub(crate) fn lock_holder(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap_or_default();
    let fields: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| {
            ["pid=", "program=", "started="]
                .iter()
                .any(|key| line.starts_with(key))
        })
        .collect();
    if fields.is_empty() {
        "unknown holder".to_string()
    } else {
        fields.join(", ")
    }
}

/// The name this program was started as: the file name of `argv[0]`, never its directory or
/// arguments (which may hold secrets); control characters become `?`.
fn program_name() -> String {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let name = Path::new(&arg0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty() {
        return "unknown".to_string();
    }
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Writes the informational lock file (mode 0600): pid, program and start time, never the
/// arguments.
fn write_lock_file(dir: &Path) -> Result<()> {
    let text = format!(
        "pid={}\nprogram={}\nstarted={}\n",
        std::process::id(),
        program_name(),
        Timestamp::now()
    );
    let path = dir.join(LOCK_FILE);
    match private::write_file(&path, text.as_bytes()) {
        // A stale lock file of another user (root held the store and was killed): the
        // directory is ours, so it can go.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::PermissionDenied => {
            std::fs::remove_file(&path).map_err(|e| {
                Error::io(
                    format!(
                        "replacing {} (another user's lock file; remove it)",
                        path.display()
                    ),
                    e,
                )
            })?;
            private::write_file(&path, text.as_bytes())
        }
        written => written,
    }
}

/// Opens (or creates) the redb file at `path` of store `dir` to write; whether redb ran its full
/// repair to open it.
fn open_writable(dir: &Path, path: &Path, create: bool) -> Result<(Database, bool)> {
    let mut builder = Database::builder();
    builder.set_cache_size(CACHE_BYTES);
    // redb calls this only for a full repair: a crash after a commit without its quick-repair
    // record (made under load), before the checkpoint that follows such commits.
    let repaired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let began = std::time::Instant::now();
    builder.set_repair_callback({
        let repaired = std::sync::Arc::clone(&repaired);
        let shown = path.display().to_string();
        move |_| {
            if !repaired.swap(true, std::sync::atomic::Ordering::SeqCst) {
                tracing::warn!(
                    file = %shown,
                    "the store was not closed cleanly and its last commit has no quick-repair \
                     record (commits made under load have none): checking its pages and \
                     rebuilding its free-space map"
                );
            }
        }
    });
    let opened = if create {
        builder.create(path)
    } else {
        builder.open(path)
    };
    let full_repair = repaired.load(std::sync::atomic::Ordering::SeqCst);
    if full_repair {
        tracing::warn!(
            seconds = began.elapsed().as_secs_f64(),
            "the store's repair ended"
        );
    }
    match opened {
        Ok(db) => Ok((db, full_repair)),
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(Error::StoreLocked {
            path: path.to_path_buf(),
            holder: lock_holder(dir),
        }),
        Err(e) => Err(open_error(path, e)),
    }
}

impl RedbStore {
    /// Creates a new store in directory `dir`, made 0700 if missing (its files are 0600; an
    /// existing directory loses the group's and others' bits when the current user owns it).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a store already exists there; [`Error::Io`] when the
    /// directory cannot be made or made private; [`Error::StoreLocked`] when another process
    /// holds it.
    pub fn create(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.join(DB_FILE).exists() {
            return Err(Error::invalid_input(format!(
                "a store already exists in {}; open it instead",
                dir.display()
            )));
        }
        private::create_dir(dir)?;
        Self::open_dir(dir, true)
    }

    /// Opens the existing store in directory `dir`. A directory made by an older strata with
    /// looser modes loses the group's and others' bits, and so do its files, when the current
    /// user owns them.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is none; [`Error::StoreLocked`] when another process holds
    /// it; [`Error::FormatVersion`] when it was written by another format version.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.join(DB_FILE).exists() {
            return Err(Error::not_found(format!(
                "store in {} (no {DB_FILE}); create one with `strata init`",
                dir.display()
            )));
        }
        Self::open_dir(dir, false)
    }

    /// Opens the store in `dir`, creating it when there is none.
    ///
    /// # Errors
    /// As [`RedbStore::create`] and [`RedbStore::open`].
    pub fn open_or_create(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.join(DB_FILE).exists() {
            Self::open(dir)
        } else {
            Self::create(dir)
        }
    }

    /// A store in memory (nothing on disk, no lock file): for tests and models.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn in_memory() -> Result<Self> {
        Self::on_backend(redb::backends::InMemoryBackend::new())
    }

    /// A store on `backend` (no directory, no lock file), as [`RedbStore::in_memory`].
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(super) fn on_backend(backend: impl redb::StorageBackend) -> Result<Self> {
        let db = Database::builder().create_with_backend(backend).db()?;
        let store = RedbStore {
            handle: std::sync::RwLock::new(Handle::ReadWrite(db)),
            read_only: false,
            deferred: std::sync::atomic::AtomicBool::new(false),
            deferred_from: std::sync::atomic::AtomicU64::new(0),
            dir: None,
            opened: std::sync::Mutex::new((0, 0)),
            base_cache: docs::BaseCache::default(),
            damaged: std::sync::atomic::AtomicBool::new(false),
            damage_reason: std::sync::Mutex::new(None),
            reopen_pending: std::sync::atomic::AtomicBool::new(false),
            scrubs: std::sync::Mutex::default(),
            write_failed: std::sync::atomic::AtomicBool::new(false),
            writes: std::sync::atomic::AtomicUsize::new(0),
            latch_waits: std::sync::atomic::AtomicU64::new(0),
            reopens: std::sync::atomic::AtomicU64::new(0),
            live: std::sync::Arc::default(),
            lazy: super::LazyCommits::default(),
            full_repair: false,
        };
        store.init(true, Path::new(":memory:"))?;
        Ok(store)
    }

    pub(super) fn open_dir(dir: &Path, create: bool) -> Result<Self> {
        let path = dir.join(DB_FILE);
        if create {
            // redb would create the file with the umask's mode.
            private::create_empty(&path)?;
        } else {
            private::tighten_store(dir)?;
        }
        let (db, full_repair) = open_writable(dir, &path, create)?;
        write_lock_file(dir)?;
        let store = RedbStore {
            handle: std::sync::RwLock::new(Handle::ReadWrite(db)),
            read_only: false,
            deferred: std::sync::atomic::AtomicBool::new(false),
            deferred_from: std::sync::atomic::AtomicU64::new(0),
            dir: Some(dir.to_path_buf()),
            opened: std::sync::Mutex::new(file_size(&path)),
            base_cache: docs::BaseCache::default(),
            damaged: std::sync::atomic::AtomicBool::new(false),
            damage_reason: std::sync::Mutex::new(None),
            reopen_pending: std::sync::atomic::AtomicBool::new(false),
            scrubs: std::sync::Mutex::default(),
            write_failed: std::sync::atomic::AtomicBool::new(false),
            writes: std::sync::atomic::AtomicUsize::new(0),
            latch_waits: std::sync::atomic::AtomicU64::new(0),
            reopens: std::sync::atomic::AtomicU64::new(0),
            live: std::sync::Arc::default(),
            lazy: super::LazyCommits::default(),
            full_repair,
        };
        store.init(create, &path)?;
        store.load_damage();
        Ok(store)
    }

    pub(super) fn init(&self, create: bool, path: &Path) -> Result<()> {
        if create {
            let tx = self.handle().begin_write()?;
            tables::create_all(&tx)?;
            {
                let mut meta = tx.open_table(META).db()?;
                meta.insert("format_version", FORMAT_VERSION.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(EVICTIONS_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(BY_TX_OMITTED_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(SOURCES_IN_IDS_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(FS_IN_HEADERS_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(SHORT_ENTITY_KEYS_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(DOC_SEQS_SINCE, 1u64.to_le_bytes().as_slice())
                    .db()?;
                meta.insert(BLOB_CHUNK_KEY, BLOB_CHUNK.to_le_bytes().as_slice())
                    .db()?;
            }
            tx.commit().db()?;
            return Ok(());
        }
        self.check_format(path).map_err(|e| damage_or(path, e))
    }

    /// Refuses a file that is not a strata store or has another format version; a format 3, 4,
    /// 5, 6, 7, 8 or 9 file is read as it is, and marked format 10 when opened to write (its stat
    /// cache rows moved to `stat_by_dir` and its `paths` rows to `paths_by_dir`; its later
    /// writes use format 5's, 6's and 8's rows, `meta[BY_TX_OMITTED_SINCE]`,
    /// `meta[SOURCES_IN_IDS_SINCE]`, `meta[FS_IN_HEADERS_SINCE]` and
    /// `meta[SHORT_ENTITY_KEYS_SINCE]` and `meta[DOC_SEQS_SINCE]` saying from which transaction on; its blob stream keeps its 4 032-byte chunks when `meta` has no
    /// `BLOB_CHUNK_KEY`).
    pub(super) fn check_format(&self, path: &Path) -> Result<()> {
        let tx = self.handle().begin_read().db()?;
        let meta = tx.open_table(META).map_err(|e| {
            Error::corrupt(format!(
                "{} has no meta table ({e}); it is not a strata store",
                path.display()
            ))
        })?;
        let found = match meta.get("format_version").db()? {
            Some(v) => {
                let bytes: [u8; 4] = v.value().try_into().map_err(|_| {
                    Error::corrupt(format!("{} has a malformed format version", path.display()))
                })?;
                u32::from_le_bytes(bytes)
            }
            None => 0,
        };
        if UPGRADES_FROM.contains(&found) && !self.handle().is_read_only() {
            // Format 4 only adds a log header format (index runs); format 5 omits the
            // `versions_by_tx` row of a first write of one row from the transaction that
            // `BY_TX_OMITTED_SINCE` names on, format 6 keeps a new file's source once from the
            // one `SOURCES_IN_IDS_SINCE` names on, and format 7 reads the chunk size in `meta`
            // (4 032 bytes without it), and format 8 names a first write's filesystem in its
            // log header (a header and a body say their own form) and a file's version row
            // its document by number (a row says its form too), so an older file is a valid
            // format 8 file once those keys say "after the last transaction"; format 9 keys
            // the stat cache by directory number, and format 10 the files' paths, whose old rows move
            // over here. It is marked on its first
            // read-write open so that builds that cannot read the new rows refuse it instead
            // of answering wrong.
            let numbered = !matches!(
                tx.open_table(FILESYSTEMS),
                Err(redb::TableError::TableDoesNotExist(_))
            );
            // Read before the write begins: damage in it leaves the cache behind, not the store.
            let old_stat_rows = super::dirnum::read_old_stat_rows(&tx);
            let old_path_rows = super::dirnum::read_old_path_rows(&tx);
            drop(meta);
            drop(tx);
            let wtx = self.begin_write()?;
            {
                let next = wtx
                    .open_table(TX_LOG)
                    .db()?
                    .last()
                    .db()?
                    .map_or(1, |(k, _)| k.value() + 1);
                tables::create_all(&wtx)?;
                if !numbered {
                    // Filesystems with rows keep their long keys; later ones get numbers.
                    super::fsnum::register_long(&wtx)?;
                }
                // Format 9 keys the stat cache by directory number and name: the old rows
                // (whole paths) move there, once.
                super::dirnum::move_old_stat_rows(&wtx, old_stat_rows)?;
                // Format 10 keys the files' paths so too (damage there leaves them where they
                // are, read beside the new table, for fsck to name and the rebuild to redo).
                super::dirnum::move_old_path_rows(&wtx, old_path_rows)?;
                let mut meta = wtx.open_table(META).db()?;
                meta.insert("format_version", FORMAT_VERSION.to_le_bytes().as_slice())
                    .db()?;
                for key in [
                    BY_TX_OMITTED_SINCE,
                    SOURCES_IN_IDS_SINCE,
                    FS_IN_HEADERS_SINCE,
                    SHORT_ENTITY_KEYS_SINCE,
                    DOC_SEQS_SINCE,
                ] {
                    if meta.get(key).db()?.is_none() {
                        meta.insert(key, next.to_le_bytes().as_slice()).db()?;
                    }
                }
            }
            wtx.commit().db()?;
            return Ok(());
        }
        if found != FORMAT_VERSION && !UPGRADES_FROM.contains(&found) {
            // A damaged meta page reads as another version (redb reads a leaf without checking
            // its checksum): the file's page checksums tell damage from another format.
            let flag = std::sync::atomic::AtomicBool::new(false);
            let damage = guard::guarded(&flag, "checking the store's pages", || {
                fsck::page_damage(path)
            });
            if let Ok(Some(problem)) = damage {
                return Err(Error::corrupt(format!(
                    "{} reads as format version {found}, but its pages are damaged ({problem}); \
                     run `strata fsck`, and if it keeps failing, `strata fsck --salvage NEW_DIR`",
                    path.display()
                )));
            }
            return Err(Error::FormatVersion {
                path: path.to_path_buf(),
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }

    pub(super) fn begin_write(&self) -> Result<Live<WriteTransaction>> {
        self.upgrade()?;
        let began_after = self.erasures_committed();
        let mut tx = self.handle().begin_write()?;
        tx.set_quick_repair(QUICK_REPAIR);
        Ok(Live::new(tx, &self.live, began_after))
    }

    pub(super) fn read(&self) -> Result<Live<ReadTransaction>> {
        let began_after = self.erasures_committed();
        let tx = self.handle().begin_read().db()?;
        Ok(Live::new(tx, &self.live, began_after))
    }

    /// How many erasures this handle committed ([`LiveCounts::erasures`]).
    fn erasures_committed(&self) -> u64 {
        self.live.erasures.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The redb handle, for beginning a transaction (held only that long: transactions do not
    /// borrow it).
    pub(super) fn handle(&self) -> std::sync::RwLockReadGuard<'_, Handle> {
        self.handle
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the storage engine's own check and repair of the file through this handle, once no
    /// transaction of it runs: every page of the committed trees against its checksum, and the
    /// allocator state redb saves for a quick open, rewritten when it disagrees with the trees.
    /// A repair calls it after rebuilding the tables: a damaged page of that saved state survives
    /// the rebuild's commit, and only the next open (the next `fsck`) would find it. Other
    /// readers (a daemon's clients) are waited for up to [`FILE_CHECK_WAIT`]; a store busy all
    /// that time is left unchecked, with a warning in the log, and the next repair checks it.
    /// Returns whether the check ran (it does not on a read-only or closed handle).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the file fails the check beyond what redb repairs; storage errors.
    pub(super) fn repair_file_state(&self) -> Result<bool> {
        let started = std::time::Instant::now();
        loop {
            let mut handle = self
                .handle
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.live.running.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return match &mut *handle {
                    Handle::ReadWrite(db) => match db.check_integrity() {
                        Err(redb::DatabaseError::TransactionInProgress) => Ok(false),
                        checked => checked.db().map(|_| true),
                    },
                    _ => Ok(false),
                };
            }
            drop(handle);
            if started.elapsed() >= FILE_CHECK_WAIT {
                tracing::warn!(
                    "the store file's own check after the rebuild was skipped: other \
                     transactions kept running for {} s",
                    FILE_CHECK_WAIT.as_secs()
                );
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Drops the handle and opens the store file again, after a panic inside redb: its
    /// in-memory state may be what the panic left half-changed, and a fresh handle reads the
    /// file as it is. The damage flag stays (writes are refused until repair). While any
    /// transaction of the old handle is still running, nothing happens and the next guarded call
    /// tries again. A store in memory is never reopened (its data lives in the handle).
    pub(super) fn reopen(&self) {
        use std::sync::atomic::Ordering;
        let Some(dir) = &self.dir else {
            self.reopen_pending.store(false, Ordering::SeqCst);
            return;
        };
        let path = dir.join(DB_FILE);
        let mut handle = self
            .handle
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A transaction still running on the old handle would go on reading (or committing to)
        // the file under a fresh handle that does not know it: wait until none is.
        if self.live.running.load(Ordering::SeqCst) > 0 {
            return;
        }
        // A deferred store that has not written yet reopens as it was: read-only.
        let read_only = self.reads_only_now();
        let old = std::mem::replace(&mut *handle, Handle::Closed);
        let quiet = std::sync::atomic::AtomicBool::new(false);
        guard::close_without_writing(old);
        self.lazy.closed_without_writing();
        for _ in 0..50 {
            let opened = guard::guarded(&quiet, "reopening the store", || {
                let mut builder = Database::builder();
                builder.set_cache_size(CACHE_BYTES);
                Ok(if read_only {
                    builder.open_read_only(&path).map(Handle::ReadOnly)
                } else {
                    builder.open(&path).map(Handle::ReadWrite)
                })
            });
            match opened {
                Ok(Ok(fresh)) => {
                    *handle = fresh;
                    self.reopen_pending.store(false, Ordering::SeqCst);
                    self.reopens.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(Err(redb::DatabaseError::DatabaseAlreadyOpen)) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                // A repair that could not write either is still that full disk; anything else
                // (the file is damaged) is not, and is said as such from now on.
                Ok(Err(e)) if full_write(&e).is_some() => return,
                Ok(Err(_)) | Err(_) => {
                    self.write_failed.store(false, Ordering::SeqCst);
                    return;
                }
            }
        }
    }
}

/// `err`, a failure of the first read of the store file at `path`, as damage when it is a
/// storage engine error and the file's pages fail their checksums: redb returns some damage as
/// plain errors (a name in its table tree that is not UTF-8, in one case), which would
/// otherwise reach the user as a storage failure with nothing saying the file is damaged.
fn damage_or(path: &Path, err: Error) -> Error {
    if !matches!(err, Error::Storage { .. }) {
        return err;
    }
    let quiet = std::sync::atomic::AtomicBool::new(false);
    let checked = guard::guarded(&quiet, "checking the store's pages", || {
        fsck::page_damage(path)
    });
    let damage = match checked {
        Ok(found) => found,
        // The check itself failed inside the storage engine: damage too.
        Err(Error::Corrupt { what }) => Some(what),
        Err(_) => None,
    };
    match damage {
        Some(problem) => Error::corrupt(format!(
            "{} cannot be read ({}) and its pages are damaged ({problem}); run `strata fsck`, \
             and if it keeps failing, `{}`",
            path.display(),
            err.full_message(),
            crate::store::damage::SALVAGE
        )),
        None => err,
    }
}

/// The error of a failed open of the store file at `path`: an I/O failure as such, anything
/// else the storage engine refuses (a damaged header, a file that is not a store) as damage.
fn open_error(path: &Path, e: redb::DatabaseError) -> Error {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if !matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Error::io(format!("opening {}", path.display()), io)
        }
        e => Error::corrupt(format!(
            "the storage engine cannot open {} ({e}): the file is damaged or not a strata \
             store; `{}` copies what still verifies into a new store",
            path.display(),
            crate::store::damage::SALVAGE
        )),
    }
}

impl RedbStore {
    /// Opens the existing store in `dir` for reading only: no write to the file, so nothing to
    /// sync (its modes are tightened as [`RedbStore::open`] does). A store that was not closed
    /// cleanly needs a repair, which only a read-write open makes: then this falls back to
    /// [`RedbStore::open`].
    ///
    /// # Errors
    /// As [`RedbStore::open`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_read_first(dir.as_ref(), false)
    }

    /// Opens the existing store in `dir` to write, through a read-only handle until the first
    /// write transaction begins, which then opens the file to write in its place (waiting for the
    /// handle's reads to end). A command that may find nothing to write (an unchanged re-index)
    /// then writes and syncs nothing: redb's open to write syncs the file once, and its close
    /// commits its allocator state, four syncs in all. A store that was not closed cleanly is
    /// opened to write at once ([`RedbStore::open`]), which repairs it.
    ///
    /// # Errors
    /// As [`RedbStore::open`].
    pub fn open_deferred(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_read_first(dir.as_ref(), true)
    }

    /// [`RedbStore::open_read_only`], or [`RedbStore::open_deferred`] when `deferred`.
    fn open_read_first(dir: &Path, deferred: bool) -> Result<Self> {
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return RedbStore::open(dir);
        }
        private::tighten_store(dir)?;
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        match builder.open_read_only(&path) {
            Ok(db) => {
                let store = RedbStore {
                    handle: std::sync::RwLock::new(Handle::ReadOnly(db)),
                    read_only: !deferred,
                    deferred: std::sync::atomic::AtomicBool::new(deferred),
                    deferred_from: std::sync::atomic::AtomicU64::new(0),
                    dir: Some(dir.to_path_buf()),
                    opened: std::sync::Mutex::new((0, 0)),
                    base_cache: docs::BaseCache::default(),
                    damaged: std::sync::atomic::AtomicBool::new(false),
                    damage_reason: std::sync::Mutex::new(None),
                    reopen_pending: std::sync::atomic::AtomicBool::new(false),
                    scrubs: std::sync::Mutex::default(),
                    write_failed: std::sync::atomic::AtomicBool::new(false),
                    writes: std::sync::atomic::AtomicUsize::new(0),
                    latch_waits: std::sync::atomic::AtomicU64::new(0),
                    reopens: std::sync::atomic::AtomicU64::new(0),
                    live: std::sync::Arc::default(),
                    lazy: super::LazyCommits::default(),
                    full_repair: false,
                };
                store.check_format(&path).map_err(|e| damage_or(&path, e))?;
                if deferred {
                    let last = store.log_last().map_err(|e| damage_or(&path, e))?;
                    store
                        .deferred_from
                        .store(last, std::sync::atomic::Ordering::SeqCst);
                }
                store.load_damage();
                Ok(store)
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(Error::StoreLocked {
                path,
                holder: lock_holder(dir),
            }),
            // Not closed cleanly (or anything else a read-only open cannot handle): the normal
            // open repairs it.
            Err(_) => RedbStore::open(dir),
        }
    }
}

/// How long a repair's check of the store file waits for other transactions of the handle to
/// end (a daemon's readers) before it leaves the file unchecked.
const FILE_CHECK_WAIT: std::time::Duration = if cfg!(test) {
    std::time::Duration::from_millis(200)
} else {
    std::time::Duration::from_secs(10)
};

/// The bytes of redb's file header (redb 4.5's `DB_HEADER_SIZE`: the magic number, the god
/// byte and both 128-byte commit slots): every commit writes a new transaction id and root
/// checksum into it.
const REDB_HEADER_BYTES: usize = 320;

/// How long a deferred store's first write waits for the file: for its own reads to end, then for
/// another process that took the file meanwhile (as a command waits for a held store).
const UPGRADE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl RedbStore {
    /// Whether the handle reads only now: opened read-only, or deferred and not written yet.
    pub(super) fn reads_only_now(&self) -> bool {
        self.read_only || self.deferred.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// See [`crate::store::Backend::read_only_state`]: the first [`REDB_HEADER_BYTES`] of the
    /// file, read while the read-only handle is held open (its shared lock kept every writer
    /// out since it opened, so the file's header is the one it read).
    pub(super) fn read_only_state(&self) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt as _;
        if self.damaged.load(std::sync::atomic::Ordering::SeqCst) || !self.reads_only_now() {
            return None;
        }
        let dir = self.dir.as_ref()?;
        // Held while the header is read: the handle cannot be opened to write meanwhile.
        let handle = self.handle();
        if !handle.is_read_only() {
            return None;
        }
        let file = std::fs::File::open(dir.join(DB_FILE)).ok()?;
        let mut header = vec![0; REDB_HEADER_BYTES];
        file.read_exact_at(&mut header, 0).ok()?;
        drop(handle);
        Some(header)
    }

    /// Opens the file of a deferred store to write in place of its read-only handle, once no
    /// transaction of that handle runs (nothing to do for any other store). Another process may
    /// take the file between the two handles: this waits for it as [`UPGRADE_WAIT`] says, and
    /// what it committed meanwhile is read like any concurrent writer's commit.
    ///
    /// # Errors
    /// [`Error::StoreLocked`] when the file stays held; open errors as [`RedbStore::open`]
    /// (the handle is then closed, and later calls fail).
    fn upgrade(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if !self.deferred.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = dir.join(DB_FILE);
        let started = std::time::Instant::now();
        // The handle's own transactions end first (a scan's listing of paths, say): the write
        // lock is taken once none runs, and new ones wait for it.
        let mut handle = loop {
            let handle = self
                .handle
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !self.deferred.load(Ordering::SeqCst) {
                return Ok(());
            }
            if self.live.running.load(Ordering::SeqCst) == 0 {
                break handle;
            }
            drop(handle);
            if started.elapsed() >= UPGRADE_WAIT {
                return Err(Error::invariant(
                    "a deferred store's first write waited a minute for its own reads to end",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        // The read-only handle's file locks go with it, before the file is opened again.
        drop(std::mem::replace(&mut *handle, Handle::Closed));
        let db = loop {
            match open_writable(dir, &path, false) {
                Ok((db, _)) => break db,
                Err(Error::StoreLocked { .. }) if started.elapsed() < UPGRADE_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(err) => {
                    // Read on as before when the file can still be read (best effort).
                    let mut builder = Database::builder();
                    builder.set_cache_size(CACHE_BYTES);
                    if let Ok(db) = builder.open_read_only(&path) {
                        *handle = Handle::ReadOnly(db);
                    }
                    return Err(err);
                }
            }
        };
        *handle = Handle::ReadWrite(db);
        *self
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = file_size(&path);
        self.deferred.store(false, Ordering::SeqCst);
        drop(handle);
        write_lock_file(dir)?;
        // A format 3 file is marked format 4 by its first open to write.
        self.check_format(&path)?;
        // What was read before may be stale when another process committed in between: the
        // write is refused, before anything of it is made, so that the caller plans again (the
        // handle now writes, so a second attempt reads the file as it is).
        let (then, now) = (self.deferred_from.load(Ordering::SeqCst), self.log_last()?);
        if now != then {
            return Err(Error::Conflict {
                entity: crate::store::WRITTEN_MEANWHILE.to_string(),
                expected: format!(
                    "its log ending at tx {then}, as this command read it before writing"
                ),
                actual: format!(
                    "tx {now}: another process wrote meanwhile; nothing was written, run the \
                     command again"
                ),
            });
        }
        Ok(())
    }

    /// The last transaction in the log (0 when there is none).
    fn log_last(&self) -> Result<u64> {
        let rtx = self.read()?;
        let tx_log = match rtx.open_table(TX_LOG) {
            Ok(table) => table,
            // A file opened read-only before its first write may not have made the table yet.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(e).db(),
        };
        Ok(tx_log.last().db()?.map_or(0, |(k, _)| k.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};
    use crate::store::{Backend, Op, Origin};
    use std::sync::atomic::Ordering;

    /// The file as a crash would leave it now: a copy taken while the store is open (every
    /// commit so far is written), opened on its own (redb repairs it as it opens).
    fn crash_copy(store: &RedbStore, scratch: &Path, name: &str) -> Result<RedbStore> {
        let copy = scratch.join(name);
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy).map_err(|e| Error::io("mkdir", e))?;
        let from = store.dir.as_ref().map(|d| d.join(DB_FILE));
        let from = from.ok_or_else(|| Error::invariant("a store on disk has a directory"))?;
        std::fs::copy(from, copy.join(DB_FILE)).map_err(|e| Error::io("copy", e))?;
        RedbStore::open(&copy)
    }

    /// Whether opening [`crash_copy`] of `store` took a full repair.
    fn crash_copy_needs_full_repair(store: &RedbStore, scratch: &Path) -> Result<bool> {
        Ok(crash_copy(store, scratch, "copy")?.full_repair_on_open())
    }

    /// A group commit's request that writes the text file `path`.
    fn request(path: &str) -> Result<crate::store::TxRequest> {
        let source = FilesystemSource {
            filesystem_id: "fs".into(),
            path: path.into(),
        };
        Ok(crate::store::TxRequest {
            ops: vec![Op::put(Object::file_text(source, path.into())?)],
            origin: Origin::Cli,
            stat: None,
        })
    }

    /// The first error of a group commit's results.
    fn committed(results: Vec<Result<Option<crate::store::TxReceipt>>>) -> Result<()> {
        for r in results {
            r?;
        }
        Ok(())
    }

    /// The header and the rows a read-only handle finds in the store file of `dir`: the state
    /// the stat file beside the store is kept for, and what it stands for.
    fn state_and_log(dir: &Path) -> Result<(Option<Vec<u8>>, usize)> {
        let store = RedbStore::open_read_only(dir)?;
        Ok((store.read_only_state(), store.log(None, usize::MAX)?.len()))
    }

    /// The stat file (`stat.cache`) is taken when `read_only_state` names the state it was kept
    /// for: a header seen again must mean the rows it was kept with. Lazy commits
    /// (`Durability::None`) write no header; a crash after them (a copy of the live file) rolls
    /// back to the last durable commit, and a clean close makes them durable under a new header.
    #[test]
    fn a_state_seen_again_after_lazy_commits_names_the_same_rows() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let scratch = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let store = RedbStore::create(tmp.path())?;
            committed(Backend::transact_group(&store, vec![request("/a")?]))?;
        }
        let (before, rows) = state_and_log(tmp.path())?;
        assert!(before.is_some());
        assert_eq!(rows, 1);
        let store = RedbStore::open(tmp.path())?;
        committed(store.transact_group_lazily(vec![request("/b")?]))?;
        committed(store.transact_group_lazily(vec![request("/c")?]))?;
        // The raw file as a crash leaves it, opened read-only first as a scan opens it.
        let raw = scratch.path().join("raw");
        std::fs::create_dir_all(&raw).map_err(|e| Error::io("mkdir", e))?;
        std::fs::copy(tmp.path().join(DB_FILE), raw.join(DB_FILE))
            .map_err(|e| Error::io("copy", e))?;
        // Not closed cleanly: opened to write (and repaired), so no state to take a file for.
        let (state, rows) = state_and_log(&raw)?;
        assert!(state.is_none(), "{rows} rows");
        // Repaired and closed, then read-only again.
        drop(crash_copy(&store, scratch.path(), "repaired")?);
        let (state, rows) = state_and_log(&scratch.path().join("repaired"))?;
        assert!(state.is_some());
        assert!(
            state != before || rows == 1,
            "the repaired file's header is the one before the lazy commits, with {rows} rows"
        );
        // The live store closed cleanly: its lazy commits are durable, under another header.
        drop(store);
        let (state, rows) = state_and_log(tmp.path())?;
        assert_eq!(rows, 3);
        assert!(state.is_some() && state != before);
        Ok(())
    }

    /// What `read_only_state` rests on: while a handle that only reads is open, no handle can
    /// open the file to write (and none can while a writer holds it), so its header names the
    /// rows it reads for as long as it is open.
    #[test]
    fn no_writer_opens_beside_a_handle_that_only_reads() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        drop(RedbStore::create(tmp.path())?);
        for deferred in [false, true] {
            let reader = if deferred {
                RedbStore::open_deferred(tmp.path())?
            } else {
                RedbStore::open_read_only(tmp.path())?
            };
            let state = reader.read_only_state();
            assert!(state.is_some());
            assert!(matches!(
                RedbStore::open(tmp.path()),
                Err(Error::StoreLocked { .. })
            ));
            assert!(redb::Database::open(tmp.path().join(DB_FILE)).is_err());
            assert_eq!(reader.read_only_state(), state);
        }
        let writer = RedbStore::open(tmp.path())?;
        assert!(writer.read_only_state().is_none());
        assert!(RedbStore::open_read_only(tmp.path()).is_err());
        assert!(redb::ReadOnlyDatabase::open(tmp.path().join(DB_FILE)).is_err());
        Ok(())
    }

    /// A commit under load leaves out the quick-repair record, so a crash right after it means a
    /// full repair at the next open; a checkpointed commit, or a sync after it, does not.
    #[test]
    fn a_commit_under_load_needs_a_full_repair_after_a_crash_until_a_sync() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let scratch = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(tmp.path())?;
        committed(Backend::transact_group(
            &store,
            vec![request("/a")?, request("/b")?],
        ))?;
        assert!(!crash_copy_needs_full_repair(&store, scratch.path())?);
        committed(store.transact_group_under_load(vec![request("/c")?, request("/d")?]))?;
        assert!(crash_copy_needs_full_repair(&store, scratch.path())?);
        store.sync()?;
        assert!(!crash_copy_needs_full_repair(&store, scratch.path())?);
        committed(store.transact_group_under_load(vec![request("/e")?]))?;
        committed(Backend::transact_group(&store, vec![request("/f")?]))?;
        assert!(
            !crash_copy_needs_full_repair(&store, scratch.path())?,
            "the last commit was checkpointed"
        );
        // What the repaired copy holds is every commit.
        committed(store.transact_group_under_load(vec![request("/g")?]))?;
        let reopened = crash_copy(&store, scratch.path(), "last")?;
        assert!(reopened.full_repair_on_open());
        assert_eq!(reopened.log(None, usize::MAX)?.len(), 7);
        assert!(reopened.fsck().is_empty());
        Ok(())
    }

    #[test]
    pub(super) fn a_read_only_store_reads_and_refuses_writes() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let source = FilesystemSource {
            filesystem_id: "fs".into(),
            path: "/a.txt".into(),
        };
        let object = Object::file_text(source, "a".into())?;
        let id = object.id().to_string();
        {
            let store = RedbStore::create(tmp.path())?;
            store.transact(vec![Op::put(object.clone())], Origin::Cli)?;
        }
        let before = std::fs::read(tmp.path().join(DB_FILE)).map_err(|e| Error::io("read", e))?;
        {
            let store = RedbStore::open_read_only(tmp.path())?;
            assert!(store.is_read_only());
            let got = store.get(&id)?.and_then(|v| v.object);
            assert_eq!(got.as_ref(), Some(&object));
            let err = store
                .transact(vec![Op::delete(id.clone())], Origin::Cli)
                .map(|_| ())
                .unwrap_err();
            assert!(err.to_string().contains("read-only"), "{err}");
            // Two readers at once are fine.
            let second = RedbStore::open_read_only(tmp.path())?;
            assert!(second.get(&id)?.is_some());
        }
        let after = std::fs::read(tmp.path().join(DB_FILE)).map_err(|e| Error::io("read", e))?;
        assert!(before == after, "a read-only open left the file as it was");
        assert!(
            !tmp.path().join(super::super::LOCK_FILE).exists(),
            "readers write no lock file (it names the writer)"
        );
        Ok(())
    }

    /// A deferred store reads through a read-only handle: closed without a write, it leaves the
    /// file byte for byte as it was and writes no lock file; its first write opens the file to
    /// write (after its own running read ends), commits, and closes as any writer does.
    #[test]
    fn a_deferred_store_writes_nothing_until_its_first_write() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let read = || std::fs::read(tmp.path().join(DB_FILE)).map_err(|e| Error::io("read", e));
        let lock = tmp.path().join(super::super::LOCK_FILE);
        let first = {
            let store = RedbStore::create(tmp.path())?;
            put(&store, "/a.txt")?
        };
        let before = read()?;
        {
            let store = RedbStore::open_deferred(tmp.path())?;
            assert!(!store.is_read_only(), "a deferred store is one to write");
            assert!(store.reads_only_now());
            assert!(Backend::get(&store, &first)?.is_some());
        }
        assert!(
            read()? == before,
            "a deferred store that wrote nothing left the file as it was"
        );
        assert!(!lock.exists(), "no lock file before the first write");

        let store = std::sync::Arc::new(RedbStore::open_deferred(tmp.path())?);
        // A read of the read-only handle runs while another thread begins to write: the write
        // waits for it, then opens the file to write.
        let (reading, read_done) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        );
        let reader = {
            let (store, reading, read_done) = (
                std::sync::Arc::clone(&store),
                std::sync::Arc::clone(&reading),
                std::sync::Arc::clone(&read_done),
            );
            std::thread::spawn(move || -> Result<()> {
                let tx = store.read()?;
                reading.wait();
                std::thread::sleep(std::time::Duration::from_millis(100));
                let meta = tx.open_table(META).db()?;
                assert!(meta.get("format_version").db()?.is_some());
                read_done.store(true, Ordering::SeqCst);
                Ok(())
            })
        };
        reading.wait();
        let second = put(&store, "/b.txt")?;
        assert!(
            read_done.load(Ordering::SeqCst),
            "the write waited for the read"
        );
        reader
            .join()
            .map_err(|_| Error::invariant("the reader panicked"))??;
        assert!(!store.reads_only_now());
        assert!(lock.exists(), "the writer's lock file");
        assert!(Backend::get(&*store, &second)?.is_some());
        drop(store);
        assert!(!lock.exists());
        let again = RedbStore::open_read_only(tmp.path())?;
        assert!(Backend::get(&again, &first)?.is_some());
        assert!(Backend::get(&again, &second)?.is_some());
        assert!(again.fsck().is_empty());
        Ok(())
    }

    /// A handle that met damage closes without redb's close-time commit: the file is left
    /// byte for byte as its last commit wrote it (a healthy close writes more), its lock is
    /// released, and the next open reads what was committed.
    #[test]
    fn a_damaged_handle_closes_without_writing_and_frees_the_file() -> Result<()> {
        let read = |dir: &Path| std::fs::read(dir.join(DB_FILE)).map_err(|e| Error::io("read", e));
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (healthy, damaged) = (tmp.path().join("healthy"), tmp.path().join("damaged"));
        let mut ids = Vec::new();
        for (dir, damage) in [(&healthy, false), (&damaged, true)] {
            let store = RedbStore::create(dir)?;
            ids.push(put(&store, "/a.txt")?);
            let committed = read(dir)?;
            store.damaged.store(damage, Ordering::SeqCst);
            drop(store);
            assert_eq!(read(dir)? == committed, damage, "damaged: {damage}");
            let again = RedbStore::open(dir)?;
            assert!(Backend::get(&again, &ids[ids.len() - 1])?.is_some());
        }
        Ok(())
    }

    /// A storage error at open is reported as damage only when the file's pages are damaged.
    #[test]
    fn a_storage_error_at_open_is_damage_when_the_pages_are_damaged() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let store = RedbStore::create(tmp.path())?;
            for n in 0..20 {
                put(&store, &format!("/f{n}.txt"))?;
            }
        }
        let path = tmp.path().join(DB_FILE);
        let failure = || Error::storage("redb", std::io::Error::other("a read failed"));
        assert_eq!(damage_or(&path, failure()).kind(), "storage");
        let missing = Error::not_found("x");
        assert_eq!(damage_or(&path, missing).kind(), "not_found");
        let mut bytes = std::fs::read(&path).map_err(|e| Error::io("read", e))?;
        for page in (4096..bytes.len()).step_by(4096) {
            if let Some(byte) = bytes.get_mut(page + 100) {
                *byte ^= 0x5a;
            }
        }
        std::fs::write(&path, bytes).map_err(|e| Error::io("write", e))?;
        let err = damage_or(&path, failure());
        assert_eq!(err.kind(), "corrupt", "{err}");
        assert!(err.to_string().contains("a read failed"), "{err}");
        Ok(())
    }

    /// A backend in memory whose writes fail with ENOSPC while `full` is set: a disk that filled
    /// up (the file's length still grows; its pages are written at the commit).
    #[derive(Debug)]
    struct Filling {
        inner: redb::backends::InMemoryBackend,
        full: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl redb::StorageBackend for Filling {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            if self.full.load(Ordering::SeqCst) {
                return Err(std::io::Error::from_raw_os_error(
                    rustix::io::Errno::NOSPC.raw_os_error(),
                ));
            }
            self.inner.write(offset, data)
        }
    }

    /// A group commit whose commit finds the disk full answers every request of the group with
    /// the full-disk error, and a read after it (redb's handle then answers `PreviousIo`) says
    /// the same: the store is not marked damaged. Failed before: the commit's error became a
    /// plain storage error ("committing a group"), and the read's `PreviousIo` damage.
    #[test]
    fn a_group_commit_that_finds_the_disk_full_says_so_and_is_not_damage() -> Result<()> {
        let full = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let store = RedbStore::on_backend(Filling {
            inner: redb::backends::InMemoryBackend::new(),
            full: std::sync::Arc::clone(&full),
        })?;
        let id = put(&store, "/a")?;
        full.store(true, Ordering::SeqCst);
        let request = |path: &str| -> Result<crate::store::TxRequest> {
            let object = Object::text_at(path)?;
            Ok(crate::store::TxRequest {
                ops: vec![Op::put(object)],
                origin: Origin::Cli,
                stat: None,
            })
        };
        let results = Backend::transact_group(&store, vec![request("/b")?, request("/c")?]);
        assert_eq!(results.len(), 2);
        for result in &results {
            assert!(
                result.as_ref().is_err_and(super::super::is_store_full),
                "{result:?}"
            );
        }
        // A read answers what redb holds, or says the disk is full; a write says it is.
        let read = Backend::entity(&store, &id).map(|_| ());
        assert!(
            read.as_ref()
                .map_or_else(super::super::is_store_full, |()| true),
            "{read:?}"
        );
        let write = put(&store, "/d");
        assert!(
            write.as_ref().is_err_and(super::super::is_store_full),
            "{write:?}"
        );
        assert!(!store.damaged.load(Ordering::SeqCst), "marked damaged");
        Ok(())
    }

    /// A reopen after a write that found no room closes the handle without writing, which loses
    /// the lazy commits not yet made durable: the loss is counted (an index run whose batches
    /// they were then fails) rather than the next sync answering as if they were kept. Failed
    /// before: the sync succeeded and the lazily committed entity was gone.
    #[test]
    fn a_reopen_that_loses_lazy_commits_counts_the_loss() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(dir.path())?;
        put(&store, "/a")?;
        let object = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/lazy".into(),
            },
            "text".into(),
        )?;
        let request = crate::store::TxRequest {
            ops: vec![Op::put(object)],
            origin: Origin::Cli,
            stat: None,
        };
        let results = Backend::transact_group_lazily(&store, vec![request]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(Backend::lazy_commits_lost(&store), 0);
        assert_eq!(Backend::live_entities(&store)?.len(), 2);
        // A write found no room: the next call reopens the handle.
        store.note_full_write();
        Backend::sync(&store)?;
        assert_eq!(
            Backend::live_entities(&store)?.len(),
            1,
            "the lazy commit was lost"
        );
        assert_eq!(store.reopens.load(Ordering::SeqCst), 1, "reopened");
        assert_eq!(Backend::lazy_commits_lost(&store), 1, "the loss counted");
        // A reopen with nothing lazy pending loses nothing.
        store.note_full_write();
        put(&store, "/b")?;
        assert_eq!(store.reopens.load(Ordering::SeqCst), 2, "reopened");
        assert_eq!(Backend::lazy_commits_lost(&store), 1);
        Ok(())
    }

    /// A reopen after a write that found no room that fails for another reason (the file's
    /// header is damaged) says the file is damaged, not the disk full: failed before, every
    /// later call said "the disk is full" for the handle's life (no write could succeed to
    /// clear it), and the damage was never reported.
    #[test]
    fn a_reopen_after_a_full_write_that_meets_damage_says_damage() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(dir.path())?;
        let id = put(&store, "/a")?;
        store.note_full_write();
        {
            use std::io::{Seek, Write};
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join(DB_FILE))
                .map_err(|e| Error::io("opening the file", e))?;
            file.seek(std::io::SeekFrom::Start(0))
                .and_then(|_| file.write_all(&[0x5a; 64]))
                .map_err(|e| Error::io("damaging the file", e))?;
        }
        for _ in 0..2 {
            let read = Backend::version_info(&store, &id, None, None);
            assert!(
                matches!(read, Err(Error::Corrupt { .. })),
                "{:?}",
                read.map(|_| ())
            );
        }
        Ok(())
    }

    fn put(store: &RedbStore, path: &str) -> Result<String> {
        let object = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            "text".into(),
        )?;
        let id = object.id().to_string();
        Backend::transact(store, vec![Op::put(object)], Origin::Cli)?;
        Ok(id)
    }

    #[test]
    fn a_panic_inside_the_storage_engine_reopens_the_handle_and_refuses_writes() -> Result<()> {
        guard::quiet_panics();
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(dir.path())?;
        let id = put(&store, "/a")?;

        let failed: Result<()> =
            store.guarded("reading a page", || panic!("entered unreachable code"));
        assert!(matches!(failed, Err(Error::Corrupt { .. })), "{failed:?}");
        assert_eq!(store.reopens.load(Ordering::SeqCst), 1, "reopened at once");
        assert!(Backend::version_info(&store, &id, None, None)?.is_some());
        assert!(
            matches!(put(&store, "/b"), Err(Error::Corrupt { .. })),
            "writes refused"
        );

        // A read transaction held across the panic keeps the old handle: the first call after
        // it ends reopens it.
        let held = store.read()?;
        let failed: Result<()> = store.guarded("reading a page", || panic!("out of range"));
        assert!(failed.is_err());
        assert_eq!(
            store.reopens.load(Ordering::SeqCst),
            1,
            "not while a reader holds it"
        );
        assert!(store.reopen_pending.load(Ordering::SeqCst));
        drop(held);
        assert!(Backend::version_info(&store, &id, None, None)?.is_some());
        assert_eq!(store.reopens.load(Ordering::SeqCst), 2);
        assert!(!store.reopen_pending.load(Ordering::SeqCst));
        Ok(())
    }

    /// Rewrites the store file at `path` as format 7 wrote it: every op body naming its file's
    /// filesystem in full, no header listing filesystems, every version row holding its object
    /// hash, no `meta[FS_IN_HEADERS_SINCE]`, `meta[SHORT_ENTITY_KEYS_SINCE]` or
    /// `meta[DOC_SEQS_SINCE]`.
    fn make_format_7(path: &Path) -> Result<()> {
        let db = Database::open(path.join(DB_FILE)).db()?;
        // Format 7's version rows: the hash in each.
        let mut rows = Vec::new();
        {
            let rtx = db.begin_read().db()?;
            let r = ReadTables::open(&rtx)?;
            for entry in r.versions.iter().db()? {
                let (key, value) = entry.db()?;
                let rec = super::docs::version_rec(value.value(), &r.docs(), "v")?;
                rows.push((key.value(), codec::encode(&rec)?));
            }
        }
        // Format 7's entity keys: whole.
        let mut whole = Vec::new();
        {
            let rtx = db.begin_read().db()?;
            let entities = super::entity::ReadEntities::open(&rtx)?;
            for entry in entities.entities.iter().db()? {
                let (key, value) = entry.db()?;
                let id = super::entity::id_of_row(&entities, key.value(), value.value())?;
                whole.push((
                    key.value().to_vec(),
                    codec::id_key(&id),
                    value.value().to_vec(),
                ));
            }
        }
        let wtx = db.begin_write().db()?;
        {
            let mut versions = wtx.open_table(VERSIONS).db()?;
            for (key, value) in rows {
                versions.insert(key, value.as_slice()).db()?;
            }
        }
        {
            let mut entities = wtx.open_table(ENTITIES).db()?;
            for (key, id_key, value) in whole {
                entities.remove(key.as_slice()).db()?;
                entities.insert(id_key.as_slice(), value.as_slice()).db()?;
            }
        }
        {
            let mut log = wtx.open_table(TX_LOG).db()?;
            let mut ops = wtx.open_table(TX_OPS).db()?;
            let mut headers = Vec::new();
            for entry in log.iter().db()? {
                let (k, v) = entry.db()?;
                headers.push((k.value(), codec::decode_header(v.value(), "h")?));
            }
            for (tx, mut header) in headers {
                for n in 0..header.digests.len() as u32 {
                    let body = ops.get((tx, n)).db()?.map(|v| v.value().to_vec());
                    let Some(body) = body else { continue };
                    let op = codec::decode_op(&body, header.tx_time, &header.filesystems, "op")?;
                    ops.insert((tx, n), codec::encode_op(&op, header.tx_time)?.as_slice())
                        .db()?;
                }
                header.filesystems.clear();
                log.insert(tx, codec::encode_header(&header)?.as_slice())
                    .db()?;
            }
            let mut meta = wtx.open_table(META).db()?;
            meta.insert("format_version", 7u32.to_le_bytes().as_slice())
                .db()?;
            meta.remove(FS_IN_HEADERS_SINCE).db()?;
            meta.remove(SHORT_ENTITY_KEYS_SINCE).db()?;
            meta.remove(DOC_SEQS_SINCE).db()?;
        }
        wtx.commit().db()
    }

    /// The lengths of the `entities` keys of the store file at `path`, sorted.
    fn entity_key_lengths(path: &Path) -> Result<Vec<usize>> {
        let db = ReadOnlyDatabase::open(path.join(DB_FILE)).db()?;
        let rtx = db.begin_read().db()?;
        let mut out = Vec::new();
        for entry in rtx.open_table(ENTITIES).db()?.iter().db()? {
            out.push(entry.db()?.0.value().len());
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The number of version rows of the store file at `path` that hold their object hash, and
    /// of those that name their document by number; `meta[DOC_SEQS_SINCE]`.
    fn version_forms(path: &Path) -> Result<(usize, usize, Option<u64>)> {
        let db = ReadOnlyDatabase::open(path.join(DB_FILE)).db()?;
        let rtx = db.begin_read().db()?;
        let (mut hashes, mut numbers) = (0, 0);
        for entry in rtx.open_table(VERSIONS).db()?.iter().db()? {
            match codec::decode_version(entry.db()?.1.value(), "v")?.1 {
                Some(_) => numbers += 1,
                None => hashes += 1,
            }
        }
        let meta = rtx.open_table(META).db()?;
        let since = match meta.get(DOC_SEQS_SINCE).db()? {
            Some(_) => Some(read_counter(&meta, DOC_SEQS_SINCE)?),
            None => None,
        };
        Ok((hashes, numbers, since))
    }

    /// The filesystems each transaction's log header lists, and the store's format version
    /// and `meta[FS_IN_HEADERS_SINCE]`.
    fn listed(path: &Path) -> Result<(Vec<usize>, u32, Option<u64>)> {
        let db = ReadOnlyDatabase::open(path.join(DB_FILE)).db()?;
        let rtx = db.begin_read().db()?;
        let mut lists = Vec::new();
        for entry in rtx.open_table(TX_LOG).db()?.iter().db()? {
            let (_, v) = entry.db()?;
            lists.push(codec::decode_header(v.value(), "h")?.filesystems.len());
        }
        let meta = rtx.open_table(META).db()?;
        let version = match meta.get("format_version").db()? {
            Some(v) => v.value().first().copied().map_or(0, u32::from),
            None => 0,
        };
        let since = match meta.get(FS_IN_HEADERS_SINCE).db()? {
            Some(_) => Some(read_counter(&meta, FS_IN_HEADERS_SINCE)?),
            None => None,
        };
        Ok((lists, version, since))
    }

    /// A file's version rows name their document by number, another object's (whose document
    /// may be a delta) keeps its hash; a row naming another file's document is found by fsck,
    /// refused by a read, and mended by a rebuild.
    #[test]
    fn file_rows_name_documents_by_number_and_a_wrong_number_is_found() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let file = |p: &str, text: &str| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: "fs".into(),
                    path: p.into(),
                },
                text.into(),
            )
        };
        let (a, b) = (file("/a.rs", "a1")?, file("/b.rs", "b1")?);
        let (a_id, b_id) = (a.id().to_string(), b.id().to_string());
        let config = Object::session_config("session_config:s1", "{\"format\":1}".into())?;
        {
            let store = RedbStore::create(&path)?;
            store.transact(vec![Op::put(a), Op::put(b), Op::put(config)], Origin::Cli)?;
        }
        assert_eq!(version_forms(&path)?, (1, 2, Some(1)));
        // a's and b's rows swap their numbers.
        rewrite_file(&path, |wtx| {
            let mut versions = wtx.open_table(VERSIONS).db()?;
            let mut numbered = Vec::new();
            for entry in versions.iter().db()? {
                let (k, v) = entry.db()?;
                if codec::decode_version(v.value(), "v")?.1.is_some() {
                    numbered.push((k.value(), v.value().to_vec()));
                }
            }
            let [(ka, va), (kb, vb)] = numbered.as_slice() else {
                return Err(Error::corrupt("two numbered rows"));
            };
            versions.insert(*ka, vb.as_slice()).db()?;
            versions.insert(*kb, va.as_slice()).db()?;
            Ok(())
        })?;
        let content = |store: &RedbStore, id: &str| -> Result<Option<String>> {
            Ok(store
                .as_of(id, None, None)?
                .and_then(|v| v.object)
                .and_then(|o| o.content().map(str::to_string)))
        };
        let store = RedbStore::open(&path)?;
        let findings = store.fsck();
        assert_eq!(
            findings.iter().filter(|f| f.kind == "versions").count(),
            2,
            "{findings:?}"
        );
        assert!(matches!(content(&store, &a_id), Err(Error::Corrupt { .. })));
        store.fsck_rebuild()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert_eq!(content(&store, &a_id)?.as_deref(), Some("a1"));
        assert_eq!(content(&store, &b_id)?.as_deref(), Some("b1"));
        Ok(())
    }

    /// A file object at path `p` holding `text` (the tests of version rows by number).
    fn text_file(p: &str, text: &str) -> Result<Object> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: p.into(),
            },
            text.into(),
        )
    }

    /// The text content of `id` as of now.
    fn text_of(store: &RedbStore, id: &str) -> Result<Option<String>> {
        Ok(store
            .as_of(id, None, None)?
            .and_then(|v| v.object)
            .and_then(|o| o.content().map(str::to_string)))
    }

    /// Runs `change` in one write transaction on the closed store file at `path`, through
    /// redb alone (as damage would: no strata check runs), and commits it.
    fn rewrite_file(
        path: &Path,
        change: impl FnOnce(&redb::WriteTransaction) -> Result<()>,
    ) -> Result<()> {
        let db = Database::open(path.join(DB_FILE)).db()?;
        let wtx = db.begin_write().db()?;
        change(&wtx)?;
        wtx.commit().db()
    }

    /// Rewrites every version row of the store file at `path` that names its document by
    /// number with `f` of its record and number.
    fn renumber(path: &Path, f: impl Fn(u64) -> u64) -> Result<()> {
        rewrite_file(path, |wtx| {
            let mut versions = wtx.open_table(VERSIONS).db()?;
            let mut rows = Vec::new();
            for entry in versions.iter().db()? {
                let (k, v) = entry.db()?;
                if let (rec, Some(seq)) = codec::decode_version(v.value(), "v")? {
                    rows.push((k.value(), codec::encode_version_at(&rec, f(seq))?));
                }
            }
            for (k, v) in rows {
                versions.insert(k, v.as_slice()).db()?;
            }
            Ok(())
        })
    }

    /// Two files with one document (same text, another path), a third evicted and its
    /// document's number taken by a later one: every row by number still names its own
    /// document, through reads, fsck, a rebuild, gc and the other file's eviction.
    #[test]
    fn a_shared_document_and_a_reused_number_keep_every_file_right() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let (a, b) = (text_file("/a.rs", "same")?, text_file("/b.rs", "same")?);
        let (c, d) = (text_file("/c.rs", "c1")?, text_file("/d.rs", "d1")?);
        let ids: Vec<String> = [&a, &b, &c, &d]
            .iter()
            .map(|o| o.id().to_string())
            .collect();
        let store = RedbStore::create(&path)?;
        store.transact(vec![Op::put(a), Op::put(b)], Origin::Cli)?;
        // One document for both paths.
        assert_eq!(store.read()?.open_table(DOC_INDEX).db()?.len().db()?, 1);
        store.transact(vec![Op::put(c)], Origin::Cli)?;
        store.evict(&ids[2], Origin::Cli)?;
        store.transact(vec![Op::put(d)], Origin::Cli)?;
        let check = |store: &RedbStore, a_live: bool| -> Result<()> {
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            if a_live {
                assert_eq!(text_of(store, &ids[0])?.as_deref(), Some("same"));
            }
            assert_eq!(text_of(store, &ids[1])?.as_deref(), Some("same"));
            assert_eq!(text_of(store, &ids[3])?.as_deref(), Some("d1"));
            Ok(())
        };
        check(&store, true)?;
        store.fsck_rebuild()?;
        check(&store, true)?;
        store.evict(&ids[0], Origin::Cli)?;
        check(&store, false)?;
        store.gc()?;
        check(&store, false)?;
        store.fsck_rebuild()?;
        check(&store, false)?;
        drop(store);
        assert_eq!(version_forms(&path)?.1, 2);
        Ok(())
    }

    /// A version row naming a document number past the end is refused by reads and found by
    /// fsck (which goes on checking the rest), and a rebuild mends it.
    #[test]
    fn a_number_past_the_end_is_found_and_mended() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let (a, b) = (text_file("/a.rs", "a1")?, text_file("/b.rs", "b1")?);
        let (a_id, b_id) = (a.id().to_string(), b.id().to_string());
        {
            let store = RedbStore::create(&path)?;
            store.transact(vec![Op::put(a)], Origin::Cli)?;
            store.transact(vec![Op::put(b)], Origin::Cli)?;
        }
        // a's row (number 1) names number 1 000; b's stays.
        renumber(&path, |seq| if seq == 1 { 1_000 } else { seq })?;
        let store = RedbStore::open(&path)?;
        assert!(matches!(text_of(&store, &a_id), Err(Error::Corrupt { .. })));
        assert!(matches!(
            store.history(&a_id, HistoryQuery::default()),
            Err(Error::Corrupt { .. })
        ));
        assert_eq!(text_of(&store, &b_id)?.as_deref(), Some("b1"));
        let findings = store.fsck();
        assert!(
            findings.iter().any(|f| f.kind == "versions"),
            "{findings:?}"
        );
        store.fsck_rebuild()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert_eq!(text_of(&store, &a_id)?.as_deref(), Some("a1"));
        assert_eq!(text_of(&store, &b_id)?.as_deref(), Some("b1"));
        Ok(())
    }

    /// A document record replaced by another file's: the number's recomputed hash is not the
    /// one `doc_index` places there, so reads refuse it and fsck finds it; never the other file.
    #[test]
    fn a_record_replaced_by_another_is_refused_not_read_as_it() -> Result<()> {
        let (_tmp, path, a_id, b_id) = store_of_two_files("a1", "b1")?;
        rewrite_file(&path, |wtx| {
            let mut data = wtx.open_table(DOC_DATA).db()?;
            let second = data
                .get(2u64)
                .db()?
                .map(|v| v.value().to_vec())
                .ok_or_else(|| Error::corrupt("record 2"))?;
            data.insert(1u64, second.as_slice()).db()?;
            Ok(())
        })?;
        let store = RedbStore::open(&path)?;
        let a_text = text_of(&store, &a_id);
        assert!(matches!(a_text, Err(Error::Corrupt { .. })), "{a_text:?}");
        assert_eq!(text_of(&store, &b_id)?.as_deref(), Some("b1"));
        assert!(!store.fsck().is_empty());
        Ok(())
    }

    /// A file's later writes name their document by number too (its entity row, not only its
    /// first write, says it is a file), and a deletion keeps its tombstone row; its history
    /// reads every version.
    #[test]
    fn a_files_later_writes_are_by_number_and_its_history_reads_them() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let id = text_file("/a.rs", "a1")?.id().to_string();
        {
            let store = RedbStore::create(&path)?;
            for text in ["a1", "a2", "a3"] {
                store.transact(vec![Op::put(text_file("/a.rs", text)?)], Origin::Cli)?;
            }
            store.transact(vec![Op::delete(&id)], Origin::Cli)?;
            let history = store.history(&id, HistoryQuery::default())?;
            assert_eq!(history.len(), 4, "{history:?}");
            assert_eq!(
                history.iter().filter(|v| v.object_hash.is_some()).count(),
                3
            );
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        }
        assert_eq!(version_forms(&path)?, (1, 3, Some(1)));
        Ok(())
    }

    /// A new store holding files `/a.rs` and `/b.rs` with these texts, closed: its directory
    /// (kept while the guard lives), its path and the two files' ids.
    fn store_of_two_files(
        a_text: &str,
        b_text: &str,
    ) -> Result<(tempfile::TempDir, std::path::PathBuf, String, String)> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let (a, b) = (text_file("/a.rs", a_text)?, text_file("/b.rs", b_text)?);
        let (a_id, b_id) = (a.id().to_string(), b.id().to_string());
        let store = RedbStore::create(&path)?;
        store.transact(vec![Op::put(a), Op::put(b)], Origin::Cli)?;
        Ok((tmp, path, a_id, b_id))
    }

    /// A document whose count a damage made too low is erased with one of the two files that
    /// use it: the other file's row then names a missing number, refused. A later document
    /// must not take that number (`meta[DOC_NUMBERS_FROM]`): reads would still refuse the row
    /// (their check against the op that wrote it), but a conditional write expecting the new
    /// document on it would pass.
    #[test]
    fn an_erased_documents_number_is_not_given_again() -> Result<()> {
        let (_tmp, path, a_id, b_id) = store_of_two_files("same", "same")?;
        // The shared document counts one reference of its two.
        rewrite_file(&path, |wtx| {
            let mut index = wtx.open_table(DOC_INDEX).db()?;
            let rows: Vec<_> = index
                .iter()
                .db()?
                .map(|e| e.db().map(|(k, v)| (k.value(), v.value())))
                .collect::<Result<_>>()?;
            for (hash, (seq, _, blob)) in rows {
                index.insert(hash, (seq, 1, blob)).db()?;
            }
            Ok(())
        })?;
        let store = RedbStore::open(&path)?;
        store.evict(&a_id, Origin::Cli)?;
        assert!(matches!(text_of(&store, &b_id), Err(Error::Corrupt { .. })));
        let c = text_file("/c.rs", "c1")?;
        let c_id = c.id().to_string();
        store.transact(vec![Op::put(c)], Origin::Cli)?;
        let numbers = |store: &RedbStore| -> Result<Vec<u64>> {
            store
                .read()?
                .open_table(DOC_DATA)
                .db()?
                .iter()
                .db()?
                .map(|e| e.db().map(|(k, _)| k.value()))
                .collect()
        };
        assert_eq!(numbers(&store)?, [2], "number 1 is not given again");
        let b_text = text_of(&store, &b_id);
        assert!(matches!(b_text, Err(Error::Corrupt { .. })), "{b_text:?}");
        let history = store.history(&b_id, HistoryQuery::default());
        assert!(matches!(history, Err(Error::Corrupt { .. })), "{history:?}");
        let meta = store.metadata_many(&[b_id.as_str()], None);
        assert!(matches!(meta, Err(Error::Corrupt { .. })), "{meta:?}");
        // A conditional write expecting the new file's document on the damaged one.
        let matched = store.transact(
            vec![Op::Match {
                entity: b_id.clone(),
                expected: Some(*text_file("/c.rs", "c1")?.object_hash()),
            }],
            Origin::Cli,
        );
        assert!(matches!(matched, Err(Error::Corrupt { .. })), "{matched:?}");
        drop(store);
        let store = RedbStore::open(&path)?;
        store.evict(&c_id, Origin::Cli)?;
        // gc counts every row's document: the row naming no known document stops every
        // removal, and is reported.
        let report = store.gc()?;
        assert_eq!(report.documents_removed + report.blobs_removed, 0);
        assert!(
            report
                .damaged
                .iter()
                .any(|f| f.entity.as_deref() == Some(b_id.as_str())),
            "{report:?}"
        );
        store.transact(vec![Op::put(text_file("/d.rs", "d1")?)], Origin::Cli)?;
        let b_text = text_of(&store, &b_id);
        assert!(matches!(b_text, Err(Error::Corrupt { .. })), "{b_text:?}");
        assert_eq!(
            numbers(&store)?,
            [3],
            "nor 2, after an eviction and a reopen"
        );
        Ok(())
    }

    /// Listing the live entities asks only whether each current row is a tombstone, which a
    /// row by number never is: it reads no document, so a damaged one does not fail it (a
    /// read of that file does).
    #[test]
    fn live_entities_reads_no_document_of_a_row_by_number() -> Result<()> {
        let (_tmp, path, a_id, b_id) = store_of_two_files("a1", "b1")?;
        rewrite_file(&path, |wtx| {
            wtx.open_table(DOC_DATA)
                .db()?
                .insert(1u64, [9u8, 9, 9].as_slice())
                .db()?;
            Ok(())
        })?;
        let store = RedbStore::open(&path)?;
        let mut live: Vec<String> = store.live_entities()?.into_iter().map(|e| e.id).collect();
        live.sort();
        let mut want = vec![a_id.clone(), b_id.clone()];
        want.sort();
        assert_eq!(live, want);
        assert!(matches!(text_of(&store, &a_id), Err(Error::Corrupt { .. })));
        assert_eq!(text_of(&store, &b_id)?.as_deref(), Some("b1"));
        Ok(())
    }

    /// A format-7 file's rows by hash and its later rows by number in one history: a write
    /// back in valid time between them (the write rule reads both forms, and its document is
    /// another file's, by hash in that file's older row), that other file's eviction, fsck, a
    /// rebuild (every file row by number since) and gc keep every answer.
    #[test]
    fn mixed_rows_of_an_upgraded_store_keep_their_history() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let t = |s: i64| Timestamp::saturating_from_micros(s * 1_000_000);
        let (a_id, b_id) = (
            text_file("/a.rs", "x")?.id().to_string(),
            text_file("/b.rs", "x")?.id().to_string(),
        );
        {
            let store = RedbStore::create(&path)?;
            store.transact(
                vec![
                    Op::put_at(text_file("/a.rs", "a1")?, t(100), None),
                    Op::put_at(text_file("/b.rs", "b1")?, t(100), None),
                ],
                Origin::Cli,
            )?;
        }
        make_format_7(&path)?;
        let store = RedbStore::open(&path)?;
        store.transact(
            vec![Op::put_at(text_file("/a.rs", "a3")?, t(300), None)],
            Origin::Cli,
        )?;
        store.transact(
            vec![Op::put_at(text_file("/a.rs", "b1")?, t(200), Some(t(250)))],
            Origin::Cli,
        )?;
        let at = |store: &RedbStore, s: i64| -> Result<Option<String>> {
            Ok(store
                .as_of(&a_id, Some(t(s)), None)?
                .and_then(|v| v.object)
                .and_then(|o| o.content().map(str::to_string)))
        };
        let check = |store: &RedbStore| -> Result<()> {
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            let want = [
                (150, Some("a1")),
                (220, Some("b1")),
                (260, Some("a1")),
                (310, Some("a3")),
            ];
            for (s, text) in want {
                assert_eq!(at(store, s)?.as_deref(), text, "at {s}");
            }
            assert_eq!(store.history(&a_id, HistoryQuery::default())?.len(), 4);
            Ok(())
        };
        check(&store)?;
        drop(store);
        let (hashes, numbers, since) = version_forms(&path)?;
        assert!(
            hashes >= 2 && numbers >= 2 && since == Some(2),
            "{hashes} {numbers} {since:?}"
        );
        let store = RedbStore::open(&path)?;
        store.evict(&b_id, Origin::Cli)?;
        check(&store)?;
        store.fsck_rebuild()?;
        check(&store)?;
        store.gc()?;
        check(&store)?;
        drop(store);
        assert_eq!(
            version_forms(&path)?.0,
            0,
            "rebuilt: every file row by number"
        );
        Ok(())
    }

    /// Timing (run by hand, `--ignored --nocapture`): `metadata_many` and `history` of 5 000
    /// files whose rows name their documents by number, then by hash, in one run.
    #[test]
    #[ignore = "a timing, run by hand"]
    fn time_rows_by_number_against_by_hash() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let files: Vec<Object> = (0..5_000)
            .map(|n| text_file(&format!("/src/f{n}.rs"), &format!("fn f{n}() {{}}\n")))
            .collect::<Result<_>>()?;
        let ids: Vec<String> = files.iter().map(|f| f.id().to_string()).collect();
        {
            let store = RedbStore::create(&path)?;
            store.transact(files.into_iter().map(Op::put).collect(), Origin::Cli)?;
        }
        let time = |label: &str| -> Result<()> {
            let store = RedbStore::open_read_only(&path)?;
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let mut runs = Vec::new();
            for _ in 0..7 {
                let start = std::time::Instant::now();
                store.metadata_many(&refs, None)?;
                runs.push(start.elapsed().as_micros());
            }
            runs.sort_unstable();
            let mut hist = Vec::new();
            for _ in 0..7 {
                let start = std::time::Instant::now();
                for id in &ids[..1_000] {
                    store.history(id, HistoryQuery::default())?;
                }
                hist.push(start.elapsed().as_micros());
            }
            hist.sort_unstable();
            eprintln!(
                "TIMING {label}: metadata_many(5000) median {} us; 1000 histories median {} us",
                runs[3], hist[3]
            );
            Ok(())
        };
        let convert = |by_number: bool| -> Result<()> {
            let db = Database::open(path.join(DB_FILE)).db()?;
            let mut rows = Vec::new();
            {
                let rtx = db.begin_read().db()?;
                let r = ReadTables::open(&rtx)?;
                for entry in r.versions.iter().db()? {
                    let (key, value) = entry.db()?;
                    let rec = super::docs::version_rec(value.value(), &r.docs(), "v")?;
                    let seq = match &rec.object_hash {
                        Some(h) => r.doc_index.get(h).db()?.map(|v| v.value().0),
                        None => None,
                    };
                    rows.push((
                        key.value(),
                        match (by_number, seq) {
                            (true, Some(seq)) => codec::encode_version_at(&rec, seq)?,
                            _ => codec::encode(&rec)?,
                        },
                    ));
                }
            }
            let wtx = db.begin_write().db()?;
            {
                let mut versions = wtx.open_table(VERSIONS).db()?;
                for (key, value) in rows {
                    versions.insert(key, value.as_slice()).db()?;
                }
            }
            wtx.commit().db()
        };
        for _ in 0..3 {
            convert(true)?;
            time("by number")?;
            convert(false)?;
            time("by hash")?;
        }
        Ok(())
    }

    /// A format-7 store (bodies naming their filesystem in full) reads as it is, is marked
    /// format 8 at its first read-write open, writes format 8's bodies after its last
    /// transaction only, and its log, answers, fsck, rebuild, backup and salvage hold.
    #[test]
    fn a_format_7_store_reads_as_it_is_and_lists_filesystems_from_its_next_tx() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let fs1 = "ab".repeat(32);
        let file = |fs: &str, p: &str, text: &str| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: fs.into(),
                    path: p.into(),
                },
                text.into(),
            )
        };
        let (a, b, c) = (
            file(&fs1, "/a.rs", "a1")?,
            file("fs", "/b.rs", "b1")?,
            file(&fs1, "/c.rs", "c1")?,
        );
        let ids = [a.id().to_string(), b.id().to_string(), c.id().to_string()];
        {
            let store = RedbStore::create(&path)?;
            store.transact(vec![Op::put(a), Op::put(b)], Origin::Cli)?;
            store.transact(vec![Op::put(c)], Origin::Cli)?;
        }
        assert_eq!(listed(&path)?, (vec![2, 1], FORMAT_VERSION, Some(1)));
        assert_eq!(
            version_forms(&path)?,
            (0, 3, Some(1)),
            "files' rows name numbers"
        );
        let made = RedbStore::open_read_only(&path)?.log(None, usize::MAX)?;
        make_format_7(&path)?;
        assert_eq!(listed(&path)?, (vec![0, 0], 7, None));
        assert_eq!(version_forms(&path)?, (3, 0, None));
        assert_eq!(entity_key_lengths(&path)?, [33, 33, 33]);
        let answers = |store: &RedbStore| -> Result<Vec<Option<String>>> {
            ids.iter()
                .map(|id| match store.as_of(id, None, None) {
                    Ok(v) => Ok(v
                        .and_then(|v| v.object)
                        .and_then(|o| o.content().map(str::to_string))),
                    Err(Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                })
                .collect()
        };
        {
            let store = RedbStore::open_read_only(&path)?;
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            assert_eq!(
                store.log(None, usize::MAX)?,
                made,
                "the same log, chain and digests"
            );
            assert_eq!(
                answers(&store)?,
                [Some("a1".into()), Some("b1".into()), Some("c1".into())]
            );
            let copy = tmp.path().join("copy");
            let report = store.backup(&copy)?;
            assert!(report.findings.is_empty(), "{:?}", report.findings);
            assert_eq!(
                listed(&copy)?.2,
                None,
                "the copy keeps the bodies as they are"
            );
        }
        assert_eq!(listed(&path)?.1, 7, "a reader changes nothing");
        let d = file(&fs1, "/d.rs", "d1")?;
        let d_id = d.id().to_string();
        {
            drop(RedbStore::open(&path)?);
            assert_eq!(listed(&path)?, (vec![0, 0], FORMAT_VERSION, Some(3)));
            let store = RedbStore::open(&path)?;
            store.transact(
                vec![Op::put(d), Op::put(file(&fs1, "/a.rs", "a2")?)],
                Origin::Cli,
            )?;
            store.evict(&ids[1], Origin::Cli)?;
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        }
        assert_eq!(
            version_forms(&path)?,
            (2, 2, Some(3)),
            "a1 and c1 keep their hashes (b1 evicted), d1 and a2 name numbers"
        );
        assert_eq!(
            entity_key_lengths(&path)?,
            [12, 33, 33],
            "a and c whole, d short"
        );
        {
            let store = RedbStore::open(&path)?;
            let chained = |log: &[crate::store::TxRecord]| -> Vec<([u8; 32], Vec<[u8; 32]>)> {
                log.iter()
                    .map(|r| (r.chain, r.ops.iter().map(|op| op.digest).collect()))
                    .collect()
            };
            assert_eq!(
                chained(&store.log(None, 2)?),
                chained(&made),
                "the old records chain as they did (b's body evicted since)"
            );
            assert_eq!(
                answers(&store)?,
                [Some("a2".into()), None, Some("c1".into())]
            );
            store.fsck_rebuild()?;
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            assert_eq!(
                answers(&store)?,
                [Some("a2".into()), None, Some("c1".into())]
            );
        }
        assert_eq!(listed(&path)?, (vec![0, 0, 1, 0], FORMAT_VERSION, Some(3)));
        // a and c keep their whole keys; d's is short; a rebuild made them all short.
        assert_eq!(entity_key_lengths(&path)?, [12, 12, 12]);
        assert_eq!(
            version_forms(&path)?,
            (0, 4, Some(1)),
            "and every row a number"
        );
        let new = tmp.path().join("salvaged");
        let report = RedbStore::salvage(&path, &new, &|_| None)?;
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        let salvaged = RedbStore::open(&new)?;
        assert!(salvaged.fsck().is_empty(), "{:?}", salvaged.fsck());
        assert_eq!(
            salvaged.log(None, usize::MAX)?,
            RedbStore::open_read_only(&path)?.log(None, usize::MAX)?
        );
        assert!(salvaged.as_of(&d_id, None, None)?.is_some());
        drop(salvaged);
        assert_eq!(version_forms(&new)?, (0, 4, Some(1)));
        // b's body evicted: tx 1 keeps a's first write alone.
        assert_eq!(
            listed(&new)?.0,
            [1, 1, 1, 0],
            "salvage writes format 8's bodies"
        );
        Ok(())
    }

    /// Copies the rows of `from`, keyed by directory number and name, into `to`, keyed by
    /// (filesystem key, whole path), and deletes `from`: the layout before formats 9 and 10.
    fn to_whole_paths<V: redb::Value + 'static>(
        wtx: &WriteTransaction,
        from: redb::TableDefinition<&'static [u8], V>,
        to: redb::TableDefinition<(&'static [u8], &'static str), V>,
    ) -> Result<()> {
        {
            let rows = wtx.open_table(from).db()?;
            let dirs = wtx.open_table(DIRECTORY_PATHS).db()?;
            let mut old = wtx.open_table(to).db()?;
            for entry in rows.iter().db()? {
                let (key, value) = entry.db()?;
                let (n, name) = super::dirnum::split_row_key(key.value())
                    .ok_or_else(|| Error::invariant("a key by directory"))?;
                let dir = dirs
                    .get(n)
                    .db()?
                    .ok_or_else(|| Error::invariant("a directory"))?;
                let (fs, dir) = dir.value();
                old.insert((fs, format!("{dir}{name}").as_str()), value.value())
                    .db()?;
            }
        }
        wtx.delete_table(from).db()?;
        Ok(())
    }

    /// Rewrites the store file at `path` as format 9 wrote its paths: rows keyed by
    /// (filesystem key, whole path) in `paths`, no `paths_by_dir` (the directory tables stay for
    /// the stat cache); marked format 9.
    fn make_format_9_paths(path: &Path) -> Result<()> {
        let db = Database::open(path.join(DB_FILE)).db()?;
        let wtx = db.begin_write().db()?;
        to_whole_paths(&wtx, PATHS_BY_DIR, PATHS)?;
        wtx.open_table(META)
            .db()?
            .insert("format_version", 9u32.to_le_bytes().as_slice())
            .db()?;
        wtx.commit().db()
    }

    /// The number of rows of `paths` (`None`: no such table) and `paths_by_dir` of the store
    /// file at `path`.
    fn path_layout(path: &Path) -> Result<(Option<u64>, u64)> {
        use redb::ReadableTableMetadata as _;
        let db = ReadOnlyDatabase::open(path.join(DB_FILE)).db()?;
        let rtx = db.begin_read().db()?;
        let old = match rtx.open_table(PATHS) {
            Ok(t) => Some(t.len().db()?),
            Err(_) => None,
        };
        let rows = rtx
            .open_table(PATHS_BY_DIR)
            .map(|t| t.len().unwrap_or(0))
            .unwrap_or(0);
        Ok((old, rows))
    }

    /// Rewrites the store file at `path` as format 8 wrote its stat cache and paths: rows keyed
    /// by (filesystem key, whole path) in `stat_cache` and `paths`, no directory tables; marked
    /// format 8.
    fn make_format_8_stat(path: &Path) -> Result<()> {
        make_format_9_paths(path)?;
        let db = Database::open(path.join(DB_FILE)).db()?;
        let wtx = db.begin_write().db()?;
        to_whole_paths(&wtx, STAT_BY_DIR, STAT_CACHE)?;
        wtx.delete_table(DIRECTORIES).db()?;
        wtx.delete_table(DIRECTORY_PATHS).db()?;
        wtx.open_table(META)
            .db()?
            .insert("format_version", 8u32.to_le_bytes().as_slice())
            .db()?;
        wtx.commit().db()
    }

    /// The number of rows of `stat_cache` (`None`: no such table), `stat_by_dir` and
    /// `directories` of the store file at `path`, and its format version.
    fn stat_layout(path: &Path) -> Result<(Option<u64>, u64, u64, u32)> {
        use redb::ReadableTableMetadata as _;
        let db = ReadOnlyDatabase::open(path.join(DB_FILE)).db()?;
        let rtx = db.begin_read().db()?;
        let old = match rtx.open_table(STAT_CACHE) {
            Ok(t) => Some(t.len().db()?),
            Err(_) => None,
        };
        let len = |t: std::result::Result<u64, redb::TableError>| t.unwrap_or(0);
        let rows = len(rtx.open_table(STAT_BY_DIR).map(|t| t.len().unwrap_or(0)));
        let dirs = len(rtx.open_table(DIRECTORIES).map(|t| t.len().unwrap_or(0)));
        let meta = rtx.open_table(META).db()?;
        let version = meta
            .get("format_version")
            .db()?
            .and_then(|v| v.value().try_into().ok())
            .map_or(0, u32::from_le_bytes);
        Ok((old, rows, dirs, version))
    }

    /// A format-9 store's paths (whole paths in `paths`) are read as they are by a reader and
    /// a backup, and moved to directory numbers and names by the first read-write open, which
    /// the stat cache's numbers share; every answer stays, and fsck finds nothing.
    #[test]
    fn format_9_paths_read_as_they_are_and_move_to_directory_numbers() -> Result<()> {
        use crate::store::{FileStat, StatEntry, StatUpdate};
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let file = |fs: &str, p: &str| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: fs.into(),
                    path: p.into(),
                },
                p.to_string(),
            )
        };
        let paths = [
            "/a.rs",
            "/src/b.rs",
            "/src/deep/c.rs",
            "/srcx/e.rs",
            "/src/z/y.rs",
        ];
        {
            let store = RedbStore::create(&path)?;
            let mut ops = Vec::new();
            for p in paths {
                ops.push(Op::put(file("fs", p)?));
            }
            ops.push(Op::put(file("other", "/src/b.rs")?));
            let object = file("fs", "/src/b.rs")?;
            let stat = StatUpdate {
                filesystem_id: "fs".into(),
                puts: vec![(
                    "/src/b.rs".into(),
                    StatEntry {
                        stat: FileStat {
                            size: 9,
                            mtime_ns: 1,
                            ctime_ns: 1,
                            inode: 1,
                        },
                        file_hash: object
                            .file_hash()
                            .copied()
                            .ok_or_else(|| Error::invariant("a file hash"))?,
                        scan_start_ns: 2,
                    },
                )],
                removes: Vec::new(),
            };
            store.transact_with_stat(ops, Origin::Cli, stat)?;
        }
        let answers = |store: &RedbStore| -> Result<Vec<String>> {
            let mut out = Vec::new();
            for prefix in ["/", "/src", "/src/", "/src/deep/c.rs", "/srcx", "/nothing"] {
                out.push(format!("{:?}", store.paths_under("fs", prefix)?));
                out.push(format!("{:?}", store.indexed_paths_under("fs", prefix)?));
            }
            out.push(format!("{:?}", store.paths_under("other", "/")?));
            for p in paths.iter().chain(&["/none", "/src/none"]) {
                out.push(format!("{:?}", store.entity_at_path("fs", p)?));
            }
            out.push(format!("{:?}", store.stat_cache("fs", "/")?.len()));
            Ok(out)
        };
        let before = answers(&RedbStore::open_read_only(&path)?)?;
        assert!(before[2].contains("/src/deep/c.rs"), "{before:?}");
        make_format_9_paths(&path)?;
        assert_eq!(path_layout(&path)?, (Some(6), 0));
        {
            let store = RedbStore::open_read_only(&path)?;
            assert_eq!(answers(&store)?, before);
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            let copy = tmp.path().join("copy");
            let report = store.backup(&copy)?;
            assert!(report.findings.is_empty(), "{:?}", report.findings);
            assert_eq!(
                path_layout(&copy)?,
                (None, 6),
                "the copy's rows by directory"
            );
            assert_eq!(answers(&RedbStore::open(&copy)?)?, before);
        }
        assert_eq!(
            path_layout(&path)?,
            (Some(6), 0),
            "a reader changes nothing"
        );
        {
            let store = RedbStore::open(&path)?;
            assert_eq!(answers(&store)?, before);
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            // A new file in a directory only the paths used before the upgrade.
            store.transact(vec![Op::put(file("fs", "/src/deep/n.rs")?)], Origin::Cli)?;
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            assert_eq!(store.indexed_paths_under("fs", "/src/deep")?.len(), 2);
        }
        assert_eq!(path_layout(&path)?, (None, 7));
        assert_eq!(stat_layout(&path)?.3, FORMAT_VERSION);
        Ok(())
    }

    /// A format-8 store's stat cache (whole paths) is read as it is by a reader and a backup,
    /// and moved to directory numbers and names by its first read-write open; fsck checks the
    /// new rows and the directory tables, and a rebuild empties both.
    #[test]
    fn a_format_8_stat_cache_reads_as_it_is_and_moves_to_directory_numbers() -> Result<()> {
        use crate::store::{FileStat, StatEntry, StatUpdate};
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = tmp.path().join("s");
        let fs1 = "ab".repeat(32);
        let file = |fs: &str, p: &str, n: u64| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: fs.into(),
                    path: p.into(),
                },
                format!("{n}"),
            )
        };
        let hash_of = |fs: &str, p: &str, n: u64| -> Result<crate::hash::Hash> {
            file(fs, p, n)?
                .file_hash()
                .copied()
                .ok_or_else(|| Error::invariant("a file hash"))
        };
        let update = |fs: &str, puts: &[(&str, u64)], removes: &[&str]| -> Result<StatUpdate> {
            let mut entries = Vec::new();
            for (p, n) in puts {
                let entry = StatEntry {
                    stat: FileStat {
                        size: *n,
                        mtime_ns: 1,
                        ctime_ns: 1,
                        inode: *n,
                    },
                    file_hash: hash_of(fs, p, *n)?,
                    scan_start_ns: 2,
                };
                entries.push(((*p).to_string(), entry));
            }
            Ok(StatUpdate {
                filesystem_id: fs.into(),
                puts: entries,
                removes: removes.iter().map(|p| (*p).to_string()).collect(),
            })
        };
        let files = [
            ("/a.rs", 1),
            ("/src/b.rs", 2),
            ("/src/deep/c.rs", 3),
            ("/src/deep/d.rs", 4),
            ("/srcx/e.rs", 5),
        ];
        {
            let store = RedbStore::create(&path)?;
            let mut ops = files
                .iter()
                .map(|(p, n)| file(&fs1, p, *n).map(Op::put))
                .collect::<Result<Vec<_>>>()?;
            ops.push(Op::put(file("fs", "/src/b.rs", 9)?));
            ops.push(Op::put(file(&fs1, "/src/f.rs", 6)?));
            ops.push(Op::put(file(&fs1, "/g/h.rs", 7)?));
            store.transact_with_stat(ops, Origin::Cli, update(&fs1, &files, &[])?)?;
            store.transact_with_stat(
                vec![],
                Origin::Cli,
                update("fs", &[("/src/b.rs", 9)], &[])?,
            )?;
        }
        // Five directories for the stat cache, and /g/ for a path alone (format 10).
        assert_eq!(stat_layout(&path)?, (None, 6, 6, FORMAT_VERSION));
        assert_eq!(path_layout(&path)?, (None, 8));
        let answers = |store: &RedbStore| -> Result<Vec<Vec<(String, u64)>>> {
            let mut out = Vec::new();
            for (fs, prefix) in [
                (fs1.as_str(), "/"),
                (fs1.as_str(), "/src"),
                (fs1.as_str(), "/src/"),
                (fs1.as_str(), "/src/deep/c.rs"),
                (fs1.as_str(), "/srcx"),
                (fs1.as_str(), "/nothing"),
                ("fs", "/"),
            ] {
                let mut got: Vec<(String, u64)> = store
                    .stat_cache(fs, prefix)?
                    .into_iter()
                    .map(|(p, e)| (p, e.stat.size))
                    .collect();
                got.sort();
                out.push(got);
            }
            Ok(out)
        };
        let before = answers(&RedbStore::open_read_only(&path)?)?;
        assert_eq!(before[1].len(), 3, "{before:?}");
        assert_eq!(before[3], [("/src/deep/c.rs".to_string(), 3)]);
        assert!(before[5].is_empty());
        make_format_8_stat(&path)?;
        assert_eq!(stat_layout(&path)?, (Some(6), 0, 0, 8));
        {
            let store = RedbStore::open_read_only(&path)?;
            assert_eq!(answers(&store)?, before);
            assert_eq!(store.stat_cache_len()?, 6);
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            assert_eq!(store.paths_under(&fs1, "/src")?.len(), 4);
            let copy = tmp.path().join("copy");
            let report = store.backup(&copy)?;
            assert!(report.findings.is_empty(), "{:?}", report.findings);
            assert_eq!(answers(&RedbStore::open(&copy)?)?, before);
            assert_eq!(
                stat_layout(&copy)?,
                (None, 6, 6, FORMAT_VERSION),
                "the copy's rows by directory"
            );
            assert_eq!(path_layout(&copy)?, (None, 8));
        }
        assert_eq!(
            stat_layout(&path)?,
            (Some(6), 0, 0, 8),
            "a reader changes nothing"
        );
        {
            let store = RedbStore::open(&path)?;
            assert_eq!(answers(&store)?, before);
            store.transact_with_stat(
                vec![],
                Origin::Cli,
                update(
                    &fs1,
                    &[("/src/f.rs", 6), ("/g/h.rs", 7)],
                    &["/src/deep/c.rs"],
                )?,
            )?;
            assert!(store.fsck().is_empty(), "{:?}", store.fsck());
            assert_eq!(store.stat_cache(&fs1, "/src")?.len(), 3);
            assert_eq!(store.stat_cache_len()?, 7);
        }
        assert_eq!(stat_layout(&path)?, (None, 7, 6, FORMAT_VERSION));
        assert_eq!(path_layout(&path)?, (None, 8));
        // Damage: a row whose directory number is unknown, a number that leads elsewhere.
        {
            let db = Database::open(path.join(DB_FILE)).db()?;
            let wtx = db.begin_write().db()?;
            wtx.open_table(STAT_BY_DIR)
                .db()?
                .insert(
                    super::dirnum::row_key(99, "x.rs").as_slice(),
                    [0u8].as_slice(),
                )
                .db()?;
            wtx.open_table(DIRECTORY_PATHS)
                .db()?
                .insert(98, (codec::fs_number_key(1).as_slice(), "/nowhere/"))
                .db()?;
            wtx.commit().db()?;
        }
        let store = RedbStore::open(&path)?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "stat_cache" && f.subject.contains("directory number 99")),
            "{findings:?}"
        );
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "directories" && f.subject.contains("98")),
            "{findings:?}"
        );
        store.fsck_rebuild()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert_eq!(
            store.stat_cache_len()?,
            0,
            "the rebuild empties the stat cache"
        );
        drop(store);
        // The paths' directories stay.
        assert_eq!(stat_layout(&path)?, (None, 0, 6, FORMAT_VERSION));
        assert_eq!(path_layout(&path)?, (None, 8));
        Ok(())
    }
}
