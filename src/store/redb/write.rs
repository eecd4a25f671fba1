//! Writing: [`WriteTables`], the write tables of one redb transaction, which applies op bodies (shared by
//! `transact` and `fsck_rebuild`), and [`RedbStore::transact`].

use super::*;

/// The write tables of one transaction.
pub(crate) struct WriteTables<'t> {
    /// The transaction, for the filesystem tables (`fsnum`), opened per call.
    pub(super) wtx: &'t WriteTransaction,
    /// Filesystem id → its key prefix in `paths` (`fsnum::write_key`), once registered.
    pub(super) fs_keys: HashMap<String, Vec<u8>>,
    /// Whether a filesystem without a number gets one (false when fsck replays a format-4 file
    /// opened read-only: its rows all have long keys).
    pub(super) register_filesystems: bool,
    pub(super) meta: Table<'t, &'static str, &'static [u8]>,
    pub(super) blobs: BlobTables<'t>,
    pub(super) docs: DocTables<'t>,
    pub(super) entities: Table<'t, &'static [u8], &'static [u8]>,
    pub(super) entity_ids: Table<'t, u64, &'static [u8]>,
    pub(super) versions: Table<'t, (u64, i64, u64), &'static [u8]>,
    pub(super) by_tx: Table<'t, (u64, u64), (i64, u64)>,
    pub(super) match_ops: Table<'t, (u64, u64, u32), ()>,
    pub(super) tx_log: Table<'t, u64, &'static [u8]>,
    pub(super) tx_ops: Table<'t, (u64, u32), &'static [u8]>,
    pub(super) evicted_ops: Table<'t, (u64, u32), u64>,
    /// The tables keyed by directory number: the files' paths (`paths_by_dir`, format 10) and
    /// the stat cache, with the directories.
    pub(super) dirs: super::dirnum::DirTables<'t>,
    /// `paths` rows of the entities this transaction created, inserted in key order by
    /// [`WriteTables::finish`]: a scan's files arrive in no useful order, and random inserts left the
    /// table's pages 42 % full (`tools/bench --small`).
    pub(super) new_paths: Vec<(Vec<u8>, String, u64)>,
    /// Match ops of this transaction on an entity absent when they applied (a session's first
    /// commit matches "absent" before its put): (entity, tx, op index), placed by
    /// [`WriteTables::end_tx`] once the transaction's writes have created what they create.
    pub(super) absent_matches: Vec<(String, u64, u32)>,
    /// The entities this transaction evicted.
    pub(super) evicted: std::collections::HashSet<String>,
    /// The handle's cache of delta bases (`None` when replaying the log).
    pub(super) base_cache: Option<&'t docs::BaseCache>,
    /// Set when fsck replays the log into a scratch store that holds the derived tables and the
    /// document index only: an eviction then drops rows and document references, not contents.
    pub(super) derived_only: bool,
    /// The entity ids of the matches placed under [`ABSENT_EID`] by this handle, by (tx, op
    /// index): a replay's eviction finds them here (it has no op bodies to read).
    pub(super) absent_match_ids: HashMap<(u64, u32), String>,
    /// The entity numbers a replay gives the entities it creates (the numbers the store gave
    /// them, which evictions before them made), when that number is free.
    pub(super) eid_hints: HashMap<String, u64>,
    /// Bytes put and stored by this transaction's puts, added to the `meta` counters once by
    /// [`WriteTables::finish`] rather than read and written back per put (four B-tree
    /// operations of each file of a scan).
    pub(super) pending_bytes: (i64, i64),
    /// The next entity number `create_entity` gives without a hint (`entity_ids`' last + 1),
    /// once read; forgotten when an eviction removes an entity number.
    pub(super) next_eid: Option<u64>,
    /// `meta[BY_TX_OMITTED_SINCE]`: from this transaction on, a first write of one version row
    /// has no `versions_by_tx` row (`u64::MAX`: never).
    pub(super) by_tx_since: u64,
    /// `meta[SOURCES_IN_IDS_SINCE]`: from this transaction on, a new file named by its source
    /// keeps the source in `entity_ids` (`u64::MAX`: never).
    pub(super) sources_since: u64,
    /// `meta[SHORT_ENTITY_KEYS_SINCE]`: from this transaction on, a new file named by its
    /// source gets a short `entities` key (store format 8) unless another row holds it.
    pub(super) short_since: u64,
    /// `meta[DOC_SEQS_SINCE]`: from this transaction on, a file's version rows name their
    /// document by its `doc_data` number (store format 8, `codec::VERSION_BY_SEQ`;
    /// `u64::MAX`: never).
    pub(super) doc_seqs_since: u64,
    /// The object hashes of `doc_data` numbers, for a writer without `doc_data` (fsck's
    /// replay); empty: the hashes are recomputed from `doc_data`.
    pub(super) seq_hashes: HashMap<u64, [u8; 32]>,
}

