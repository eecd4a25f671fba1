//! Tree scans: walk roots in parallel, plan every new and changed file, find deletions, and commit
//! in large transactions together with the stat cache.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use ignore::gitignore::GitignoreBuilder;
use serde::{Deserialize, Serialize};

use super::budget::{Budget, thread_cpu_seconds};
use super::dirstat::DirStat;
use super::disk::{Look, StatChange, presence, record};
use super::walk::{CacheSlot, Cached, Found, ScanCache, SkipKind, WalkPlan, walk};
use super::{Action, Indexer, Planned};
use crate::error::{Error, Result};
use crate::object::FilesystemSource;
use crate::resolve::{machine_filesystem_id, utf8_path};
use crate::store::{EncodedBlob, Op, Origin, StatUpdate, Timestamp, TxId};

/// How a scan runs.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// Worker threads that stat, read, hash and compress (0: one per core); the planner and the
    /// writer are two more threads.
    pub threads: usize,
    /// Commit after this many planned files.
    pub batch_files: usize,
    /// Commit after this many bytes of planned content.
    pub batch_bytes: u64,
    /// File bytes read and not yet committed, at most (a single larger file goes through
    /// alone): what bounds a scan's memory whatever its thread count.
    pub budget_bytes: u64,
    /// Directories never entered, besides the store's own directory (always skipped).
    pub skip_dirs: Vec<PathBuf>,
    /// Extra ignore globs (gitignore syntax), as in the settings.
    pub ignore: Vec<String>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            threads: 0,
            batch_files: 4096,
            batch_bytes: 8 * 1024 * 1024,
            budget_bytes: 32 * 1024 * 1024,
            skip_dirs: Vec::new(),
            ignore: Vec::new(),
        }
    }
}

/// A running count, given to the progress callback after every file.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanProgress {
    /// Files seen so far.
    pub files: u64,
    /// Bytes read so far.
    pub bytes_read: u64,
}

/// A file the scan did not index, and why.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// The path as found on disk.
    pub path: String,
    /// What kind of skip (the key of [`ScanSummary::skipped_by_kind`]).
    pub kind: SkipKind,
    /// Why it was skipped, in words.
    pub reason: String,
}

/// What a scan did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScanSummary {
    /// Files seen (every regular file under the roots that no ignore rule hid).
    pub files: u64,
    /// New entities.
    pub created: u64,
    /// New versions of existing entities.
    pub updated: u64,
    /// Files found as they were.
    pub unchanged: u64,
    /// Tombstones written for files that are gone.
    pub deleted: u64,
    /// Paths not indexed (symlinks, FIFOs, sockets, devices, unreadable files and directories,
    /// non-UTF-8 names, other stores' directories).
    pub skipped: u64,
    /// The skipped paths counted by kind.
    pub skipped_by_kind: std::collections::BTreeMap<SkipKind, u64>,
    /// Files a deny rule kept out (stored as stubs without content).
    pub denied: u64,
    /// Bytes read from files.
    pub bytes_read: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// The transactions written, in order.
    pub tx_ids: Vec<u64>,
    /// The first skipped files (at most 100), with reasons.
    pub skipped_files: Vec<Skipped>,
    /// The paths given to the scan that were not indexed themselves (a FIFO, a device, an
    /// unreadable file or directory), with reasons.
    pub not_indexed: Vec<Skipped>,
    /// CPU seconds by thread (each thread's CPU-time clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<ScanThreads>,
}

/// CPU seconds of a scan's threads: the walkers (stat, read, hash, compress), the planner (which
/// compares with the store) and the writer (which commits), to show which stage bounds a scan.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScanThreads {
    /// Walker threads that ran.
    pub workers: usize,
    /// CPU seconds of each walker thread.
    pub worker_seconds: Vec<f64>,
    /// CPU seconds of the planning thread (the caller's).
    pub planner_seconds: f64,
    /// CPU seconds of the writing thread.
    pub writer_seconds: f64,
}

impl ScanSummary {
    fn count(&mut self, action: Action) {
        match action {
            Action::Created => self.created += 1,
            Action::Updated => self.updated += 1,
            Action::Unchanged => self.unchanged += 1,
            Action::Deleted => self.deleted += 1,
        }
    }

