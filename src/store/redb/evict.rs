//! Evicting an entity: its versions, op bodies, matches, paths, and every document and content
//! nothing else references; the log keeps the eviction record and the digests.

use super::*;
use std::collections::HashSet;

use super::docs::DocHashes;

/// An evicted entity's version rows: key, document, and the op that wrote it.
type EvictedRows = Vec<((u64, i64, u64), Option<[u8; 32]>, u32)>;

impl WriteTables<'_> {
    /// Erases every trace of entity `id` (entity row `rec`) but the log's digests, in
    /// transaction `tx`; `evicted_ops` records which op bodies went.
    pub(super) fn evict(&mut self, id: &str, rec: &EntityRec, tx: u64) -> Result<()> {
        if self.derived_only {
            return self.evict_rows(id, rec, tx);
        }
        let eid = rec.eid;
        let (rows, mut damaged) = self.rows_to_evict(id, eid)?;
        let mut freed: u64 = 0;
        // Session, chat and session configuration documents and contents are stored as deltas and suffixes on
        // earlier ones, which another entity's records may be based on: those are kept whole,
        // so that nothing of this entity stays behind as a base.
        let chained = matches!(
            rec.object_type.parse::<ObjectType>(),
            Ok(ObjectType::Session | ObjectType::Chat | ObjectType::SessionConfig)
        );
        // The blobs of the documents only this entity uses: one may survive its release only
        // as the base of another entity's suffix records (a file whose content is a chat's
        // transcript a fork of that chat grew from), which `blobs::unbase` then takes out.
        let (mut erased_blobs, mut added) = (Vec::new(), 0u64);
        let mut uses: HashMap<[u8; 32], u64> = HashMap::new();
        for (_, hash, _) in &rows {
            if let Some(hash) = hash {
                *uses.entry(*hash).or_default() += 1;
            }
        }
        let mut erased = HashMap::new();
        for (hash, count) in uses {
            if let Some((seq, refs, file_blob)) =
                self.docs.index.get(&hash).db()?.map(|v| v.value())
                && refs <= count
            {
                erased.insert(hash, seq);
                if damaged.contains(&hash) {
                    continue;
                }
                // A record that is missing or does not decode (a row naming its document by
                // hash: a session's, a chat's) is damaged: released without being read, as
                // `rows_to_evict` does for a numbered row's.
                match docs::read_doc_raw(&self.docs.index, &self.docs.data, &hash) {
                    Ok(Some((doc, _))) => erased_blobs.extend(docs::doc_blobs(&doc, file_blob)),
                    Ok(None) => {}
                    Err(Error::Corrupt { .. }) => {
                        damaged.insert(hash);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if chained {
            added += docs::keep_dependents_whole(&mut self.docs, &erased)?;
        }
        // The entity's op bodies: the writes that made its rows, and its matches.
        let mut ops = std::collections::BTreeSet::new();
        for (key, hash, op) in rows {
            ops.insert((key.2, op));
            self.versions.remove(key).db()?;
            self.by_tx.remove((key.0, key.2)).db()?;
            match hash {
                Some(hash) if damaged.contains(&hash) => freed += self.release_damaged(&hash)?,
                Some(hash) => freed += docs::release_doc(&mut self.docs, &mut self.blobs, &hash)?,
                None => {}
            }
        }
        let mut matches = self.match_keys(eid)?;
        // Matches made while no entity had this id (eids count from 1): their bodies say which.
        for entry in self
            .match_ops
            .range((ABSENT_EID, 0u64, 0u32)..=(ABSENT_EID, u64::MAX, u32::MAX))
            .db()?
        {
            let (e, tx, n) = entry.db()?.0.value();
            let Some(header) = self.tx_log.get(tx).db()?.map(|v| v.value().to_vec()) else {
                continue;
            };
            let header = codec::decode_header(&header, "tx header")?;
            if let Some(body) = self.tx_ops.get((tx, n)).db()?.map(|v| v.value().to_vec())
                && let OpRec::Match { entity, .. } = codec::decode_op(
                    &body,
                    header.tx_time,
                    &header.filesystems,
                    &format!("op {n} of tx {tx}"),
                )?
                && entity.0 == id
            {
                matches.push((e, tx, n));
            }
        }
        for (e, tx, n) in matches {
            self.match_ops.remove((e, tx, n)).db()?;
            ops.insert((tx, n));
        }
        for (op_tx, n) in ops {
            self.tx_ops.remove((op_tx, n)).db()?;
            self.evicted_ops.insert((op_tx, n), tx).db()?;
        }
        self.remove_entity_row(id)?;
        self.entity_ids.remove(eid).db()?;
        self.next_eid = None;
        if let Some((filesystem_id, path)) = &rec.source {
            let fs = self.fs_key(filesystem_id, false)?;
            self.dirs.remove_path(&fs, path)?;
        }
        let (more, less) = blobs::unbase(&mut self.blobs, &erased_blobs)?;
        added += more;
        freed += less;
        self.add_counter(STORED_BYTES, added as i64 - freed as i64)?;
        Ok(())
    }

    /// The version rows of entity `eid` (`id`) with each one's document and op, and the
    /// documents among them whose records are damaged.
    ///
    /// A row naming its document by a number whose record is missing or damaged still goes:
    /// evicting removes it anyway. Its document is the one `doc_index` places at that number
    /// (released without reading its record, so the contents it names stay for `gc`), or none
    /// when no document has the number. A row that does not decode cannot say which op wrote
    /// it, so the eviction is refused rather than leave that op's body in the log.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a row does not decode.
    fn rows_to_evict(&self, id: &str, eid: u64) -> Result<(EvictedRows, HashSet<[u8; 32]>)> {
        let mut rows = Vec::new();
        let mut damaged = HashSet::new();
        for entry in self
            .versions
            .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
            .db()?
        {
            let (key, value) = entry.db()?;
            let (rec, seq) =
                codec::decode_version(value.value(), "version record").map_err(|e| {
                    Error::corrupt(format!(
                        "{id} cannot be evicted: {e}; run `strata fsck --repair`, then evict \
                         it again"
                    ))
                })?;
            let hash = match seq {
                None => rec.object_hash,
                Some(seq) => match self.doc_hashes().hash_at(seq) {
                    Ok(hash) => Some(hash),
                    Err(Error::Corrupt { .. }) => {
                        let placed = self.doc_placed_at(seq)?;
                        if let Some(hash) = placed {
                            damaged.insert(hash);
                        }
                        placed
                    }
                    Err(e) => return Err(e),
                },
            };
            rows.push((key.value(), hash, rec.op));
        }
        Ok((rows, damaged))
    }

    /// The one document `doc_index` places at number `seq`; `None` when none or several are.
    fn doc_placed_at(&self, seq: u64) -> Result<Option<[u8; 32]>> {
        let mut found = None;
        for entry in self.docs.index.iter().db()? {
            let (hash, (at, _, _)) = entry.db().map(|(k, v)| (k.value(), v.value()))?;
            if at == seq {
                if found.is_some() {
                    return Ok(None);
                }
                found = Some(hash);
            }
        }
        Ok(found)
    }

    /// Drops one version reference to document `hash`, whose record is damaged: at zero its
    /// index row and record go, and the contents it named (which its record cannot tell) stay
    /// for `gc`; returns the bytes freed.
    fn release_damaged(&mut self, hash: &[u8; 32]) -> Result<u64> {
        self.docs.fresh = None;
        let Some((seq, refs, file_blob)) = self.docs.index.get(hash).db()?.map(|v| v.value())
        else {
            return Ok(0);
        };
        if refs > 1 {
            self.docs
                .index
                .insert(hash, (seq, refs - 1, file_blob))
                .db()?;
            return Ok(0);
        }
        self.docs.index.remove(hash).db()?;
        Ok(self
            .docs
            .remove_record(seq)?
            .map_or(0, |record| record.len() as u64))
    }

    /// The keys of the match ops made while entity `eid` existed.
    /// Removes entity `id`'s `entities` row, under whichever key it has (`entity::entity_row`).
    fn remove_entity_row(&mut self, id: &str) -> Result<()> {
        if let Some((key, _)) = super::entity::entity_row(self, id)? {
            self.entities.remove(key.as_slice()).db()?;
        }
        Ok(())
    }

    fn match_keys(&self, eid: u64) -> Result<Vec<(u64, u64, u32)>> {
        let mut keys = Vec::new();
        for entry in self
            .match_ops
            .range((eid, 0u64, 0u32)..=(eid, u64::MAX, u32::MAX))
            .db()?
        {
            keys.push(entry.db()?.0.value());
        }
        Ok(keys)
    }

    /// [`WriteTables::evict`] in a scratch replay (`derived_only`): the entity's rows, paths,
    /// matches and document references go, and the removed op bodies are recorded; documents
    /// and contents are not touched (the replay has none).
    fn evict_rows(&mut self, id: &str, rec: &EntityRec, tx: u64) -> Result<()> {
        let eid = rec.eid;
        let mut rows = Vec::new();
        for entry in self
            .versions
            .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
            .db()?
        {
            let (key, value) = entry.db()?;
            let rec = docs::version_rec(value.value(), &self.doc_hashes(), "version record")?;
            rows.push((key.value(), rec.object_hash, rec.op));
        }
        let mut ops = std::collections::BTreeSet::new();
        for (key, hash, op) in rows {
            ops.insert((key.2, op));
            self.versions.remove(key).db()?;
            self.by_tx.remove((key.0, key.2)).db()?;
            let entry = match hash {
                Some(hash) => self.docs.index.get(&hash).db()?.map(|v| (hash, v.value())),
                None => None,
            };
            if let Some((hash, (seq, refs, file_blob))) = entry {
                if refs > 1 {
                    self.docs
                        .index
                        .insert(&hash, (seq, refs - 1, file_blob))
                        .db()?;
                } else {
                    self.docs.index.remove(&hash).db()?;
                }
            }
        }
        let mut matches = self.match_keys(eid)?;
        for entry in self
            .match_ops
            .range((ABSENT_EID, 0u64, 0u32)..=(ABSENT_EID, u64::MAX, u32::MAX))
            .db()?
        {
            let key = entry.db()?.0.value();
            if self
                .absent_match_ids
                .get(&(key.1, key.2))
                .map(String::as_str)
                == Some(id)
            {
                matches.push(key);
            }
        }
        for key in matches {
            self.match_ops.remove(key).db()?;
            ops.insert((key.1, key.2));
        }
        for (op_tx, n) in ops {
            self.evicted_ops.insert((op_tx, n), tx).db()?;
        }
        self.remove_entity_row(id)?;
        self.entity_ids.remove(eid).db()?;
        self.next_eid = None;
        if let Some((filesystem_id, path)) = &rec.source {
            let fs = self.fs_key(filesystem_id, false)?;
            self.dirs.remove_path(&fs, path)?;
        }
        Ok(())
    }
}