impl<'t> EntityTables for WriteTables<'t> {
    type Entities = Table<'t, &'static [u8], &'static [u8]>;
    type Ids = Table<'t, u64, &'static [u8]>;
    fn entities(&self) -> &Self::Entities {
        &self.entities
    }
    fn entity_ids(&self) -> &Self::Ids {
        &self.entity_ids
    }
    fn filesystem(&self, n: u32) -> Result<Option<String>> {
        // Opened for the call, as `fsnum::write_key` opens it.
        let table = self.wtx.open_table(FILESYSTEM_IDS).db()?;
        entity::filesystem_in(Some(&table), n)
    }
}

impl<'t> WriteTables<'t> {
    pub(super) fn open(tx: &'t WriteTransaction) -> Result<Self> {
        let mut meta = tx.open_table(META).db()?;
        let tx_log = tx.open_table(TX_LOG).db()?;
        if meta.get(EVICTIONS_SINCE).db()?.is_none() {
            // A store made before `evicted_ops`: evictions are recorded from the next tx on.
            let next = tx_log.last().db()?.map_or(1, |(k, _)| k.value() + 1);
            meta.insert(EVICTIONS_SINCE, next.to_le_bytes().as_slice())
                .db()?;
        }
        let by_tx_since = by_tx_omitted_since(&meta)?;
        let sources_since = sources_in_ids_since(&meta)?;
        let short_since = short_keys_since(&meta)?;
        let doc_seqs_since = doc_seqs_since(&meta)?;
        // 0 when absent: no document number was erased from the end.
        let numbers_from = read_counter(&meta, DOC_NUMBERS_FROM)?;
        let chunk = blobs::chunk_size(&meta)?;
        let dirs = super::dirnum::DirTables::open(tx, &meta)?;
        Ok(WriteTables {
            wtx: tx,
            fs_keys: HashMap::new(),
            register_filesystems: true,
            meta,
            blobs: BlobTables::open(tx, chunk)?,
            docs: DocTables {
                index: tx.open_table(DOC_INDEX).db()?,
                data: tx.open_table(DOC_DATA).db()?,
                fresh: None,
                numbers_from: (numbers_from, false),
            },
            entities: tx.open_table(ENTITIES).db()?,
            entity_ids: tx.open_table(ENTITY_IDS).db()?,
            versions: tx.open_table(VERSIONS).db()?,
            by_tx: tx.open_table(VERSIONS_BY_TX).db()?,
            match_ops: tx.open_table(MATCH_OPS).db()?,
            tx_log,
            tx_ops: tx.open_table(TX_OPS).db()?,
            evicted_ops: tx.open_table(EVICTED_OPS).db()?,
            dirs,
            new_paths: Vec::new(),
            absent_matches: Vec::new(),
            evicted: std::collections::HashSet::new(),
            base_cache: None,
            derived_only: false,
            absent_match_ids: HashMap::new(),
            eid_hints: HashMap::new(),
            pending_bytes: (0, 0),
            next_eid: None,
            by_tx_since,
            sources_since,
            short_since,
            doc_seqs_since,
            seq_hashes: HashMap::new(),
        })
    }

    /// Places the match ops of transaction `tx` whose entity was absent when they applied
    /// (call after its op bodies are written): under the entity's eid when the transaction
    /// created it, nowhere when the transaction evicted it (the body goes, as evict's do), else
    /// under [`ABSENT_EID`], where an eviction of a later entity of that id finds them.
    pub(super) fn end_tx(&mut self) -> Result<()> {
        for (entity, tx, n) in std::mem::take(&mut self.absent_matches) {
            if let Some(rec) = entity_rec(self, &entity)? {
                self.match_ops.insert((rec.eid, tx, n), ()).db()?;
            } else if self.evicted.contains(&entity) {
                self.tx_ops.remove((tx, n)).db()?;
                self.evicted_ops.insert((tx, n), tx).db()?;
            } else {
                self.match_ops.insert((ABSENT_EID, tx, n), ()).db()?;
                if self.derived_only {
                    self.absent_match_ids.insert((tx, n), entity);
                }
            }
        }
        self.evicted.clear();
        Ok(())
    }