    fn skip(&mut self, skipped: Skipped, named: bool) {
        self.skipped += 1;
        *self.skipped_by_kind.entry(skipped.kind).or_default() += 1;
        if named {
            self.not_indexed.push(skipped.clone());
        }
        if self.skipped_files.len() < 100 {
            self.skipped_files.push(skipped);
        }
    }
}

/// Ops and stat cache changes waiting for the next commit.
struct Batch {
    ops: Vec<Op>,
    stat: StatUpdate,
    files: usize,
    bytes: u64,
    /// Budget bytes of its files, released once it is committed.
    reserved: u64,
}

impl Batch {
    fn new(filesystem_id: &str) -> Self {
        Batch {
            ops: Vec::new(),
            stat: StatUpdate {
                filesystem_id: filesystem_id.to_string(),
                puts: Vec::new(),
                removes: Vec::new(),
            },
            files: 0,
            bytes: 0,
            reserved: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.stat.puts.is_empty() && self.stat.removes.is_empty()
    }
}

/// Scans `roots` (host paths: directories or files) into the indexer's store: every file not
/// ignored is created, updated or found unchanged, files gone from under the roots get tombstones,
/// and the stat cache lets the next scan skip reading unchanged files.
///
/// # Errors
/// [`Error::InvalidPath`] for a root that does not exist or is not UTF-8; store errors from
/// committing (what was committed before stays committed).
pub fn scan(
    indexer: &Indexer,
    roots: &[PathBuf],
    options: &ScanOptions,
    progress: &mut dyn FnMut(ScanProgress),
) -> Result<ScanSummary> {
    let started = Instant::now();
    let scan_start = Timestamp::now();
    let store = indexer.store();
    // However the scan ends, its lazily committed batches are made durable (best effort on an
    // error; on success the scan's own sync below has done it and reported its error).
    let _durable = SyncLazyCommits(store);
    // A reopen of the handle (after a write of any client that found no room) loses the lazy
    // commits not yet made durable: the scan's batches then were not all kept.
    let lost_before = store.lazy_commits_lost();
    let filesystem_id = machine_filesystem_id();
    let (roots, walked) = canonical_roots(store, &filesystem_id, roots)?;
    // Directories never entered, as the walk meets them (canonical paths).
    let skip_dirs: Vec<PathBuf> = options
        .skip_dirs
        .iter()
        .chain(store.dir().map(std::path::Path::to_path_buf).as_ref())
        .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))
        .collect();
    for root in &roots {
        if let Some(dir) = skip_dirs.iter().find(|dir| root.starts_with(dir)) {
            return Err(Error::invalid_path(
                root.display().to_string(),
                format!(
                    "it is inside {}, which scans never enter (the store directory); index the \
                     tree around it instead",
                    dir.display()
                ),
            ));
        }
    }

    // The state of the store's file while this scan's handle only reads it: the stat file
    // kept for it stands for the stat cache and the listing of stored paths.
    let state = store.read_only_state();
    let key = state.as_deref().map(|state| super::statfile::Key {
        state,
        filesystem_id: &filesystem_id,
        roots: &roots,
        deny: indexer.deny_rules().globs(),
    });

    let ignore = extra_ignore(&options.ignore)?;
    let plan = WalkPlan {
        filesystem_id: filesystem_id.clone(),
        roots: walked,
        deny: indexer.deny_rules().clone(),
        max_content_bytes: indexer.max_content_bytes(),
        cache: CacheSlot::default(),
        skip_dirs,
        ignore,
        threads: options.threads,
        scan_start,
        budget: Arc::new(Budget::new(options.budget_bytes)),
        thread_cpu: std::sync::Mutex::new(Vec::new()),
        met_order: std::sync::Mutex::new(Vec::new()),
        listings: store
            .dir()
            .map(|dir| super::listings::Listings::load(dir, scan_start)),
    };
    let planner_cpu_start = thread_cpu_seconds();

    let mut summary = ScanSummary::default();
    // Paths found by the walk that the stat cache does not hold (it marks those it holds), to
    // find deletions among the stored paths.
    let mut seen: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    let mut skipped_seen: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    let mut batch = Batch::new(&filesystem_id);
    let (sender, receiver) = sync_channel::<Vec<Found>>(4);
    let budget = Arc::clone(&plan.budget);
    let scanned = std::thread::scope(|scope| -> Result<(Written, Vec<String>, bool)> {
        let plan = &plan;
        scope.spawn(move || walk(plan, sender));
        // Walkers wait for the cache: however this closure ends (an error, a panic), they are
        // told there is none rather than left waiting, so the scope can join them.
        let _unblock = Unblock(&plan.cache);
        // The stat cache, loaded while the walk starts (its walkers stat files meanwhile): from
        // the stat file when it holds this state of the store, else from the table.
        let kept = match (&key, store.dir()) {
            (Some(key), Some(dir)) => super::statfile::load(dir, key),
            _ => None,
        };
        let from_file = kept.is_some();
        let (cache, uncached) = match kept {
            Some(kept) => (kept.cache, Some(kept.uncached)),
            None => match load_cache(store, &filesystem_id, &roots) {
                Ok(cache) => (cache, None),
                Err(err) => {
                    plan.cache.set(None);
                    drop(receiver);
                    return Err(err);
                }
            },
        };
        // Whether any file under the roots was indexed before (a new path there is a creation
        // or a rename, dated by its ctime).
        let tree_known = !cache.is_empty();
        plan.cache.set(Some(cache));
        let cache = plan
            .cache
            .wait()
            .ok_or_else(|| Error::invariant("the scan's stat cache is not there"))?;
        let mut writer = Writer {
            scope,
            indexer,
            budget: &budget,
            running: None,
        };
        // The stored paths, listed while the walk runs (its threads leave a core idle much of
        // the time): those with a cache entry are marked there, the others kept. The stat
        // file's entries are marked stored already, and it holds the others.
        let roots = &roots;
        let filesystem_id = &filesystem_id;
        let stored = match uncached {
            Some(uncached) => Stored::Kept(uncached),
            None => Stored::Listing(scope.spawn(move || -> Result<Vec<String>> {
                let mut uncached = Vec::new();
                for root in roots {
                    store.for_each_indexed_path_under(
                        filesystem_id,
                        utf8_path(root)?,
                        &mut |path| {
                            match cache.get(path) {
                                Some(cached) => cached.mark_stored(),
                                None => uncached.push(path.to_string()),
                            }
                            Ok(())
                        },
                    )?;
                }
                Ok(uncached)
            })),
        };
        let planned = plan_found(
            indexer,
            plan,
            options,
            &receiver,
            &mut writer,
            PlanState {
                summary: &mut summary,
                seen: &mut seen,
                skipped_seen: &mut skipped_seen,
                batch: &mut batch,
                tree_known,
                progress,
            },
        );
        // The walk stops once its receiver is gone; the writer once its inbox is.
        drop(receiver);
        let written = writer.finish()?;
        let stored = match stored {
            Stored::Kept(uncached) => Ok(uncached),
            Stored::Listing(listing) => listing
                .join()
                .map_err(|_| Error::invariant("the scan's listing thread panicked"))?,
        };
        match (planned, written, stored) {
            // A writer error is the cause of a planner that could not hand over its batch.
            (_, Err(err), _) | (Err(err), _, _) | (_, _, Err(err)) => Err(err),
            (Ok(()), Ok(written), Ok(stored)) => Ok((written, stored, from_file)),
        }
    });
    let (written, stored, from_file) = scanned?;
    summary.tx_ids.extend(written.tx_ids);
    if let (Some(listings), Some(dir)) = (&plan.listings, store.dir()) {
        listings.save(dir, &plan.roots);
    }

    // The stored paths the walk did not meet, in path order: cached entries not marked met,
    // and the others it did not see (without a copy of every path met).
    let mut unmet: Vec<String> = stored
        .iter()
        .filter(|path| !seen.contains(*path))
        .cloned()
        .chain(
            plan.cache
                .wait()
                .into_iter()
                .flat_map(ScanCache::stored_unmet),
        )
        .collect();
    unmet.sort_unstable();
    unmet.dedup();
    let mut dirs = DirStat::new(false);
    // Stored paths without a stat cache entry found gone and deleted before (tombstoned in this
    // state of the store): the stat file leaves them out, as a later scan of the same state has
    // nothing to do for them unless its walk meets them (then they are new files to it).
    let mut deleted_before: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
    for path in unmet {
        // Still on disk as a file but ignored or skipped: not a deletion.
        let presence = presence(&mut dirs, &path);
        if !presence.is_gone() {
            continue;
        }
        let source = FilesystemSource {
            filesystem_id: filesystem_id.clone(),
            path: path.clone(),
        };
        check_listed(store, &source)?;
        let gone = Look::Gone(presence);
        let change = StatChange::of(&gone, scan_start);
        let planned = indexer.plan_look(source, gone)?;
        // Only an entry the stat cache holds is removed: a path deleted before stays among the
        // stored paths (its history) with none, and removing it again would make every later
        // scan commit (and never keep the stat file).
        let cached = plan
            .cache
            .wait()
            .is_some_and(|cache| cache.get(&path).is_some());
        if cached {
            record(&mut batch.stat, &path, change);
        }
        if planned.action != Action::Deleted {
            // Deleted before: not a file of this scan, so not "unchanged" either.
            if !cached {
                deleted_before.insert(path);
            }
            continue;
        }
        add(&mut summary, &mut batch, planned);
        if batch.files >= options.batch_files {
            commit(indexer, &mut batch, &mut summary)?;
        }
    }
    commit(indexer, &mut batch, &mut summary)?;
    // The writer's batches were committed lazily: a durable commit of the last batch made them
    // durable, and when there was none (the last batch was empty) a sync does.
    if store.has_lazy_commits() {
        store.sync()?;
    }
    if store.lazy_commits_lost() != lost_before {
        return Err(Error::storage(
            "indexing",
            "the store was reopened after a failed write, which lost batches this index had \
             committed without syncing them; run the index again",
        ));
    }
    // A scan that read the tables and wrote nothing (its handle still reads only, and the file's
    // state is the one it read) keeps what they answered for the next scan.
    if let (false, Some(key), Some(dir), Some(cache)) =
        (from_file, &key, store.dir(), plan.cache.wait())
        && store.read_only_state().as_deref() == Some(key.state)
    {
        let met = plan
            .met_order
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let uncached: Vec<String> = stored
            .into_iter()
            .filter(|path| !deleted_before.contains(path))
            .collect();
        super::statfile::save(dir, key, cache, &met, &uncached);
    }
    let workers = plan
        .thread_cpu
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    summary.threads = match (planner_cpu_start, thread_cpu_seconds()) {
        (Some(start), Some(end)) => Some(ScanThreads {
            workers: workers.len(),
            worker_seconds: workers,
            planner_seconds: end - start,
            writer_seconds: written.cpu_seconds,
        }),
        _ => None,
    };
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Makes the store's lazy commits durable when dropped (best effort).
struct SyncLazyCommits<'a>(&'a crate::store::Store);

