//! Group commit: writers that arrive while a commit is under way share the next one.
//!
//! The first writer to find no commit running becomes the leader: it takes every request
//! queued so far (its own among them), hands them to [`Backend::transact_group`] (one redb
//! commit, one fsync, each request its own tx id and log record), posts each result, and wakes
//! the writers it answered and the first one still queued, who leads the next commit (waking
//! every waiting writer cost a context switch each for nothing). A writer that arrives
//! meanwhile queues its request and waits; the next leader is one of them. With one writer this is one commit per request, as before; with many, a
//! commit's fsync is shared by everything that queued behind it.
//!
//! Writers woken by one commit come back at nearly the same time, and the first of them would
//! otherwise commit alone while the rest queue behind it (every other commit of one writer).
//! So a leader waits a little for the writers the last commit answered to come back, beside
//! those that queued during it: until its queue holds as many requests as queued during the
//! last commit plus that commit's batch, at most half the last commit's duration and
//! [`MAX_GATHER`]. Without it, 16 writers settle into two batches of 8 taking turns, each paying
//! the commit's fsyncs, where one batch of 16 pays them once for all. The target follows the
//! batches actually committed, so a writer left alone stops waiting after one commit.
//!
//! An index run's batches are bulk: one of them may take far longer to commit than a session
//! commit. A leader that finds both kinds queued commits the interactive requests first and
//! leaves the bulk one for the next commit, where it goes alone (a bulk request is passed over
//! once, so an index always advances); and the indexer asks [`GroupCommit::interactive_recently`]
//! to make its batches small while others write. A session commit then waits behind one small
//! batch at most, never a whole scan nor a commit of thousands of files.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{Backend, Origin, TxReceipt, TxRequest};
use crate::error::{Error, Result};

/// How long lazy commits ([`super::Store::transact_with_stat_lazily`]) may stay not durable:
/// the first commit after that is durable, whatever it holds.
pub const LAZY_FOR: Duration = Duration::from_millis(500);

/// How long the store stays quiet after a commit made under load before [`GroupCommit::sync_due`]
/// says a checkpoint is due.
pub const CHECKPOINT_AFTER: Duration = Duration::from_millis(100);

/// How long after a failed sync (a damaged or read-only store, a full disk) none is due again.
const SYNC_RETRY: Duration = Duration::from_secs(5);

/// The longest a leader waits for the writers of the last batch to queue again.
const MAX_GATHER: Duration = Duration::from_millis(2);

/// The instant [`GroupCommit::interactive_at`] counts from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The queue and results of one store's group commits.
#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    state: Mutex<State>,
    /// Signalled when a commit ends, for [`GroupCommit::sync`] waiting to make its own (writers
    /// are woken one by one, see [`State::sleepers`]).
    finished: Condvar,
    /// Signalled when the queue reaches the batch a gathering leader waits for.
    arrived: Condvar,
    /// When an interactive (not bulk) request last queued: microseconds since [`EPOCH`] plus
    /// one (0: never). Read without the lock by the indexer, once per file.
    interactive_at: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Requests waiting for the next commit, by ticket, each with whether it must be durable.
    queue: Vec<(u64, TxRequest, bool)>,
    /// The bulk request a leader passed over to commit interactive ones first: the next commit
    /// takes it, alone.
    passed_over: Option<u64>,
    /// Results of committed requests whose writers have not picked them up yet.
    results: HashMap<u64, Result<Option<TxReceipt>>>,
    /// Whether a leader is committing now.
    committing: bool,
    /// Whether a leader is waiting for more requests before it commits, and for how many.
    gathering: bool,
    gather_target: usize,
    /// The writers asleep until a commit ends, by ticket: a commit wakes those it answered and
    /// the first writer still queued (the next leader), not every writer waiting (each woken
    /// thread is a context switch, a fifth of the daemon's CPU under a write load).
    sleepers: HashMap<u64, std::thread::Thread>,
    /// How many requests the last commit held, and how long it took.
    last_batch: usize,
    last_took: Duration,
    /// How many requests were queued when the last commit ended (they arrived during it).
    queued_at_end: usize,
    /// Since when lazy commits wait for a durable one, and how many lazy commits were made.
    unsynced: Option<Instant>,
    /// When the last commit made under load ended, while no checkpointed commit followed it: a
    /// crash now would make the next open repair the whole file.
    unchecked: Option<Instant>,
    /// When the last [`GroupCommit::sync`] failed: none is due again for [`SYNC_RETRY`].
    sync_failed: Option<Instant>,
    /// Whether an index run's batch is among the lazy commits waiting for a durable one.
    lazy_bulk: bool,
    /// The first transaction of the lazy commits waiting for a durable one (tx ids are given
    /// in order: every one before it is durable).
    lazy_from: Option<u64>,
    lazy_commits: u64,
    next_ticket: u64,
}

