//! Following other processes' commits on a store they share (PostgreSQL): a thread `LISTEN`s
//! on the store's channel, and the engine publishes the [`super::CommitEvent`] of each
//! transaction it did not commit itself, once, as it publishes its own; the live sessions those
//! commits wrote are loaded again at their next request, and the file metadata of the others
//! refreshed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Engine, Result, lock};
use crate::store::TxId;
use crate::store::{PgListener, PgLocation};

/// How long the following thread waits for a notification before it looks at its stop flag.
const WAIT: Duration = Duration::from_millis(200);
/// How long it waits before listening again after the connection failed.
const RETRY: Duration = Duration::from_secs(1);

/// What the engine has published while it follows other writers.
#[derive(Debug, Default)]
pub(super) struct Followed {
    /// Every transaction up to this one is published (or was before following began).
    pub(super) seen: u64,
    /// This engine's own transactions after `seen`, published already.
    pub(super) own: BTreeSet<u64>,
}

/// The thread that follows other processes' commits ([`Engine::follow_other_writers`]); it
/// stops, and is joined, when this is dropped.
#[derive(Debug)]
pub struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The following thread: publishes what each notification names until `stop`, listening
/// again (and catching up to the head) when the connection fails.
fn follow(
    engine: &Weak<Engine>,
    location: &PgLocation,
    mut listener: PgListener,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.wait(WAIT) {
            Ok(Some(tx)) => match engine.upgrade() {
                Some(engine) => engine.follow_commits(tx),
                None => return,
            },
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, "following other writers' commits; listening again");
                std::thread::sleep(RETRY);
                let Ok(again) = location.listen() else {
                    continue;
                };
                listener = again;
                // Notifications sent while no one listened are lost: the head says what came.
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                if let Ok(Some((head, _))) = engine.store.chain_head() {
                    engine.follow_commits(head.0);
                }
            }
        }
    }
}

impl Engine {
    /// Starts following other processes' commits when the store lives in PostgreSQL, which
    /// several daemons and command lines may write: their transactions reach this engine's
    /// subscribers as its own do ([`Engine::subscribe`]). `None` for a store no other process
    /// writes meanwhile (redb, in memory).
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the database cannot be reached.
    pub fn follow_other_writers(self: &Arc<Self>) -> Result<Option<Follower>> {
        let Some(dir) = self.dir() else {
            return Ok(None);
        };
        let Some(location) = crate::store::backend_of(dir)? else {
            return Ok(None);
        };
        // Listening before the head is read: no commit falls between the two.
        let listener = location.listen()?;
        let head = self.store.chain_head()?.map_or(0, |(tx, _)| tx.0);
        *lock(&self.followed) = Some(Followed {
            seen: head,
            own: BTreeSet::new(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let engine = Arc::downgrade(self);
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("strata-follow".into())
            .spawn(move || follow(&engine, &location, listener, &stopping))
            .map_err(|e| crate::Error::io("starting the thread that follows commits", e))?;
        Ok(Some(Follower {
            stop,
            thread: Some(thread),
        }))
    }

    /// Publishes the events of the transactions up to `tx` that this engine did not commit
    /// itself (other processes'), each once, and drops the live sessions they committed (their
    /// next request loads them again). Nothing when the engine does not follow other writers.
    pub fn follow_commits(&self, tx: u64) {
        let foreign: Vec<u64> = {
            let mut followed = lock(&self.followed);
            let Some(followed) = followed.as_mut() else {
                return;
            };
            if tx <= followed.seen {
                return;
            }
            let from = followed.seen + 1;
            followed.seen = tx;
            let foreign = (from..=tx).filter(|t| !followed.own.remove(t)).collect();
            followed.own.retain(|&t| t > tx);
            foreign
        };
        let (Some(&first), Some(&last)) = (foreign.first(), foreign.last()) else {
            return;
        };
        // One read of the log for all of them (a notification often names several).
        // Best effort, as for the engine's own commits: the log has what cannot be read.
        let span = usize::try_from(last - first + 1).unwrap_or(usize::MAX);
        let Ok(records) = self.store.log(Some(TxId(first - 1)), span) else {
            return;
        };
        for record in records.iter().filter(|r| foreign.contains(&r.tx_id.0)) {
            let event = self.event_of(record);
            for sid in &event.sessions {
                self.forget_session_before(sid, event.tx_id);
            }
            self.refresh_sessions(&event.paths);
            lock(&self.subscribers).retain(|s| s.send(event.clone()).is_ok());
        }
    }
}