impl Drop for SyncLazyCommits<'_> {
    fn drop(&mut self) {
        if self.0.has_lazy_commits() {
            let _ = self.0.sync();
        }
    }
}

/// The stored paths without a stat cache entry: kept in the stat file, or being listed from the
/// store on a thread of their own.
enum Stored<'scope> {
    Kept(Vec<String>),
    Listing(std::thread::ScopedJoinHandle<'scope, Result<Vec<String>>>),
}

/// The writer thread, started when the planner hands over its first batch: a scan with nothing
/// to write (an unchanged tree) starts none. It commits one batch while the planner fills the
/// next: at most one waits.
struct Writer<'scope, 'env> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    indexer: &'env Indexer,
    budget: &'env Budget,
    running: Option<(
        SyncSender<Batch>,
        std::thread::ScopedJoinHandle<'scope, Result<Written>>,
    )>,
}

impl Writer<'_, '_> {
    /// Gives `batch` to the writer thread, starting it first if it has not started.
    ///
    /// # Errors
    /// [`Error::Invariant`] when the writer stopped (its own error is the one the scan reports).
    fn send(&mut self, batch: Batch) -> Result<()> {
        let (scope, indexer, budget) = (self.scope, self.indexer, self.budget);
        let (to_writer, _) = self.running.get_or_insert_with(|| {
            let (to_writer, inbox) = sync_channel::<Batch>(1);
            let thread = scope.spawn(move || write_batches(indexer, budget, inbox));
            (to_writer, thread)
        });
        to_writer
            .send(batch)
            .map_err(|_| Error::invariant("the scan's writer thread stopped"))
    }