/// Clears the leader's flag and answers its batch even when the backend panics, so that no
/// writer waits for ever (the panic itself goes on up).
struct Leader<'a> {
    group: &'a GroupCommit,
    tickets: Vec<u64>,
    done: bool,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let mut state = self.group.lock();
        if !self.done {
            for ticket in &self.tickets {
                state.results.insert(
                    *ticket,
                    Err(Error::invariant(
                        "the storage engine stopped in the middle of a commit",
                    )),
                );
            }
        }
        state.committing = false;
        for ticket in &self.tickets {
            if let Some(sleeper) = state.sleepers.remove(ticket) {
                sleeper.unpark();
            }
        }
        if let Some(next) = state
            .queue
            .first()
            .and_then(|(ticket, _, _)| state.sleepers.get(ticket))
        {
            next.unpark();
        }
        self.group.finished.notify_all();
    }
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many requests wait for a commit now.
    pub(super) fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether an interactive request (anything but an index run's batch) queued within
    /// `within`: the indexer then commits small batches.
    pub(super) fn interactive_recently(&self, within: Duration) -> bool {
        match self.interactive_at.load(Ordering::Relaxed) {
            0 => false,
            at => {
                let now = EPOCH.elapsed().as_micros();
                now.saturating_sub(u128::from(at - 1)) <= within.as_micros()
            }
        }
    }

    /// Whether lazy commits wait for a durable one.
    pub(super) fn has_lazy_commits(&self) -> bool {
        self.lock().unsynced.is_some()
    }

    /// The first transaction of the lazy commits waiting for a durable one, if any.
    pub(super) fn lazy_from(&self) -> Option<u64> {
        self.lock().lazy_from
    }

    /// Whether an index run's lazy batch waits for a durable commit.
    pub(super) fn has_lazy_index_batches(&self) -> bool {
        self.lock().lazy_bulk
    }

    /// Makes the lazy commits so far durable through `backend`, and reopening after a crash
    /// quick again after commits made under load (a checkpoint): one empty commit, made as the
    /// leader, so that no other commit runs meanwhile. Nothing when neither is needed.
    pub(super) fn sync(&self, backend: &dyn Backend) -> Result<()> {
        let mut state = self.lock();
        while state.committing {
            state = self
                .finished
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.unsynced.is_none() && state.unchecked.is_none() {
            return Ok(());
        }
        state.committing = true;
        drop(state);
        let mut leader = Leader {
            group: self,
            tickets: Vec::new(),
            done: false,
        };
        let result = backend.sync();
        {
            let mut state = self.lock();
            if result.is_ok() {
                state.unsynced = None;
                state.lazy_bulk = false;
                state.lazy_from = None;
                state.unchecked = None;
                state.sync_failed = None;
            } else {
                state.sync_failed = Some(Instant::now());
            }
        }
        leader.done = true;
        drop(leader);
        result
    }

    /// Whether [`GroupCommit::sync`] is due: the commits made under load have been quiet for
    /// [`CHECKPOINT_AFTER`], or lazy commits have waited [`LAZY_FOR`] for a durable one. Nothing
    /// is due while a commit runs or requests wait for one (the next commit or check will do),
    /// nor for [`SYNC_RETRY`] after a sync failed.
    pub(super) fn sync_due(&self) -> bool {
        let state = self.lock();
        !state.committing
            && state.queue.is_empty()
            && state
                .sync_failed
                .is_none_or(|at| at.elapsed() >= SYNC_RETRY)
            && (state
                .unchecked
                .is_some_and(|at| at.elapsed() >= CHECKPOINT_AFTER)
                || state
                    .unsynced
                    .is_some_and(|since| since.elapsed() >= LAZY_FOR))
    }

    /// Commits `request` through `backend`, sharing the commit with whatever else is queued;
    /// without `durable` the commit may be answered before it is durable (see [`LAZY_FOR`]).
    pub(super) fn submit(
        &self,
        backend: &dyn Backend,
        request: TxRequest,
        durable: bool,
    ) -> Result<Option<TxReceipt>> {
        // Before queueing: the leader commits alone, and writers prepare side by side.
        backend.prepare(&request.ops);
        if !is_bulk(&request) {
            let now = u64::try_from(EPOCH.elapsed().as_micros()).unwrap_or(u64::MAX - 1);
            self.interactive_at.store(now + 1, Ordering::Relaxed);
        }
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((ticket, request, durable));
        if state.gathering && state.queue.len() >= state.gather_target {
            self.arrived.notify_one();
        }
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                state.sleepers.remove(&ticket);
                return result;
            }
            if state.committing {
                // Woken by the commit that answers this request, or as the next leader; a
                // spurious wake-up just looks again.
                state.sleepers.insert(ticket, std::thread::current());
                drop(state);
                std::thread::park();
                state = self.lock();
                continue;
            }
            state.committing = true;
            // The writers the last commit answered, and those that queued meanwhile.
            let target = state.queued_at_end + state.last_batch;
            if state.queue.len() < target {
                let deadline = Instant::now() + (state.last_took / 2).min(MAX_GATHER);
                state.gathering = true;
                state.gather_target = target;
                while state.queue.len() < target {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    state = self
                        .arrived
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                state.gathering = false;
            }
            let batch = take_batch(&mut state);
            state.last_batch = batch.len();
            // Under load when it shares the commit or others wait behind it: the commit then
            // skips the quick-repair record, and a checkpoint follows once the load stops.
            let under_load = batch.len() > 1 || !state.queue.is_empty();
            // Durable when one of its requests must be, or lazy commits have waited long enough.
            let durable = batch.iter().any(|(_, _, durable)| *durable)
                || state
                    .unsynced
                    .is_some_and(|since| since.elapsed() >= LAZY_FOR);
            let bulk = batch.iter().any(|(_, request, _)| is_bulk(request));
            drop(state);
            let began = Instant::now();
            let (tickets, requests): (Vec<u64>, Vec<TxRequest>) =
                batch.into_iter().map(|(t, r, _)| (t, r)).unzip();
            let mut leader = Leader {
                group: self,
                tickets: tickets.clone(),
                done: false,
            };
            let results = if !durable {
                backend.transact_group_lazily(requests)
            } else if under_load {
                backend.transact_group_under_load(requests)
            } else {
                backend.transact_group(requests)
            };
            let committed = results.iter().any(Result::is_ok);
            let mut results = results.into_iter();
            {
                let mut state = self.lock();
                state.last_took = began.elapsed();
                state.queued_at_end = state.queue.len();
                if committed && durable {
                    state.unsynced = None;
                    state.lazy_bulk = false;
                    state.lazy_from = None;
                    state.unchecked = under_load.then(Instant::now);
                } else if committed {
                    if state.lazy_from.is_none() {
                        state.lazy_from = results
                            .as_slice()
                            .iter()
                            .filter_map(|r| r.as_ref().ok().and_then(Option::as_ref))
                            .map(|receipt| receipt.tx_id.0)
                            .min();
                    }
                    state.lazy_commits += 1;
                    state.unsynced.get_or_insert_with(Instant::now);
                    state.lazy_bulk |= bulk;
                }
                for ticket in tickets {
                    let result = results.next().unwrap_or_else(|| {
                        Err(Error::invariant("a group commit left a request unanswered"))
                    });
                    state.results.insert(ticket, result);
                }
            }
            leader.done = true;
            drop(leader);
            state = self.lock();
        }
    }
}