    /// Writes what the transactions' ops deferred (new `paths` rows, in key order; the byte
    /// counters; the blob stream's last chunk).
    pub(super) fn finish(&mut self) -> Result<()> {
        self.blobs.flush()?;
        self.save_numbers_from()?;
        let (put, stored) = std::mem::take(&mut self.pending_bytes);
        if put != 0 {
            self.add_counter(PUT_BYTES, put)?;
        }
        if stored != 0 {
            self.add_counter(STORED_BYTES, stored)?;
        }
        self.write_paths()?;
        self.dirs.save(&mut self.meta)
    }

    /// Writes the new `paths` rows deferred so far, in key order (the byte counters stay
    /// pending: a group commit adds them once, in [`WriteTables::finish`]).
    pub(super) fn write_paths(&mut self) -> Result<()> {
        let rows = std::mem::take(&mut self.new_paths);
        self.dirs.put_paths(&rows)?;
        Ok(())
    }

    /// The key prefix of filesystem `id` in `paths` and `stat_cache`: its number's when it has
    /// one or gets one here (`register`), else its id's (`fsnum`).
    pub(super) fn fs_key(&mut self, id: &str, register: bool) -> Result<Vec<u8>> {
        if let Some(key) = self.fs_keys.get(id) {
            return Ok(key.clone());
        }
        let register = register && self.register_filesystems;
        let key = super::fsnum::write_key(self.wtx, id, register)?;
        if register {
            self.fs_keys.insert(id.to_string(), key.clone());
        }
        Ok(key)
    }

    pub(super) fn add_counter(&mut self, name: &str, delta: i64) -> Result<()> {
        let current = read_counter(&self.meta, name)?;
        let next = current.saturating_add_signed(delta);
        self.meta.insert(name, next.to_le_bytes().as_slice()).db()?;
        Ok(())
    }
}

/// How a group commit is made durable ([`RedbStore::transact_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitMode {
    /// Durable, with redb's quick-repair record (the allocator state, and a second fsync):
    /// reopening the file after a crash that follows it is quick.
    Checkpointed,
    /// Durable, without the quick-repair record: one fsync. A crash before the next
    /// checkpointed commit makes the next open check every page of the file (a full repair).
    UnderLoad,
    /// Not synced: the next durable commit (or closing the store) makes it durable, and a crash
    /// before then loses it.
    Lazy,
}

/// Everything a writer needs to apply op bodies: shared by `transact` and `fsck_rebuild`.
impl<'t> WriteTables<'t> {
    /// Applies one resolved op body of transaction `tx` (op index `n`).
    pub(super) fn apply(&mut self, tx: u64, tx_time: i64, n: u32, op: &OpRec) -> Result<()> {
        match op {
            OpRec::Write(w) => {
                let existing = entity_rec(self, &w.entity)?;
                self.apply_write(tx, tx_time, n, w, existing)?;
            }
            OpRec::Evict { entity } => {
                if let Some(rec) = entity_rec(self, entity)? {
                    self.evict(entity, &rec, tx)?;
                }
                self.evicted.insert(entity.0.clone());
            }
            OpRec::Match { entity, .. } => match entity_rec(self, entity)? {
                Some(rec) => {
                    self.match_ops.insert((rec.eid, tx, n), ()).db()?;
                }
                None => self.absent_matches.push((entity.0.clone(), tx, n)),
            },
        }
        Ok(())
    }