    /// Closes the writer's inbox and waits for it: what it wrote (nothing if it never started).
    ///
    /// # Errors
    /// The writer's own error; [`Error::Invariant`] when it panicked.
    fn finish(self) -> Result<Result<Written>> {
        match self.running {
            None => Ok(Ok(Written {
                tx_ids: Vec::new(),
                cpu_seconds: 0.0,
            })),
            Some((to_writer, thread)) => {
                drop(to_writer);
                thread
                    .join()
                    .map_err(|_| Error::invariant("the scan's writer thread panicked"))
            }
        }
    }
}

/// What the writer thread did: its transactions in order and its CPU seconds.
struct Written {
    tx_ids: Vec<u64>,
    cpu_seconds: f64,
}

/// The writer thread: commits each batch it is given (ops and stat cache in one transaction)
/// and releases the batch's budget bytes; stops at the first error (its inbox then closes, and
/// the planner's next hand-over fails).
fn write_batches(indexer: &Indexer, budget: &Budget, inbox: Receiver<Batch>) -> Result<Written> {
    let start = thread_cpu_seconds();
    let mut tx_ids = Vec::new();
    for batch in inbox {
        let reserved = batch.reserved;
        let receipt = if batch.is_empty() {
            Ok(None)
        } else {
            // The run's transactions name its first one in their log records.
            let origin = Origin::IndexRun(tx_ids.first().map(|&first| TxId(first)));
            // Not synced: the scan's last commit (or its closing sync) makes every batch
            // durable before the scan returns, and nothing is acknowledged before then.
            indexer
                .store()
                .transact_with_stat_lazily(batch.ops, origin, batch.stat)
        };
        budget.release(reserved);
        if let Some(receipt) = receipt? {
            let TxId(tx) = receipt.tx_id;
            tx_ids.push(tx);
        }
    }
    Ok(Written {
        tx_ids,
        cpu_seconds: match (start, thread_cpu_seconds()) {
            (Some(start), Some(end)) => end - start,
            _ => 0.0,
        },
    })
}

