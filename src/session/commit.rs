//! Committing: the session document, the queue of ops waiting for the next commit, and the
//! commit itself (one store transaction).

use super::*;

impl Session {
    /// The session document as it would be committed now.
    ///
    /// # Errors
    /// Never in practice (hashing the fields).
    pub fn document(&self) -> Result<Object> {
        Object::session(self.fields())
    }

    pub(super) fn fields(&self) -> SessionFields {
        SessionFields {
            session_id: self.session_id.clone(),
            chat_ref: format!("chat:{}", self.session_id),
            system_prompt_ref: format!("system_prompt:{}", self.session_id),
            session_index: self.sets.index().shared_ids(),
            metadata_pool: self.sets.pool().shared_ids(),
            active_set: self.sets.active().shared_ids(),
            pinned_set: self.sets.pinned().shared_ids(),
        }
    }

    /// [`Session::document`] with its JSON from the sets' kept texts (only what was appended
    /// since the last commit is written): what [`Session::commit`] writes.
    pub(super) fn document_kept(&mut self) -> Result<Object> {
        let fields = self.fields();
        let [index, pool, active, pinned] = self.sets.json_inners();
        let json = std::sync::Arc::new(session_json_of_parts(&SessionJsonParts {
            session_id: &fields.session_id,
            chat_ref: &fields.chat_ref,
            system_prompt_ref: &fields.system_prompt_ref,
            session_index: index,
            metadata_pool: pool,
            active_set: active,
            pinned_set: pinned,
        }));
        let hash = self.document_hasher.hash(&json);
        Object::session_with_json(fields, json, hash)
    }

    pub(super) fn writable(&self) -> Result<()> {
        match self.view {
            Some(tx) => Err(Error::invalid_input(format!(
                "session {} is a read-only view of tx {}; fork it to continue from there",
                self.session_id, tx.0
            ))),
            None => Ok(()),
        }
    }

    /// Queues `planned`'s ops (replacing any earlier op on the same entity) and refreshes the
    /// cache; an unchanged plan drops a queued op, since the store already holds the truth.
    pub(super) fn apply_planned(&mut self, planned: &Planned, source: &FilesystemSource) {
        match planned.ops.first() {
            None => {
                self.unqueue(&planned.id);
            }
            Some(op) => {
                self.queue(op.clone());
                let meta = match op {
                    Op::Put(put) => meta_of(&self.resolver, &put.object),
                    _ => Some(deleted_meta(&self.resolver, source.clone())),
                };
                if let Some(meta) = meta {
                    self.cache.insert(planned.id.clone(), meta);
                }
            }
        }
    }

    pub(super) fn queue(&mut self, op: Op) {
        let id = op.entity().to_string();
        match self.pending_at.get(&id) {
            Some(&at) => self.pending[at] = op,
            None => {
                self.pending_at.insert(id, self.pending.len());
                self.pending.push(op);
            }
        }
    }

    pub(super) fn unqueue(&mut self, id: &str) {
        if let Some(at) = self.pending_at.remove(id) {
            self.pending.remove(at);
            for slot in self.pending_at.values_mut() {
                if *slot > at {
                    *slot -= 1;
                }
            }
        }
    }

    /// The object queued for `id`, if a put is waiting for the next commit.
    pub(super) fn queued_object(&self, id: &str) -> Option<&Object> {
        match self.pending.get(*self.pending_at.get(id)?)? {
            Op::Put(put) => Some(&put.object),
            _ => None,
        }
    }

    /// Makes sure the cache knows `id` (after an unchanged plan on an entity not yet cached).
    pub(super) fn ensure_cached(&mut self, id: &str) -> Result<()> {
        if self.cache.contains_key(id) {
            return Ok(());
        }
        if let Some(version) = self.store.get_if_known(id)? {
            let meta = match version.object {
                Some(object) => meta_of(&self.resolver, &object),
                None => match self.store.entity(id)?.source {
                    Some(Source::Filesystem(source)) => Some(deleted_meta(&self.resolver, source)),
                    None => None,
                },
            };
            if let Some(meta) = meta {
                self.cache.insert(id.to_string(), meta);
            }
        }
        Ok(())
    }

    /// Whether anything waits for [`Session::commit`].
    ///
    /// # Errors
    /// Never in practice (hashing the session document).
    pub fn has_changes(&self) -> Result<bool> {
        Ok(!self.pending.is_empty()
            || self.chat_dirty
            || self.prompt_dirty
            || self.config_dirty
            || self.file_ids.is_dirty()
            || self.sets_changed()?)
    }

    /// Whether the session document differs from the last commit's. Hashes the document only
    /// when the sets changed since (the revision counter moved).
    pub(super) fn sets_changed(&self) -> Result<bool> {
        if self.committed.is_some() && self.committed_revision == Some(self.sets.revision()) {
            return Ok(false);
        }
        Ok(self.committed != Some(*self.document()?.object_hash()))
    }