    /// Applies the write body `w` of transaction `tx` (op index `n`) to the entity whose record
    /// was read just before (`existing`; `None`: absent, so `w` creates it).
    pub(super) fn apply_write(
        &mut self,
        tx: u64,
        tx_time: i64,
        n: u32,
        w: &codec::WriteRec,
        existing: Option<EntityRec>,
    ) -> Result<()> {
        let new = VersionRec::of_write(w, n);
        // Only a file's rows name their document by number: a file's document is never a
        // delta, so its hash is recomputed from its record alone.
        let is_file = match (&existing, &w.first) {
            (Some(rec), _) => rec.source.is_some(),
            (None, Some(first)) => first.source.is_some(),
            (None, None) => false,
        };
        let by_seq = is_file && tx >= self.doc_seqs_since;
        match (existing, &w.first) {
            (Some(rec), _) => {
                let rows = temporal::plan_write(
                    &self.versions,
                    &self.doc_hashes(),
                    rec.eid,
                    w.valid_from,
                    w.valid_to,
                    &new,
                    tx_time,
                )?;
                for (vt, row) in rows {
                    self.insert_row(rec.eid, vt, tx, &row, by_seq)?;
                }
            }
            (None, Some(first)) => {
                // A new entity has no rows yet: its first ones are planned and placed without
                // reading `versions` or `versions_by_tx` (a scan's files are mostly new).
                let eid = self.create_entity(&w.entity, first, tx)?;
                let rows =
                    crate::store::rule::plan_first_write(w.valid_from, w.valid_to, &new, tx_time);
                // One row (a put from now on): no `versions_by_tx` row, its readers take the
                // entity's only version row (format 5, `temporal::latest_at`).
                let omit = temporal::omits_first_by_tx(rows.len(), tx, self.by_tx_since);
                let mut latest: Option<(i64, u64)> = None;
                for (vt, row) in rows {
                    let max = match latest {
                        Some((max_vt, max_tx)) if max_vt > vt => (max_vt, max_tx),
                        _ => (vt, tx),
                    };
                    latest = Some(max);
                    self.write_row(eid, vt, tx, &row, (!omit).then_some(max), by_seq)?;
                }
            }
            (None, None) => return Err(unknown_entity(&w.entity)),
        }
        Ok(())
    }

    /// Creates entity `id` (first written by `first` in transaction `tx`) with the next free
    /// number (or the one a replay hints), and queues its `paths` row.
    pub(super) fn create_entity(&mut self, id: &str, first: &FirstRec, tx: u64) -> Result<u64> {
        let hinted = match self.eid_hints.get(id) {
            Some(&eid) if eid != ABSENT_EID && self.entity_ids.get(eid).db()?.is_none() => {
                Some(eid)
            }
            _ => None,
        };
        let eid = match (hinted, self.next_eid) {
            (Some(eid), _) | (None, Some(eid)) => eid,
            (None, None) => self
                .entity_ids
                .last()
                .db()?
                .map_or(1, |(k, _)| k.value() + 1),
        };
        if hinted.is_none() {
            self.next_eid = Some(eid + 1);
        } else if let Some(next) = self.next_eid {
            self.next_eid = Some(next.max(eid + 1));
        }
        let key = codec::id_key(id);
        let fs = match &first.source {
            Some((filesystem_id, path)) => {
                let fs = self.fs_key(filesystem_id, true)?;
                self.new_paths.push((fs.clone(), path.clone(), eid));
                Some((fs, path))
            }
            None => None,
        };
        match fs {
            // A file named by its source (format 6): the source once, in `entity_ids`.
            Some((fs, path)) if tx >= self.sources_since && codec::sourced_file(id, first)? => {
                // Its short key (format 8), unless another file's id starts with the same bits.
                let key = match codec::short_entity_key(&key) {
                    Some(short)
                        if tx >= self.short_since && self.entities.get(short).db()?.is_none() =>
                    {
                        short.to_vec()
                    }
                    _ => key,
                };
                self.entities
                    .insert(
                        key.as_slice(),
                        codec::encode_sourced_entity(eid)?.as_slice(),
                    )
                    .db()?;
                self.entity_ids
                    .insert(eid, codec::encode_entity_source(&fs, path)?.as_slice())
                    .db()?;
            }
            _ => {
                let rec = EntityRec {
                    eid,
                    object_type: first.object_type.clone(),
                    source: first.source.clone(),
                };
                self.entities
                    .insert(key.as_slice(), codec::encode(&rec)?.as_slice())
                    .db()?;
                self.entity_ids.insert(eid, key.as_slice()).db()?;
            }
        }
        Ok(eid)
    }

    pub(super) fn insert_row(
        &mut self,
        eid: u64,
        vt: i64,
        tx: u64,
        rec: &VersionRec,
        by_seq: bool,
    ) -> Result<()> {
        let max = match self.latest_row(eid)? {
            Some((max_vt, max_tx)) if max_vt > vt => (max_vt, max_tx),
            _ => (vt, tx),
        };
        self.write_row(eid, vt, tx, rec, Some(max), by_seq)
    }