/// The planner's running state, borrowed from [`scan`].
struct PlanState<'a> {
    summary: &'a mut ScanSummary,
    seen: &'a mut rustc_hash::FxHashSet<String>,
    skipped_seen: &'a mut rustc_hash::FxHashSet<String>,
    batch: &'a mut Batch,
    tree_known: bool,
    progress: &'a mut dyn FnMut(ScanProgress),
}

/// How long the planner waits for the walk before it checks whether walkers wait for budget.
const WAIT_TICK: Duration = Duration::from_millis(20);

/// Plans what the walk finds (on the caller's thread) and hands full batches to the writer;
/// a batch also goes early when a walker waits for budget bytes it holds.
fn plan_found(
    indexer: &Indexer,
    plan: &WalkPlan,
    options: &ScanOptions,
    receiver: &Receiver<Vec<Found>>,
    writer: &mut Writer<'_, '_>,
    state: PlanState<'_>,
) -> Result<()> {
    let PlanState {
        summary,
        seen,
        skipped_seen,
        batch,
        tree_known,
        progress,
    } = state;
    let filesystem_id = &plan.filesystem_id;
    let cache = plan
        .cache
        .wait()
        .ok_or_else(|| Error::invariant("the scan's stat cache is not there"))?;
    loop {
        let found = match receiver.recv_timeout(WAIT_TICK) {
            Ok(found) => found,
            Err(RecvTimeoutError::Timeout) => {
                if plan.budget.has_waiters() && batch.reserved > 0 {
                    hand_over(writer, batch)?;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        for found in found {
            match found {
                Found::Unchanged { files } => {
                    // Marked met in the cache by the walk (overlapping roots: counted once).
                    summary.files += files;
                    summary.unchanged += files;
                }
                Found::Read {
                    path,
                    stat,
                    change,
                    prepared,
                    reserved,
                } => {
                    batch.reserved += reserved;
                    if met(cache, seen, &path) {
                        continue;
                    }
                    summary.files += 1;
                    summary.bytes_read += prepared.bytes_read;
                    // A path new to a tree indexed before was created or renamed there: a rename
                    // keeps the mtime but sets the ctime, so the later of the two dates it (a
                    // renamed file's new name does not exist in the past beside its old one).
                    let new_path = tree_known && cache.get(&path).is_none();
                    let changed_ns = if new_path {
                        stat.mtime_ns.max(stat.ctime_ns)
                    } else {
                        stat.mtime_ns
                    };
                    let mtime = Timestamp::saturating_from_micros(changed_ns / 1000);
                    // Content and its compressed record both wait in memory until the commit.
                    let encoded_len = prepared.encoded().map_or(0, EncodedBlob::len);
                    let planned = indexer.plan_prepared(*prepared, Some(mtime))?;
                    batch.bytes += planned.bytes_read + encoded_len;
                    add(summary, batch, planned);
                    // A file still changing after several reads is stored as read, but the next
                    // scan reads it again.
                    record(&mut batch.stat, &path, change);
                    meet(cache, seen, path);
                }
                Found::Denied { path, .. } => {
                    if met(cache, seen, &path) {
                        continue;
                    }
                    summary.files += 1;
                    summary.denied += 1;
                    let source = FilesystemSource {
                        filesystem_id: filesystem_id.clone(),
                        path: path.clone(),
                    };
                    let planned = indexer.plan_look(source, Look::Denied)?;
                    add(summary, batch, planned);
                    meet(cache, seen, path);
                }
                Found::Skipped { path, kind, reason } => {
                    // Not marked seen: a regular file skipped for a read error is still there
                    // (`is_gone` keeps it); a symlink that replaced an indexed file is not.
                    let named = plan.roots.contains(&path);
                    let path = path.display().to_string();
                    if !skipped_seen.insert(path.clone()) {
                        continue;
                    }
                    summary.files += 1;
                    summary.skip(Skipped { path, kind, reason }, named);
                }
            }
            progress(ScanProgress {
                files: summary.files,
                bytes_read: summary.bytes_read,
            });
            if batch.files >= options.batch_files
                || batch.bytes >= options.batch_bytes
                || batch_is_full_beside_others(indexer, batch)
            {
                hand_over(writer, batch)?;
            }
        }
    }
    // The last batch stays with the scan: the deletions found after the walk join it, so that a
    // scan that ends with few changes writes them in one transaction.
    Ok(())
}

/// The largest batch while other writers use the store (files, content bytes): a commit of it
/// takes a few milliseconds, so a session commit queued behind it is not held up for long.
const BATCH_BESIDE_OTHERS: (usize, u64) = (128, 1024 * 1024);

/// How recently another writer must have written for [`BATCH_BESIDE_OTHERS`] to apply.
const OTHERS_WITHIN: Duration = Duration::from_secs(1);

/// Whether `batch` is as large as a batch may be while other writers use the store.
fn batch_is_full_beside_others(indexer: &Indexer, batch: &Batch) -> bool {
    (batch.files >= BATCH_BESIDE_OTHERS.0 || batch.bytes >= BATCH_BESIDE_OTHERS.1)
        && indexer.store().others_writing(OTHERS_WITHIN)
}

/// Gives the batch to the writer thread and starts a new one.
///
/// # Errors
/// [`Error::Invariant`] when the writer stopped (its own error is the one the scan reports).
fn hand_over(writer: &mut Writer<'_, '_>, batch: &mut Batch) -> Result<()> {
    if batch.is_empty() && batch.reserved == 0 {
        return Ok(());
    }
    let full = std::mem::replace(batch, Batch::new(&batch.stat.filesystem_id));
    writer.send(full)
}

/// Checks that a path the store listed among its files has an entity: one that does not is
/// damage (a `paths` row that lost its entity, or a damaged path), not an unchanged file, and
/// the scan stops rather than count it.
///
/// # Errors
/// [`Error::Corrupt`] when the entity is missing.
fn check_listed(store: &crate::store::Store, source: &FilesystemSource) -> Result<()> {
    let id = crate::object::sourced_identity(
        crate::object::ObjectType::File,
        &crate::object::Source::Filesystem(source.clone()),
    )?
    .to_hex();
    if !store.entity_exists(&id)? {
        return Err(Error::corrupt(format!(
            "the store lists {:?} but has no entity {id} for it; run `strata fsck`",
            source.path
        )));
    }
    Ok(())
}

/// The settings' extra ignore globs (gitignore syntax, matched against absolute paths), compiled;
/// `None` when there are none.
///
/// # Errors
/// [`Error::InvalidInput`] naming a glob that does not parse.
pub fn extra_ignore(globs: &[String]) -> Result<Option<Arc<ignore::gitignore::Gitignore>>> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut builder = GitignoreBuilder::new("/");
    for glob in globs {
        builder
            .add_line(None, glob)
            .map_err(|e| Error::invalid_input(format!("ignore glob {glob:?}: {e}")))?;
    }
    let rules = builder
        .build()
        .map_err(|e| Error::invalid_input(format!("ignore globs: {e}")))?;
    Ok(Some(Arc::new(rules)))
}

/// Sets a scan's [`CacheSlot`] to "none" when dropped, unless the cache was set before.
struct Unblock<'a>(&'a CacheSlot);

impl Drop for Unblock<'_> {
    fn drop(&mut self) {
        self.0.set(None);
    }
}