    /// Writes everything new (indexed files, tool calls, chat, system prompt) and the session
    /// document as one transaction; `None` when nothing changed (stat cache entries may still be
    /// written). Fails with [`Error::Conflict`] when another writer committed this session since
    /// it was loaded.
    ///
    /// # Errors
    /// Store errors; on error nothing is written and the session keeps its uncommitted changes.
    pub fn commit(&mut self) -> Result<Option<TxReceipt>> {
        self.commit_as(true)
    }

    /// [`Session::commit`] answered before the commit is durable
    /// ([`Store::transact_with_stat_lazily`]): for what only records reads (a read-only agent
    /// tool call), which a crash may lose until the next durable commit.
    ///
    /// # Errors
    /// As [`Session::commit`].
    pub fn commit_lazily(&mut self) -> Result<Option<TxReceipt>> {
        self.commit_as(false)
    }

    fn commit_as(&mut self, durable: bool) -> Result<Option<TxReceipt>> {
        self.writable()?;
        // Lazy only for what records reads: tool calls, and the file versions a read indexed
        // from disk (an observation the next read makes again). A commit that numbers files or
        // changes the configuration (descriptors, callers) or the prompt is durable, since what
        // the agent was told (file ids, fd numbers) must survive a crash.
        let durable = durable
            || self.file_ids.is_dirty()
            || self.config_dirty
            || self.prompt_dirty
            || self.pending.iter().any(|op| match op {
                Op::Put(put) => !matches!(
                    put.object.object_type(),
                    ObjectType::Toolcall | ObjectType::File
                ),
                _ => true,
            });
        let store = self.store.clone();
        let transact = |ops, stat| {
            if durable {
                store.transact_with_stat(ops, Origin::Session, stat)
            } else {
                store.transact_with_stat_lazily(ops, Origin::Session, stat)
            }
        };
        // The session document is built (and hashed) once: only when the sets moved since the
        // last commit, and then it is both the change test and the document written.
        let sets_moved =
            self.committed.is_none() || self.committed_revision != Some(self.sets.revision());
        let document = if sets_moved {
            Some(self.document_kept()?)
        } else {
            None
        };
        let changed = !self.pending.is_empty()
            || self.chat_dirty
            || self.prompt_dirty
            || self.config_dirty
            || self.file_ids.is_dirty()
            || document
                .as_ref()
                .is_some_and(|d| self.committed != Some(*d.object_hash()));
        if !changed {
            if !self.stat.is_empty() {
                transact(Vec::new(), self.stat.clone())?;
                self.stat.puts.clear();
                self.stat.removes.clear();
            }
            return Ok(None);
        }
        let session = match document {
            Some(document) => document,
            None => self.document_kept()?,
        };
        let mut ops = self.pending.clone();
        let mut chat_hash = self.committed_chat;
        if self.chat_dirty {
            let chat = self.chat_text.object(&self.session_id, &self.turns)?;
            chat_hash = Some(*chat.object_hash());
            // Optimistic concurrency on the chat too: two writers appending turns conflict.
            ops.push(Op::Match {
                entity: format!("chat:{}", self.session_id),
                expected: self.committed_chat,
            });
            ops.push(Op::put(chat));
        }
        if self.prompt_dirty {
            ops.push(Op::put(Object::system_prompt(
                &self.session_id,
                self.system_prompt.clone(),
            )?));
        }
        if self.config_dirty {
            let json = serde_json::to_value(&self.config)
                .map_err(|e| Error::invalid_input(format!("session config: {e}")))?;
            let fields = match self.config_type {
                ObjectType::SystemPrompt => Fields::SystemPrompt,
                _ => Fields::SessionConfig,
            };
            ops.push(Op::put(Object::from_parts(
                Some(&config_entity(&self.session_id)),
                None,
                None,
                Some(crate::hash::canonical_json(&json)?),
                fields,
                None,
            )?));
        }
        let files_dirty = self.file_ids.is_dirty();
        if files_dirty {
            let text = self.file_ids.text().to_string();
            ops.push(Op::put(Object::session_config(
                &files_entity(&self.session_id),
                text,
            )?));
        }
        let hash = *session.object_hash();
        ops.push(Op::Match {
            entity: session_entity(&self.session_id),
            expected: self.committed,
        });
        ops.push(Op::put(session));
        let revision = self.sets.revision();
        // The stat cache entries are taken only now: an error above leaves them queued, and a
        // failed transaction gives them back.
        let stat = StatUpdate {
            filesystem_id: self.stat.filesystem_id.clone(),
            puts: std::mem::take(&mut self.stat.puts),
            removes: std::mem::take(&mut self.stat.removes),
        };
        let receipt = match transact(ops, stat.clone()) {
            Ok(Some(receipt)) => receipt,
            Ok(None) => {
                self.stat = stat;
                return Err(Error::invariant("a session commit wrote no transaction"));
            }
            Err(e) => {
                self.stat = stat;
                return Err(e);
            }
        };
        self.pending.clear();
        self.pending_at.clear();
        self.chat_dirty = false;
        self.prompt_dirty = false;
        self.config_dirty = false;
        if files_dirty {
            self.file_ids.mark_stored();
        }
        self.committed = Some(hash);
        self.committed_revision = Some(revision);
        self.committed_chat = chat_hash;
        self.last_tx = Some(receipt.tx_id);
        Ok(Some(receipt))
    }
}
