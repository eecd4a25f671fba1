//! Group commit: writers that arrive while a commit is under way share the next one.
//!
//! The first writer to find no commit running becomes the leader: it takes every request
//! queued so far (its own among them), hands them to [`Backend::transact_group`] (one redb
//! commit, one fsync, each request its own tx id and log record), posts each result, and wakes
//! the others. A writer that arrives meanwhile queues its request and waits; the next leader
//! is one of them. With one writer this is one commit per request, as before; with many, a
//! commit's fsync is shared by everything that queued behind it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::{Backend, TxReceipt, TxRequest};
use crate::error::{Error, Result};

/// The queue and results of one store's group commits.
#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    state: Mutex<State>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Requests waiting for the next commit, by ticket.
    queue: Vec<(u64, TxRequest)>,
    /// Results of committed requests whose writers have not picked them up yet.
    results: HashMap<u64, Result<Option<TxReceipt>>>,
    /// Whether a leader is committing now.
    committing: bool,
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

    /// Commits `request` through `backend`, sharing the commit with whatever else is queued.
    pub(super) fn submit(
        &self,
        backend: &dyn Backend,
        request: TxRequest,
    ) -> Result<Option<TxReceipt>> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((ticket, request));
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                return result;
            }
            if state.committing {
                state = self
                    .finished
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.committing = true;
            let batch = std::mem::take(&mut state.queue);
            drop(state);
            let (tickets, requests): (Vec<u64>, Vec<TxRequest>) = batch.into_iter().unzip();
            let mut leader = Leader {
                group: self,
                tickets: tickets.clone(),
                done: false,
            };
            let mut results = backend.transact_group(requests).into_iter();
            {
                let mut state = self.lock();
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