/// The stat cache entries of the files under `roots`.
///
/// # Errors
/// Store errors.
fn load_cache(
    store: &crate::store::Store,
    filesystem_id: &str,
    roots: &[PathBuf],
) -> Result<ScanCache> {
    // Sized for the whole table: a scan of the root holds all of it.
    let mut cache = ScanCache::with_capacity(usize::try_from(store.stat_cache_len()?).unwrap_or(0));
    for root in roots {
        store.for_each_stat_entry(filesystem_id, utf8_path(root)?, &mut |path, entry| {
            cache.insert(path, entry);
            Ok(())
        })?;
    }
    Ok(cache)
}

/// Whether the scan met canonical `path`: marked in the cache, or among the others it met.
fn met(cache: &ScanCache, others: &rustc_hash::FxHashSet<String>, path: &str) -> bool {
    cache
        .get(path)
        .map_or_else(|| others.contains(path), Cached::is_marked)
}

/// Records that the scan met canonical `path`.
fn meet(cache: &ScanCache, others: &mut rustc_hash::FxHashSet<String>, path: String) {
    match cache.get(&path) {
        Some(cached) => {
            cached.mark();
        }
        None => {
            others.insert(path);
        }
    }
}

/// Counts a planned file and queues its ops.
fn add(summary: &mut ScanSummary, batch: &mut Batch, planned: Planned) {
    summary.count(planned.action);
    if !planned.ops.is_empty() {
        batch.files += 1;
        batch.ops.extend(planned.ops);
    }
}