/// Whether `request` is a batch of an index run, which may take long to commit.
fn is_bulk(request: &TxRequest) -> bool {
    matches!(request.origin, Origin::IndexRun(_))
}

/// The requests the next commit takes from the queue: all of them, except that interactive
/// requests go before a bulk one queued with them (which then stays for the next commit), and a
/// bulk request once passed over goes alone, first.
fn take_batch(state: &mut State) -> Vec<(u64, TxRequest, bool)> {
    if let Some(ticket) = state.passed_over.take()
        && let Some(at) = state.queue.iter().position(|(t, _, _)| *t == ticket)
    {
        return vec![state.queue.remove(at)];
    }
    let bulk = state.queue.iter().any(|(_, r, _)| is_bulk(r));
    let interactive = state.queue.iter().any(|(_, r, _)| !is_bulk(r));
    if !(bulk && interactive) {
        return std::mem::take(&mut state.queue);
    }
    let (bulk, now): (Vec<_>, Vec<_>) = std::mem::take(&mut state.queue)
        .into_iter()
        .partition(|(_, r, _)| is_bulk(r));
    state.passed_over = bulk.first().map(|(t, _, _)| *t);
    state.queue = bulk;
    now
}

#[cfg(test)]
mod tests {
    use super::super::{Op, Origin, Store};
    use crate::error::{Error, Result};
    use crate::hash::Hash;
    use crate::object::{FilesystemSource, Object};