    /// Writes version row (`eid`, `vt`, `tx`) and its `versions_by_tx` row, `max` being the
    /// (valid_from, tx) of the entity's latest row once it is written (`None`: no
    /// `versions_by_tx` row, for a first write of one row).
    fn write_row(
        &mut self,
        eid: u64,
        vt: i64,
        tx: u64,
        rec: &VersionRec,
        max: Option<(i64, u64)>,
        by_seq: bool,
    ) -> Result<()> {
        let encoded = match &rec.object_hash {
            Some(hash) => {
                let seq = docs::reference_doc(&mut self.docs, hash)?;
                // `u64::MAX`: fsck's replay placing a document the store lacks.
                if by_seq && seq != u64::MAX {
                    codec::encode_version_at(rec, seq)?
                } else {
                    codec::encode(rec)?
                }
            }
            None => codec::encode(rec)?,
        };
        self.versions
            .insert((eid, vt, tx), encoded.as_slice())
            .db()?;
        if let Some(max) = max {
            self.by_tx.insert((eid, tx), max).db()?;
        }
        Ok(())
    }

    /// Writes `meta[DOC_NUMBERS_FROM]` when this writer erased the last document.
    pub(super) fn save_numbers_from(&mut self) -> Result<()> {
        if let (from, true) = self.docs.numbers_from {
            self.meta
                .insert(DOC_NUMBERS_FROM, from.to_le_bytes().as_slice())
                .db()?;
            self.docs.numbers_from = (from, false);
        }
        Ok(())
    }

    /// The hashes of the documents version rows name by number (see [`docs::WriteDocs`]).
    pub(super) fn doc_hashes(&self) -> docs::WriterDocs<'_, 't> {
        docs::WriteDocs {
            stored: docs::StoredDocs {
                index: &self.docs.index,
                data: &self.docs.data,
            },
            given: &self.seq_hashes,
        }
    }

    /// (valid_from, tx) of the latest row of entity `eid` (greatest valid time, then tx), for a
    /// write after its first. An entity whose first write went without its `versions_by_tx`
    /// row gets that row now, so that an entity with any such row has one for every write
    /// (what `temporal::latest_at` relies on).
    pub(super) fn latest_row(&mut self, eid: u64) -> Result<Option<(i64, u64)>> {
        let last = temporal::last_by_tx(&self.by_tx, eid, u64::MAX)?;
        if last.is_some() {
            return Ok(last);
        }
        let only = temporal::only_row(&self.versions, eid)?;
        if let Some((vt, tx)) = only {
            self.by_tx.insert((eid, tx), (vt, tx)).db()?;
        }
        Ok(only)
    }
    /// The entity's current object hash (visible now as of the latest tx), `None` when absent.
    pub(super) fn current_hash(&self, id: &str, now: i64) -> Result<Option<[u8; 32]>> {
        let Some(rec) = entity_rec(self, id)? else {
            return Ok(None);
        };
        Ok(temporal::as_of_row(
            &self.versions,
            &self.doc_hashes(),
            &self.by_tx,
            rec.eid,
            now,
            u64::MAX,
        )?
        .and_then(|(row, _)| row.rec.object_hash))
    }

    /// Stores the document of `object` and its contents (with `bytes` kept for a file whose
    /// content is null) for a write of the entity `existing` names (`None`: a new entity),
    /// counting the bytes put and stored.
    pub(super) fn store_doc(
        &mut self,
        object: &Object,
        bytes: Option<&[u8]>,
        encoded: Option<&EncodedBlob>,
        existing: Option<&EntityRec>,
    ) -> Result<()> {
        // Session and chat documents grow with every commit, and a session's file id table
        // grows by lines: store them as deltas (contents as suffixes).
        let delta_base = match (existing, object.object_type()) {
            (Some(rec), ObjectType::Session | ObjectType::Chat | ObjectType::SessionConfig) => {
                self.delta_base(rec.eid)?
            }
            _ => None,
        };
        let stored = docs::ensure_doc(
            &mut self.docs,
            &mut self.blobs,
            object,
            bytes,
            encoded,
            delta_base.as_ref(),
            self.base_cache,
        )?;
        if let (Some(cache), ObjectType::Session | ObjectType::Chat | ObjectType::SessionConfig) =
            (self.base_cache, object.object_type())
        {
            cache.put(object.object_hash().0, object.metadata_json_shared());
        }
        let given = object.content().map_or(0, str::len) as u64
            + bytes
                .filter(|_| object.content().is_none())
                .map_or(0, |b| b.len() as u64);
        self.pending_bytes.0 += given as i64;
        self.pending_bytes.1 += stored.stored as i64;
        Ok(())
    }