/// Commits the batch (ops and stat cache in one transaction) and starts a new one.
fn commit(indexer: &Indexer, batch: &mut Batch, summary: &mut ScanSummary) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let full = std::mem::replace(batch, Batch::new(&batch.stat.filesystem_id));
    // The run's transactions name its first one in their log records.
    let origin = Origin::IndexRun(summary.tx_ids.first().map(|&first| TxId(first)));
    let receipt = indexer
        .store()
        .transact_with_stat(full.ops, origin, full.stat)?;
    if let Some(receipt) = receipt {
        let TxId(tx) = receipt.tx_id;
        summary.tx_ids.push(tx);
    }
    Ok(())
}

/// Canonicalises each root (absolute, symlinks resolved, UTF-8). A root that is gone from disk
/// but has files in the store is kept (its files get tombstones) but not walked; one that is
/// neither on disk nor in the store is refused. Returns every root to check for deletions, and
/// those to walk.
fn canonical_roots(
    store: &crate::store::Store,
    filesystem_id: &str,
    roots: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for root in roots {
        let refuse = |e: std::io::Error| {
            Error::invalid_path(root.display().to_string(), format!("cannot index it: {e}"))
        };
        match std::fs::canonicalize(root) {
            Ok(canonical) => {
                utf8_path(&canonical)?;
                // A root named through a symlink: followed only within its own directory.
                let cwd = std::env::current_dir().map_err(refuse)?;
                let named = crate::resolve::absolute_path(root, &cwd)?;
                crate::resolve::check_named_link(
                    &root.display().to_string(),
                    std::path::Path::new(&named),
                    &canonical,
                )?;
                out.push((canonical, true));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let canonical = canonical_missing(root).ok_or_else(|| {
                    Error::invalid_path(
                        root.display().to_string(),
                        format!("cannot index it: {err}"),
                    )
                })?;
                if store
                    .paths_under(filesystem_id, utf8_path(&canonical)?)?
                    .is_empty()
                {
                    return Err(refuse(err));
                }
                out.push((canonical, false));
            }
            Err(err) => return Err(refuse(err)),
        }
    }
    // A root inside another root is scanned once, by the outer one.
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for root in out {
        if !kept.iter().any(|(outer, _)| root.0.starts_with(outer)) {
            kept.push(root);
        }
    }
    let walked = kept
        .iter()
        .filter(|(_, on_disk)| *on_disk)
        .map(|(r, _)| r.clone())
        .collect();
    Ok((kept.into_iter().map(|(r, _)| r).collect(), walked))
}