    fn file(path: &str, text: &str) -> Result<Object> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            text.into(),
        )
    }

    fn request(origin: Origin) -> super::TxRequest {
        super::TxRequest {
            ops: Vec::new(),
            origin,
            stat: None,
        }
    }

    fn tickets(batch: &[(u64, super::TxRequest, bool)]) -> Vec<u64> {
        batch.iter().map(|(t, _, _)| *t).collect()
    }

    /// Interactive requests go before an index batch queued with them; the batch then goes
    /// alone, and is passed over only once (an index always advances).
    #[test]
    fn interactive_requests_commit_before_a_bulk_batch_which_then_goes_alone() {
        let bulk = || request(Origin::IndexRun(None));
        let mut state = super::State {
            queue: vec![
                (1, bulk(), true),
                (2, request(Origin::Session), true),
                (3, request(Origin::Cli), true),
            ],
            ..super::State::default()
        };
        assert_eq!(tickets(&super::take_batch(&mut state)), [2, 3]);
        assert_eq!(tickets(&state.queue), [1]);
        state.queue.push((4, request(Origin::Session), true));
        assert_eq!(tickets(&super::take_batch(&mut state)), [1], "alone");
        assert_eq!(tickets(&super::take_batch(&mut state)), [4]);
        // Only one kind queued: everything at once, in order.
        state.queue = vec![(5, bulk(), true), (6, bulk(), true)];
        assert_eq!(tickets(&super::take_batch(&mut state)), [5, 6]);
        state.queue = vec![
            (7, request(Origin::Watcher), false),
            (8, request(Origin::Cli), true),
        ];
        assert_eq!(tickets(&super::take_batch(&mut state)), [7, 8]);
        assert!(state.queue.is_empty() && state.passed_over.is_none());
    }

    /// `others_writing` sees a session commit, not an index run's own batches.
    #[test]
    fn others_writing_sees_interactive_commits_only() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = Store::create(tmp.path())?;
        let within = std::time::Duration::from_secs(3600);
        assert!(!store.others_writing(within));
        store.transact(vec![Op::put(file("/a", "a")?)], Origin::IndexRun(None))?;
        assert!(
            !store.others_writing(within),
            "an index batch is not another writer"
        );
        store.transact(vec![Op::put(file("/b", "b")?)], Origin::Session)?;
        assert!(store.others_writing(within));
        Ok(())
    }

    #[test]
    fn concurrent_writers_share_commits_and_each_keeps_its_own_tx() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = Store::create(tmp.path())?;
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let store = store.clone();
                std::thread::spawn(move || -> Result<u64> {
                    let mut last = 0;
                    for n in 0..10 {
                        let object = file(&format!("/t{i}/f{n}"), &format!("{i} {n}"))?;
                        last = store.transact(vec![Op::put(object)], Origin::Cli)?.tx_id.0;
                    }
                    Ok(last)
                })
            })
            .collect();
        for thread in threads {
            thread
                .join()
                .map_err(|_| Error::invariant("a writer panicked"))??;
        }
        // 160 transactions, numbered 1..=160 without gaps, the chain whole.
        let log = store.log(None, usize::MAX)?;
        let ids: Vec<u64> = log.iter().map(|r| r.tx_id.0).collect();
        assert_eq!(ids, (1..=160).collect::<Vec<_>>());
        assert!(store.fsck()?.is_empty());
        Ok(())
    }

    /// Writers at once commit under load (no quick-repair record); once they stop, a sync is
    /// due after the quiet time and makes the store quick to reopen again; a lone writer's
    /// commit is checkpointed itself.
    #[test]
    fn commits_under_load_are_followed_by_a_checkpoint_once_quiet() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = Store::create(tmp.path())?;
        let unchecked = |store: &Store| store.group.lock().unchecked.is_some();
        store.transact(vec![Op::put(file("/alone", "a")?)], Origin::Cli)?;
        assert!(!unchecked(&store), "a lone commit is checkpointed");
        assert!(!store.sync_due());
        // 16 writers of 10 commits each share commits; the burst's last commit may still be
        // a lone one (checkpointed itself), so bursts go on until one ends under load.
        let mut last = None;
        let mut bursts = 0;
        while last.is_none() && bursts < 20 {
            bursts += 1;
            let threads: Vec<_> = (0..16)
                .map(|i| {
                    let store = store.clone();
                    std::thread::spawn(move || -> Result<()> {
                        for n in 0..10 {
                            let object =
                                file(&format!("/t{i}/f{n}"), &format!("{bursts} {i} {n}"))?;
                            store.transact(vec![Op::put(object)], Origin::Cli)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for thread in threads {
                thread
                    .join()
                    .map_err(|_| Error::invariant("a writer panicked"))??;
            }
            last = store.group.lock().unchecked;
        }
        let Some(at) = last else {
            return Err(Error::invariant("no burst ended with a commit under load"));
        };
        std::thread::sleep(super::CHECKPOINT_AFTER.saturating_sub(at.elapsed()));
        assert!(
            store.sync_due(),
            "quiet for the checkpoint time: a sync is due"
        );
        store.sync()?;
        assert!(!unchecked(&store) && !store.sync_due());
        assert_eq!(store.log(None, usize::MAX)?.len(), 1 + 160 * bursts);
        Ok(())
    }

    #[test]
    fn lazy_commits_keep_their_order_and_a_durable_commit_or_a_close_makes_them_durable()
    -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let stat = || super::super::StatUpdate {
            filesystem_id: "fs".into(),
            puts: Vec::new(),
            removes: Vec::new(),
        };
        let unsynced = |store: &Store| store.has_lazy_commits();
        {
            let store = Store::create(tmp.path())?;
            let lazy = store.transact_with_stat_lazily(
                vec![Op::put(file("/a", "a")?)],
                Origin::Cli,
                stat(),
            )?;
            assert_eq!(lazy.map(|r| r.tx_id.0), Some(1));
            assert!(unsynced(&store), "a lazy commit waits for a durable one");
            let durable = store.transact(vec![Op::put(file("/b", "b")?)], Origin::Cli)?;
            assert_eq!(durable.tx_id.0, 2);
            assert!(!unsynced(&store), "the durable commit made it durable");
            store.transact_with_stat_lazily(
                vec![Op::put(file("/c", "c")?)],
                Origin::Cli,
                stat(),
            )?;
            assert!(unsynced(&store));
            store.sync()?;
            assert!(!unsynced(&store), "sync made it durable");
            // The last one is left lazy: closing the store keeps it.
            store.transact_with_stat_lazily(
                vec![Op::put(file("/d", "d")?)],
                Origin::Cli,
                stat(),
            )?;
            assert!(unsynced(&store));
        }
        let store = Store::open(tmp.path())?;
        let ids: Vec<u64> = store
            .log(None, usize::MAX)?
            .iter()
            .map(|r| r.tx_id.0)
            .collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        assert!(store.entity_exists(file("/d", "d")?.id())?);
        assert!(store.fsck()?.is_empty());
        Ok(())
    }

    #[test]
    fn a_failing_request_in_a_group_changes_nothing_and_the_others_commit() -> Result<()> {
        let store = Store::in_memory()?;
        let a = file("/a", "a")?;
        store.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        let group = vec![
            super::TxRequest {
                ops: vec![Op::put(file("/b", "b")?)],
                origin: Origin::Cli,
                stat: None,
            },
            super::TxRequest {
                // A failed match after a put of its own: the put must not stay.
                ops: vec![
                    Op::put(file("/c", "c")?),
                    Op::Match {
                        entity: a.id().to_string(),
                        expected: Some(Hash([7; 32])),
                    },
                ],
                origin: Origin::Cli,
                stat: None,
            },
            super::TxRequest {
                ops: vec![Op::put(file("/d", "d")?)],
                origin: Origin::Cli,
                stat: None,
            },
        ];
        let results = store.transact_group(group);
        assert!(matches!(results[0], Ok(Some(_))), "{:?}", results[0]);
        assert!(
            matches!(results[1], Err(Error::Conflict { .. })),
            "{:?}",
            results[1]
        );
        assert!(matches!(results[2], Ok(Some(_))), "{:?}", results[2]);
        let c = file("/c", "c")?;
        assert!(
            !store.entity_exists(c.id())?,
            "the failed request's put stayed"
        );
        let ids: Vec<u64> = store
            .log(None, usize::MAX)?
            .iter()
            .map(|r| r.tx_id.0)
            .collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert!(store.fsck()?.is_empty());
        Ok(())
    }
}