    /// Resolves a put into its op body, storing its document and contents; also returns the
    /// entity's record as it was before (`None`: a new entity), for [`WriteTables::apply_write`].
    pub(super) fn resolve_put(
        &mut self,
        put: &Put,
        tx_time: i64,
    ) -> Result<(codec::WriteRec, Option<EntityRec>)> {
        let object = &put.object;
        let id = object.id();
        let existing = entity_rec(self, id)?;
        let first = match &existing {
            Some(rec) => {
                crate::store::ops::check_same_type(object, &rec.object_type)?;
                None
            }
            None => {
                // A path the store knows with no entity for it is damage, not a new file: the
                // write would make a second entity for it.
                if let Some(source) = object.source() {
                    let fs = source.as_filesystem();
                    let key = self.fs_key(&fs.filesystem_id, false)?;
                    if self.dirs.path_eid(&key, &fs.path)?.is_some() {
                        return Err(Error::corrupt(format!(
                            "the store lists {:?} but has no entity {id} for it; run `strata \
                             fsck`",
                            fs.path
                        )));
                    }
                }
                Some(FirstRec::of(object))
            }
        };
        let valid_from = match put.valid_from {
            ValidFrom::TxTime => tx_time,
            ValidFrom::At(t) => t.as_micros(),
            ValidFrom::MtimeClamped(mtime) => {
                let previous = match &existing {
                    Some(rec) => {
                        temporal::latest_at(&self.versions, &self.by_tx, rec.eid, u64::MAX)?
                            .map(|(vt, _)| vt)
                    }
                    None => None,
                };
                let floor = previous.map_or(Timestamp::MIN.as_micros(), |p| p + 1);
                mtime.as_micros().max(floor).min(tx_time)
            }
        };
        check_range(id, valid_from, put.valid_to)?;
        self.store_doc(
            object,
            put.kept_bytes(),
            put.encoded.as_ref(),
            existing.as_ref(),
        )?;
        Ok((
            codec::WriteRec::put(id, valid_from, first, put, object),
            existing,
        ))
    }
}

pub(in crate::store) fn check_range(id: &str, from: i64, to: Option<Timestamp>) -> Result<()> {
    if let Some(to) = to
        && to.as_micros() <= from
    {
        return Err(Error::invalid_input(format!(
            "valid_to {to} of {id} is not after its valid_from {}; give an end after the start",
            ts(from)
        )));
    }
    Ok(())
}

impl RedbStore {
    /// Writes `ops` as one transaction: all or nothing, durable when this returns.
    ///
    /// Matches are checked first, against the state before the transaction.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty op list, an entity written by two ops, a valid_to not
    /// after valid_from, or bytes that do not hash to the file's `file_hash`;
    /// [`Error::NotFound`] for a delete or evict of an unknown entity; [`Error::Conflict`] when a
    /// match fails (naming expected and actual hashes) or an id is taken by another type.
    pub fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt> {
        self.transact_inner(ops, origin, None)
    }

    /// [`RedbStore::transact`], plus stat cache changes written in the same redb transaction.
    pub(super) fn transact_inner(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: Option<&StatUpdate>,
    ) -> Result<TxReceipt> {
        check_ops(&ops)?;
        let wtx = self.begin_write()?;
        let mut w = WriteTables::open(&wtx)?;
        let receipt = self.write_tx(&mut w, &ops, &origin)?;
        w.finish()?;
        drop(w);
        if let Some(stat) = stat {
            stat::apply(&wtx, stat)?;
        }
        wtx.commit().db()?;
        Ok(receipt)
    }