/// The canonical form of a path that does not exist: its nearest existing ancestor canonicalised,
/// then the rest as written (`.` and `..` taken lexically).
fn canonical_missing(root: &std::path::Path) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    let absolute = PathBuf::from(crate::resolve::absolute_path(root, &cwd).ok()?);
    let (base, rest) = absolute.ancestors().find_map(|dir| {
        Some((
            std::fs::canonicalize(dir).ok()?,
            absolute.strip_prefix(dir).ok()?,
        ))
    })?;
    Some(base.join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Settings;
    use crate::store::{StatEntry, Store};

    /// A scan's batches are committed without an fsync; the scan returns only once they are
    /// durable: the file as a crash right after it leaves it (a copy taken while the store is
    /// open) holds every one of them. A batch of one file each, so that the scan's own last
    /// batch is empty and only the closing sync makes them durable.
    #[test]
    fn a_scan_that_returned_is_durable_though_its_batches_were_not() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(&tree).map_err(|e| Error::io("mkdir", e))?;
        for i in 0..20 {
            std::fs::write(tree.join(format!("f{i}.txt")), format!("file {i}\n"))
                .map_err(|e| Error::io("write", e))?;
        }
        let dir = tmp.path().join("s.strata");
        let store = Store::open_or_create(&dir)?;
        let indexer = Indexer::new(&store, &Settings::default())?;
        let options = ScanOptions {
            threads: 2,
            batch_files: 1,
            ..ScanOptions::default()
        };
        let summary = scan(&indexer, std::slice::from_ref(&tree), &options, &mut |_| {})?;
        assert_eq!(summary.created, 20);
        assert!(summary.tx_ids.len() > 1, "{:?}", summary.tx_ids);
        assert!(!store.has_lazy_commits());
        let copy = tmp.path().join("copy.strata");
        std::fs::create_dir_all(&copy).map_err(|e| Error::io("mkdir", e))?;
        std::fs::copy(dir.join("store.redb"), copy.join("store.redb"))
            .map_err(|e| Error::io("copy", e))?;
        let crashed = Store::open(&copy)?;
        assert_eq!(crashed.log(None, usize::MAX)?.len(), summary.tx_ids.len());
        let prefix = crate::resolve::utf8_path(&tree)?;
        let filesystem_id = machine_filesystem_id();
        assert_eq!(
            crashed.entity_ids_by_path(&filesystem_id, prefix)?.len(),
            20
        );
        assert_eq!(crashed.fsck()?, vec![]);
        Ok(())
    }

    #[test]
    fn a_write_stamped_by_the_coarse_clock_just_before_the_scan_is_racy() -> Result<()> {
        let start = Timestamp::from_micros(1_700_000_000_123_456)?;
        // The kernel stamped the write 3 ms before the scan's precise start (one coarse tick).
        let stat = crate::store::FileStat {
            size: 5,
            mtime_ns: 1_700_000_000_120_456_000,
            ctime_ns: 1_700_000_000_120_456_000,
            inode: 9,
        };
        let entry = StatEntry::recorded(stat, crate::hash::sha256(b"hello"), start);
        assert!(!entry.vouches_for(&stat), "{entry:?}");
        // A file last written in an earlier second is trusted.
        let old = crate::store::FileStat {
            mtime_ns: 1_699_999_999_900_000_000,
            ..stat
        };
        assert!(StatEntry::recorded(old, entry.file_hash, start).vouches_for(&old));
        Ok(())
    }

    #[test]
    fn the_store_directory_is_skipped_without_being_named() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let tree = std::fs::canonicalize(tmp.path()).map_err(|e| Error::io("canonicalize", e))?;
        std::fs::write(tree.join("a.txt"), "a\n").map_err(|e| Error::io("write", e))?;
        let store = Store::open_or_create(tree.join(".strata"))?;
        let indexer = Indexer::new(&store, &Settings::default())?;
        let summary = scan(
            &indexer,
            std::slice::from_ref(&tree),
            &ScanOptions::default(),
            &mut |_| {},
        )?;
        assert_eq!(summary.files, 1, "{summary:?}");
        let err = scan(
            &indexer,
            &[tree.join(".strata")],
            &ScanOptions::default(),
            &mut |_| {},
        )
        .map(|_| ())
        .unwrap_err();
        assert!(err.to_string().contains("store directory"), "{err}");
        Ok(())
    }
}