    /// Writes `ops` as the next transaction through `w`, the tables of an open redb
    /// transaction: its tx id, log record and chain value follow those already written in it.
    /// The byte counters stay pending in `w` ([`WriteTables::finish`] writes them once for every
    /// transaction of a commit). On error the transaction holds a partial write and must be
    /// dropped, not committed.
    fn write_tx<'t>(
        &'t self,
        w: &mut WriteTables<'t>,
        ops: &[Op],
        origin: &Origin,
    ) -> Result<TxReceipt> {
        w.base_cache = Some(&self.base_cache);
        let last = match w.tx_log.last().db()? {
            Some((k, v)) => Some((k.value(), codec::decode_header(v.value(), "tx header")?)),
            None => None,
        };
        let tx = last.as_ref().map_or(1, |(id, _)| id + 1);
        let prev_chain = last.as_ref().map_or([0u8; 32], |(_, h)| h.chain);
        let now = Timestamp::now().as_micros();
        let tx_time = last.as_ref().map_or(now, |(_, h)| now.max(h.tx_time + 1));
        for op in ops {
            if let Op::Match { entity, expected } = op {
                let actual = w.current_hash(entity, tx_time)?;
                if actual != expected.map(|h| h.0) {
                    let show = |h: Option<[u8; 32]>| h.map_or("absent".to_string(), hex::encode);
                    return Err(Error::Conflict {
                        entity: entity.clone(),
                        expected: show(expected.map(|h| h.0)),
                        actual: show(actual),
                    });
                }
            }
        }
        let mut bodies = Vec::with_capacity(ops.len());
        // The filesystems the bodies' first writes name by number (format 8), kept in the header.
        let mut filesystems = Vec::new();
        // An evicted file's stat cache entry goes too, so that the next scan reads it again.
        let mut evicted_paths: Vec<(String, String)> = Vec::new();
        for (n, op) in ops.iter().enumerate() {
            let n = n as u32;
            let body = match op {
                Op::Put(put) => {
                    // The entity was read by `resolve_put`: applied without reading it again.
                    let (write, existing) = w.resolve_put(put, tx_time)?;
                    w.apply_write(tx, tx_time, n, &write, existing)?;
                    OpRec::Write(write)
                }
                Op::Delete {
                    entity,
                    valid_from,
                    valid_to,
                } => {
                    if entity_rec(w, entity)?.is_none() {
                        return Err(unknown_entity(entity));
                    }
                    let from = valid_from.map_or(tx_time, Timestamp::as_micros);
                    check_range(entity, from, *valid_to)?;
                    OpRec::Write(codec::WriteRec::delete(
                        entity.as_str().into(),
                        from,
                        valid_to.map(Timestamp::as_micros),
                    ))
                }
                Op::Evict { entity } => {
                    let Some(rec) = entity_rec(w, entity)? else {
                        return Err(unknown_entity(entity));
                    };
                    if let Some(source) = rec.source {
                        evicted_paths.push((source.0.0, source.1));
                    }
                    OpRec::Evict {
                        entity: entity.as_str().into(),
                    }
                }
                Op::Match { entity, expected } => OpRec::Match {
                    entity: entity.as_str().into(),
                    expected: expected.map(|h| h.0),
                },
            };
            if !matches!(op, Op::Put(_)) {
                w.apply(tx, tx_time, n, &body)?;
            }
            w.tx_ops
                .insert(
                    (tx, n),
                    codec::encode_op_in(&body, tx_time, &mut filesystems)?.as_slice(),
                )
                .db()?;
            bodies.push(body);
        }
        w.end_tx()?;
        let digests = bodies
            .iter()
            .map(log::op_digest)
            .collect::<Result<Vec<_>>>()?;
        let mut header = log::seal_header(&prev_chain, tx, tx_time, origin, digests)?;
        header.filesystems = filesystems;
        w.tx_log
            .insert(tx, codec::encode_header(&header)?.as_slice())
            .db()?;
        w.write_paths()?;
        if !evicted_paths.is_empty() {
            let mut keys = Vec::with_capacity(evicted_paths.len());
            for (filesystem_id, path) in &evicted_paths {
                keys.push((w.fs_key(filesystem_id, false)?, path));
            }
            for (fs, path) in keys {
                w.dirs.write_stat(&fs, &[], &[path.as_str()])?;
            }
        }
        Ok(TxReceipt {
            tx_id: TxId(tx),
            tx_time: ts(tx_time),
        })
    }

    /// Writes a group of transactions in one redb commit, each with its own tx id, log record
    /// and chain value, as if they had been written one after another: a request that fails is
    /// answered with its error and the group is written again without it, so nothing of it
    /// stays and the others do not see it. `mode` says how the commit is made durable.
    pub fn transact_group(
        &self,
        group: Vec<TxRequest>,
        mode: CommitMode,
    ) -> Vec<Result<Option<TxReceipt>>> {
        let mut results: Vec<Option<Result<Option<TxReceipt>>>> =
            group.iter().map(|_| None).collect();
        for (i, request) in group.iter().enumerate() {
            // Without ops a request may only change the stat cache.
            if (!request.ops.is_empty() || request.stat.is_none())
                && let Err(e) = check_ops(&request.ops)
            {
                results[i] = Some(Err(e));
            }
        }
        loop {
            let pending: Vec<usize> = (0..group.len()).filter(|&i| results[i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let wtx = match self.begin_write() {
                Ok(mut wtx) => {
                    match mode {
                        CommitMode::Checkpointed => {}
                        CommitMode::UnderLoad => wtx.set_quick_repair(false),
                        // Refused only after a persistent savepoint changed: then it is durable.
                        CommitMode::Lazy => {
                            wtx.set_durability(redb::Durability::None).ok();
                        }
                    }
                    wtx
                }
                Err(e) if is_store_full(&e) => {
                    for i in pending {
                        results[i] = Some(Err(store_full_again(&e)));
                    }
                    break;
                }
                Err(e) => {
                    let message = e.full_message();
                    for i in pending {
                        results[i] = Some(Err(match &e {
                            // A deferred store's refusal keeps its kind: the caller plans again.
                            Error::Conflict {
                                entity,
                                expected,
                                actual,
                            } => Error::Conflict {
                                entity: entity.clone(),
                                expected: expected.clone(),
                                actual: actual.clone(),
                            },
                            _ => Error::storage("beginning a group commit", message.clone()),
                        }));
                    }
                    break;
                }
            };
            // The tables are opened once for the whole group (not once per request).
            let written = self.write_group(&wtx, &group, &pending);
            let receipts = match written {
                Ok(receipts) => receipts,
                // No room: redb refuses every later call on the handle, so the others are not
                // written again (they would meet that refusal, `PreviousIo`) but told the same.
                Err((_, e)) if is_store_full(&e) => {
                    drop(wtx);
                    for i in pending {
                        results[i] = Some(Err(store_full_again(&e)));
                    }
                    break;
                }
                Err((Some(i), e)) => {
                    // Dropped uncommitted: redb aborts it, and the others are written again.
                    drop(wtx);
                    results[i] = Some(Err(e));
                    continue;
                }
                Err((None, e)) => {
                    drop(wtx);
                    let message = e.to_string();
                    for i in pending {
                        results[i] = Some(Err(Error::storage("writing a group", message.clone())));
                    }
                    break;
                }
            };
            match wtx.commit() {
                Ok(()) => {
                    for (i, receipt) in receipts {
                        results[i] = Some(Ok(receipt));
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    let full = full_write(&e);
                    for (i, _) in receipts {
                        results[i] = Some(Err(match &full {
                            // A disk full at the commit (ENOSPC is often met only there).
                            Some(io) => Error::io(STORE_FULL, copy_io(io)),
                            None => Error::storage("committing a group", message.clone()),
                        }));
                    }
                }
            }
            break;
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(Error::invariant("a group commit left a request unanswered"))
                })
            })
            .collect()
    }
}

impl RedbStore {
    /// Writes the requests `pending` of `group` inside `wtx`, one transaction each, through one
    /// set of open tables; the byte counters are added once at the end. On error, the request
    /// that failed (`None`: the group as a whole) and why; `wtx` must then be dropped.
    #[allow(clippy::type_complexity)]
    fn write_group(
        &self,
        wtx: &WriteTransaction,
        group: &[TxRequest],
        pending: &[usize],
    ) -> std::result::Result<Vec<(usize, Option<TxReceipt>)>, (Option<usize>, Error)> {
        let mut w = WriteTables::open(wtx).map_err(|e| (None, e))?;
        let mut receipts = Vec::with_capacity(pending.len());
        for &i in pending {
            let request = &group[i];
            let written = if request.ops.is_empty() {
                Ok(None)
            } else {
                self.write_tx(&mut w, &request.ops, &request.origin)
                    .map(Some)
            };
            let written = written.and_then(|receipt| {
                if let Some(stat) = &request.stat {
                    stat::apply_in(wtx, &mut w.dirs, stat)?;
                }
                Ok(receipt)
            });
            match written {
                Ok(receipt) => receipts.push((i, receipt)),
                Err(e) => return Err((Some(i), e)),
            }
        }
        w.finish().map_err(|e| (None, e))?;
        Ok(receipts)
    }
}

/// Refuses an op list that cannot make a transaction (empty, an entity written twice, too long).
pub(in crate::store) fn check_ops(ops: &[Op]) -> Result<()> {
    if ops.is_empty() {
        return Err(Error::invalid_input(
            "a transaction needs at least one op; nothing was written",
        ));
    }
    let mut written = std::collections::HashSet::new();
    for op in ops {
        if !matches!(op, Op::Match { .. }) && !written.insert(op.entity()) {
            return Err(Error::invalid_input(format!(
                "entity {} is written by two ops of one transaction; give one op per entity",
                op.entity()
            )));
        }
    }
    if ops.len() > u32::MAX as usize {
        return Err(Error::invalid_input("a transaction holds at most 2^32 ops"));
    }
    Ok(())
}
