//! Maintenance: `evict`, rebuilding the query tables from the log (`fsck_rebuild`), and `gc`.

use super::*;
use std::collections::HashMap;

use redb::ReadableTable;

use super::codec::{self, DocRec};
use super::tables::*;
use super::{Op, Origin, RedbStore, TxReceipt, WriteTables, blobs};
use crate::error::{Error, Result};
use crate::store::answers::finding;

/// The file in the store directory that says a scrub of the store file's free pages
/// ([`RedbStore::scrub_free_pages`]) is owed: written before an evict or a gc commits, removed
/// once the scrub after it ran to the end. While it is there, `strata gc` scrubs even when it
/// frees nothing. Older builds ignore it.
pub(crate) const SCRUB_PENDING: &str = "scrub.pending";

/// The erasures (evicts, gcs) of one handle under way, so that the [`SCRUB_PENDING`] note is
/// removed only when no erasure can still need it: two daemon clients erase at once.
#[derive(Debug, Default)]
pub(crate) struct ScrubLedger {
    /// Erasures begun since the handle opened.
    begun: u64,
    /// Erasures begun whose commit has neither come nor been refused.
    committing: u64,
    /// Scrubs run since the handle opened.
    scrubbed: u64,
    /// Set when the last scrub left the note for transactions alone (they held pages the
    /// erasures before it freed): what was so then.
    held: Option<Held>,
}

/// What a scrub that left the note only for live transactions saw: the erasures begun, and
/// the old transactions ended ([`super::open::LiveCounts::old_ended`]), as it began.
#[derive(Clone, Copy, Debug)]
struct Held {
    begun: u64,
    old_ended: u64,
}

/// An erasure under way ([`RedbStore::begin_erasure`]) until it is settled; dropped unsettled,
/// it counts as one that may have committed (its note stays).
pub(crate) struct Settling<'a> {
    store: &'a RedbStore,
    erasure: Option<Erasure>,
}

impl Settling<'_> {
    /// The erasure, as begun.
    pub(crate) fn erasure(&self) -> Option<Erasure> {
        self.erasure
    }

    /// The erasure committed ([`RedbStore::erasure_committed`]).
    pub(crate) fn committed(mut self) {
        if let Some(erasure) = self.erasure.take() {
            self.store.erasure_committed(erasure);
        }
    }

    /// The erasure failed with `e` ([`RedbStore::nothing_erased`]).
    pub(crate) fn failed(mut self, e: &Error) {
        if let Some(erasure) = self.erasure.take() {
            self.store.nothing_erased(erasure, e);
        }
    }
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        if let Some(erasure) = self.erasure.take() {
            self.store.erasure_committed(erasure);
        }
    }
}

/// One erasure begun by [`RedbStore::owe_scrub_before_erasure`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Erasure {
    /// Whether a scrub was owed already when it began.
    pub(crate) owed: bool,
    /// Its number in [`ScrubLedger::begun`].
    number: u64,
}

impl RedbStore {
    /// Evicts `id`: a transaction of one [`Op::Evict`].
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn evict(&self, id: &str, origin: Origin) -> Result<TxReceipt> {
        self.transact(
            vec![Op::Evict {
                entity: id.to_string(),
            }],
            origin,
        )
    }

    /// Overwrites the store file's free pages with zeros: redb writes every change to a new
    /// copy of a page, so the pages an eviction or a gc freed (the chunk a secret was zeroed
    /// in, the document record removed) keep their old bytes, found by anyone who reads the
    /// file, until redb happens to reuse them. Two durable commits first release the pages
    /// the erasing commit freed (redb frees a transaction's pages at a later durable commit,
    /// once no reader can see them); then a table of zero-filled rows, one to a page, takes
    /// every free page and is deleted (the pages it frees hold zeros). Pages a reader still
    /// sees are left: they are freed once it ends, and the [`SCRUB_PENDING`] note stays for the
    /// next gc to zero them. A store in memory has no file.
    ///
    /// # Errors
    /// When a commit fails.
    pub(crate) fn scrub_free_pages(&self) -> Result<()> {
        // Twice: the first leaves the pages its own commits need, and the allocator hands
        // those out last (the second takes them, zeroed or not, with the first's zeros).
        use std::sync::atomic::Ordering;
        let (begun, settled, old_ended) = {
            let mut ledger = self.ledger();
            ledger.scrubbed += 1;
            ledger.held = None;
            (
                ledger.begun,
                ledger.committing == 0,
                self.live.old_ended.load(Ordering::SeqCst),
            )
        };
        // A transaction that lives (a reader that began before the erasure committed) keeps
        // the pages it sees from being freed, and so from this scrub.
        let quiet = self.live.running.load(Ordering::SeqCst) == 0;
        self.scrub_free_pages_once()?;
        self.scrub_free_pages_once()?;
        // The note goes only if every erasure begun had committed before this scrub did (it
        // took their freed pages), no transaction lived then (whose pages it could not take),
        // and none began since (its pages may be freed after it).
        let mut ledger = self.ledger();
        if settled && ledger.begun == begun {
            if quiet {
                return self.scrub_paid();
            }
            // Kept for the transactions alone: until one that may hold freed pages ends, or
            // an erasure frees more, a scrub gains nothing ([`RedbStore::scrub_gains_nothing`]).
            ledger.held = Some(Held { begun, old_ended });
        }
        Ok(())
    }

    /// The [`ScrubLedger`], held.
    fn ledger(&self) -> std::sync::MutexGuard<'_, ScrubLedger> {
        self.scrubs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a scrub is owed: the [`SCRUB_PENDING`] file is in the store directory.
    pub(crate) fn scrub_owed(&self) -> bool {
        self.dir
            .as_ref()
            .is_some_and(|dir| dir.join(SCRUB_PENDING).exists())
    }

    /// Writes the [`SCRUB_PENDING`] file, durably, before an erasure commits: a scrub that
    /// fails or is killed after the commit is then still owed, and the next gc runs it.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written (the erasure is then not made).
    pub(crate) fn owe_scrub(&self) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = dir.join(SCRUB_PENDING);
        let note = "an evict or a gc committed and zeroing the store file's free pages after it \
                    did not finish; `strata gc` finishes it\n";
        let what = || {
            format!(
                "writing {} (the note that the store file's free pages are to be zeroed, \
                 written before an erasure commits); nothing was erased",
                path.display()
            )
        };
        let mut file = crate::store::private::create_file(&path).map_err(|e| e.after(&what()))?;
        std::io::Write::write_all(&mut file, note.as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::File::open(dir)?.sync_all())
            .map_err(|e| Error::io(what(), e))
    }

    /// [`RedbStore::owe_scrub`] before an evict or a gc (not on a read-only handle, which
    /// erases nothing), counted in the [`ScrubLedger`] until
    /// [`RedbStore::erasure_committed`] or [`RedbStore::nothing_erased`] says how it ended.
    ///
    /// # Errors
    /// As [`RedbStore::owe_scrub`] (nothing is counted then).
    pub(crate) fn owe_scrub_before_erasure(&self) -> Result<Erasure> {
        let mut ledger = self.ledger();
        let owed = self.scrub_owed();
        if !owed && !self.read_only {
            self.owe_scrub()?;
        }
        ledger.begun += 1;
        ledger.committing += 1;
        Ok(Erasure {
            owed,
            number: ledger.begun,
        })
    }

    /// [`RedbStore::owe_scrub_before_erasure`], settled when the returned guard is dropped
    /// unsettled (a panic inside redb unwound through it): as one that may have committed, so
    /// the ledger does not count it as committing for the handle's life.
    ///
    /// # Errors
    /// As [`RedbStore::owe_scrub`].
    pub(crate) fn begin_erasure(&self) -> Result<Settling<'_>> {
        Ok(Settling {
            store: self,
            erasure: Some(self.owe_scrub_before_erasure()?),
        })
    }

    /// `erasure` committed: its scrub is owed until one that began after this runs to the end.
    pub(crate) fn erasure_committed(&self, _erasure: Erasure) {
        // The transactions running now are old: they may hold pages it freed.
        self.live
            .erasures
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut ledger = self.ledger();
        ledger.committing = ledger.committing.saturating_sub(1);
    }

    /// Whether a scrub after `erasure` (a gc that freed nothing) would take no page the last
    /// scrub could not: that scrub left the note only for the transactions that lived then,
    /// none that may hold an erasure's freed pages has ended since, no erasure but this one
    /// began since, and a transaction still runs (else a scrub removes the note). Then the note stays and the scrub is skipped (it redid the whole fill for
    /// nothing at every gc while a daemon's client kept a reader open); `erasure` is counted
    /// as covered by that scrub.
    pub(crate) fn scrub_gains_nothing(&self, erasure: Erasure) -> bool {
        let mut ledger = self.ledger();
        let Some(held) = ledger.held else {
            return false;
        };
        let ended = self
            .live
            .old_ended
            .load(std::sync::atomic::Ordering::SeqCst);
        // No transaction runs: a scrub now removes the note (the last one may have kept it
        // only for readers that began after the erasure, whose ends are not counted).
        let quiet = self.live.running.load(std::sync::atomic::Ordering::SeqCst) == 0;
        if quiet
            || ledger.committing != 0
            || erasure.number != ledger.begun
            || held.begun + 1 != erasure.number
            || ended != held.old_ended
        {
            return false;
        }
        ledger.held = Some(Held {
            begun: erasure.number,
            ..held
        });
        true
    }

    /// After `erasure` failed with `e`: the scrub is owed no more when `e` says nothing was
    /// committed (an unknown entity, a refusal), none was owed before, and no other erasure
    /// began since. Any other error may have come after the commit, and leaves it owed.
    pub(crate) fn nothing_erased(&self, erasure: Erasure, e: &Error) {
        {
            let mut ledger = self.ledger();
            ledger.committing = ledger.committing.saturating_sub(1);
        }
        let refused = matches!(
            e,
            Error::NotFound { .. }
                | Error::InvalidInput { .. }
                | Error::PermissionDenied { .. }
                | Error::Conflict { .. }
        );
        if refused {
            // Best effort: a note left behind costs the next gc one scrub.
            let _ = self.no_scrub_owed(erasure);
        }
    }

    /// Removes the note `erasure` wrote when it owes no scrub (it erased nothing): unless a
    /// scrub was owed before it, or another erasure began since (whose commit may need it).
    ///
    /// # Errors
    /// As [`RedbStore::scrub_paid`].
    pub(crate) fn no_scrub_owed(&self, erasure: Erasure) -> Result<()> {
        let ledger = self.ledger();
        if erasure.owed || ledger.begun != erasure.number || ledger.committing != 0 {
            return Ok(());
        }
        self.scrub_paid()
    }

    /// Removes the [`SCRUB_PENDING`] file: no scrub is owed any more.
    ///
    /// # Errors
    /// [`Error::Io`] when it is there and cannot be removed.
    pub(crate) fn scrub_paid(&self) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = dir.join(SCRUB_PENDING);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        }
    }

    /// One fill of [`RedbStore::scrub_free_pages`]: all the free pages but a few.
    ///
    /// # Errors
    /// When a commit fails.
    fn scrub_free_pages_once(&self) -> Result<()> {
        const SCRUB: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("scrub");
        // Free pages left to the commits, and rows removed before the table is deleted.
        const SPARE: u64 = 8;
        const FIRST: u64 = 512;
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        for _ in 0..2 {
            self.begin_write()?.commit().db()?;
        }
        let path = dir.join(super::DB_FILE);
        let wtx = self.begin_write()?;
        let stats = wtx.stats().db()?;
        let page = stats.page_size() as u64;
        let (len, _) = super::file_size(&path);
        // An upper bound: the file's length also counts the header and the regions'
        // allocator pages, and the table takes branch pages besides its leaves.
        let free = (len / page.max(1)).saturating_sub(stats.allocated_pages());
        if free == 0 {
            return Ok(());
        }
        // More than half a page: a leaf holds one row, and redb writes its page whole.
        let zeros = vec![0u8; page as usize * 3 / 4];
        // A first pass finds how many rows fit before redb grows the file (a grown file would
        // be filled by the next scrub, and grow again); its abort takes the growth back.
        let fit = {
            let mut table = wtx.open_table(SCRUB).db()?;
            let mut fit = free;
            for n in 0..free {
                table.insert(n, zeros.as_slice()).db()?;
                if super::file_size(&path).0 > len {
                    fit = n;
                    break;
                }
            }
            fit
        };
        wtx.abort().db()?;
        // A few pages to spare for the commits' own records (the allocator's state, the lists of
        // freed pages): the pages the allocator reaches last, so whatever they hold is what
        // this scrub leaves.
        let rows = fit.saturating_sub(SPARE);
        let wtx = self.begin_write()?;
        {
            let mut table = wtx.open_table(SCRUB).db()?;
            for n in 0..rows {
                table.insert(n, zeros.as_slice()).db()?;
            }
        }
        wtx.commit().db()?;
        // Deleting the table records every page it frees, in pages that must be free already
        // (the spare ones are too few on a large store): a first removal of some rows frees the
        // pages that record takes. redb records 400 freed page numbers to an entry of 3.2 KB,
        // one entry to a page: `rows / 400` pages and the branch pages, so a 200th of the rows
        // (at least FIRST) leaves twice that.
        let first = FIRST.max(rows / 200);
        let wtx = self.begin_write()?;
        {
            let mut table = wtx.open_table(SCRUB).db()?;
            for n in rows.saturating_sub(first)..rows {
                table.remove(n).db()?;
            }
        }
        wtx.commit().db()?;
        for _ in 0..2 {
            self.begin_write()?.commit().db()?;
        }
        let wtx = self.begin_write()?;
        wtx.delete_table(SCRUB).db()?;
        wtx.commit().db()?;
        // The deletion's own freed pages (the zeros) are released by the next durable commit.
        self.begin_write()?.commit().db()
    }

    /// Regenerates `entities`, `versions`, `versions_by_tx`, `match_ops` and `paths` from the
    /// log and the content tables, honouring evictions, recounts document references, and
    /// empties the stat cache and the metadata snapshots. Op bodies that fail their digest are left out (fsck still names
    /// them).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a log header does not decode or an op points at a missing
    /// document.
    pub fn fsck_rebuild(&self) -> Result<()> {
        // The log is what the tables are rebuilt from: a store whose log tables are gone (a
        // damaged table directory) would replay nothing and lose every row. A write transaction
        // would make them anew, empty, so they are looked for in a read first.
        {
            let rtx = self.read()?;
            let missing = [
                ("tx_log", rtx.open_table(TX_LOG).err()),
                ("tx_ops", rtx.open_table(TX_OPS).err()),
            ];
            if let Some((table, Some(e))) = missing.into_iter().find(|(_, e)| e.is_some()) {
                return Err(Error::corrupt(format!(
                    "the log table {table} cannot be opened ({e}), so the query tables are not \
                     rebuilt from it; `strata fsck --salvage NEW_DIR` copies what verifies \
                     into a new store"
                )));
            }
        }
        let wtx = self.begin_write()?;
        wtx.delete_table(ENTITIES).db()?;
        wtx.delete_table(ENTITY_IDS).db()?;
        wtx.delete_table(VERSIONS).db()?;
        wtx.delete_table(VERSIONS_BY_TX).db()?;
        wtx.delete_table(MATCH_OPS).db()?;
        // The whole-path table of a store before format 10 (one whose upgrade could not read
        // it) goes too: the replay writes `paths_by_dir`.
        wtx.delete_table(PATHS).db()?;
        wtx.delete_table(PATHS_BY_DIR).db()?;
        wtx.open_table(PATHS_BY_DIR).db()?;
        // The stat cache is only a cache, and may vouch for bytes the store no longer holds:
        // emptied, so the next scan reads every file again (unchanged ones stay unchanged).
        wtx.delete_table(STAT_CACHE).db()?;
        wtx.delete_table(STAT_BY_DIR).db()?;
        wtx.open_table(STAT_BY_DIR).db()?;
        // The directory numbers key only the stat cache and the paths: numbered afresh by the
        // replay and the next scan.
        wtx.delete_table(DIRECTORIES).db()?;
        wtx.delete_table(DIRECTORY_PATHS).db()?;
        wtx.open_table(DIRECTORIES).db()?;
        wtx.open_table(DIRECTORY_PATHS).db()?;
        // Only `paths` and the stat cache use the filesystem numbers, both made anew here: the
        // replay numbers the filesystems afresh (repairing numbers the two tables disagree on).
        wtx.delete_table(FILESYSTEMS).db()?;
        wtx.delete_table(FILESYSTEM_IDS).db()?;
        wtx.open_table(FILESYSTEMS).db()?;
        wtx.open_table(FILESYSTEM_IDS).db()?;
        // Metadata snapshots summarise the rows rebuilt here: emptied, the next resume reads
        // row by row and writes them anew.
        wtx.delete_table(META_SNAPSHOTS).db()?;
        wtx.open_table(META_SNAPSHOTS).db()?;
        // A damaged chunk size in `meta` (fsck's `blob_chunk_size`): the chunks say what it is.
        {
            let mut meta = wtx.open_table(META).db()?;
            let seen = blobs::stream_chunk(&wtx.open_table(BLOB_DATA).db()?)?;
            let right = match (blobs::chunk_size(&meta), seen) {
                (Ok(said), Some(seen)) if said != seen => Some(seen),
                (Ok(_), _) => None,
                (Err(Error::Corrupt { .. }), seen) => Some(seen.unwrap_or(BLOB_CHUNK)),
                (Err(e), _) => return Err(e),
            };
            if let Some(size) = right {
                meta.insert(BLOB_CHUNK_KEY, size.to_le_bytes().as_slice())
                    .db()?;
            }
        }
        // The rebuilt rows are format 5's, 6's and 8's from the first transaction on: said
        // before the tables are opened, which read these keys (damage may have made them no
        // number: fsck's `meta_since`).
        {
            let mut meta = wtx.open_table(META).db()?;
            for key in ROW_FORMAT_SINCE_KEYS {
                meta.insert(key, 1u64.to_le_bytes().as_slice()).db()?;
            }
            // The floor of new document numbers guards against numbers rows may still name;
            // the rebuilt rows name only documents the store holds, so one that damage made no
            // number is dropped.
            if read_counter(&meta, DOC_NUMBERS_FROM).is_err() {
                meta.remove(DOC_NUMBERS_FROM).db()?;
            }
            // The directory tables and the stat cache were emptied above: no row names a
            // directory number any more.
            meta.remove(DIR_NUMBERS_FROM).db()?;
        }
        {
            let mut w = WriteTables::open(&wtx)?;
            // The keys written above, as the tables read them: format 5's rows, format 6's
            // sources in `entity_ids`, format 8's short keys and version rows by number, all from
            // the first transaction on.
            w.by_tx_since = 1;
            w.sources_since = 1;
            w.short_since = 1;
            w.doc_seqs_since = 1;
            let mut docs = Vec::new();
            for entry in w.docs.index.iter().db()? {
                let (k, v) = entry.db()?;
                docs.push((k.value(), v.value()));
            }
            for (hash, (seq, _, file_blob)) in docs {
                w.docs.index.insert(hash, (seq, 0, file_blob)).db()?;
            }
            let mut headers = Vec::new();
            for entry in w.tx_log.iter().db()? {
                let (k, v) = entry.db()?;
                let header =
                    codec::decode_header(v.value(), &format!("header of tx {}", k.value()))?;
                headers.push((k.value(), header));
            }
            for (tx, header) in headers {
                let tx_time = header.tx_time;
                for (n, digest) in (0u32..).zip(&header.digests) {
                    let body = w.tx_ops.get((tx, n)).db()?.map(|v| v.value().to_vec());
                    let Some(body) = body else { continue };
                    // A body that does not decode or hash to its digest is damage: replaying it
                    // would write what the damage made of it (another path, another time). It
                    // is left out; fsck goes on naming it, and salvage keeps what verifies.
                    let Ok(op) = codec::decode_op(
                        &body,
                        tx_time,
                        &header.filesystems,
                        &format!("op {n} of tx {tx}"),
                    ) else {
                        continue;
                    };
                    if crate::store::log::op_digest(&op)? != *digest {
                        continue;
                    }
                    // An op that writes an entity whose first write the log no longer holds
                    // (a body lost without an eviction) is damage to the log, not a wrong id.
                    w.apply(tx, tx_time, n, &op).map_err(|e| match e {
                        Error::NotFound { what } => Error::corrupt(format!(
                            "op {n} of tx {tx} cannot be replayed: {what}; the log lost what \
                             came before it, so the tables are not rebuilt from it; `strata \
                             fsck --salvage NEW_DIR` copies what verifies into a new store"
                        )),
                        other => other,
                    })?;
                }
                w.end_tx()?;
            }
            w.finish()?;
        }
        // The replay wrote `entities` and `paths` in log order, that is at random places: their
        // pages are ~70 % full, where the close's repack would only come after a large write.
        super::repack::repack_tables(&wtx)?;
        wtx.commit().db()?;
        Ok(())
    }

    /// Writes each of `contents` back as a fresh whole record at the end of the blob stream and
    /// points `blob_index` at it, keeping the stored reference count (1 when the entry was
    /// lost). The damaged record's bytes stay where they were, unreferenced (its range may be
    /// what the damage invented, so erasing it could erase another content), rewritten as they
    /// are so that their pages verify again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when bytes do not hash to their hash.
    pub fn restore_contents(&self, contents: Vec<([u8; 32], Vec<u8>)>) -> Result<()> {
        for (hash, bytes) in &contents {
            if crate::hash::sha256(bytes).0 != *hash {
                return Err(crate::error::Error::invalid_input(format!(
                    "the bytes given for content {} do not hash to it",
                    hex::encode(hash)
                )));
            }
        }
        let wtx = self.begin_write()?;
        {
            let mut w = WriteTables::open(&wtx)?;
            for (hash, bytes) in contents {
                let old = w.blobs.index.get(&hash).db()?.map(|v| v.value());
                let refs = old.map_or(1, |(_, _, refs)| refs);
                // The chunks under the old record are written again as they are, so that their
                // pages get fresh checksums (the storage engine's own check passes). The
                // record's place is the damaged store's word: no further than the last chunk
                // there is (a damaged length once made this loop run for ever).
                let chunk_size = w.blobs.chunk;
                let last_chunk = w.blobs.data()?.last().db()?.map(|(no, _)| no.value());
                if let (Some((offset, len, _)), Some(last_chunk)) = (old, last_chunk) {
                    let first = offset / chunk_size;
                    let last = (offset.saturating_add(len.max(1) - 1) / chunk_size).min(last_chunk);
                    for no in first..=last {
                        let data = w.blobs.data()?;
                        let chunk = data.get(no).db()?.map(|v| v.value().to_vec());
                        if let Some(chunk) = chunk {
                            data.insert(no, chunk.as_slice()).db()?;
                        }
                    }
                }
                let record = codec::encode_blob(&bytes);
                let offset = w.blobs.append(&record)?;
                w.blobs
                    .index
                    .insert(&hash, (offset, record.len() as u64, refs))
                    .db()?;
            }
            w.blobs.flush()?;
        }
        wtx.commit().db()?;
        Ok(())
    }

    /// Removes documents no version references and blobs no document references, and fixes
    /// reference counts, in one transaction.
    ///
    /// A version row whose document is damaged (its record missing or unreadable, or a number
    /// no document has) is reported in [`GcReport::damaged`], never skipped: a document such
    /// a row names is kept and counted, and the contents are not swept while a live
    /// document's record cannot say which it uses. A row whose document cannot be named at
    /// all stops every removal (any document might be its). `strata fsck --repair` is the
    /// remedy either way.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a version row or a blob record does not decode.
    pub fn gc(&self) -> Result<GcReport> {
        let wtx = self.begin_write()?;
        let mut report = GcReport::default();
        let swept = {
            let mut w = WriteTables::open(&wtx)?;
            let mut doc_counts: HashMap<[u8; 32], u64> = HashMap::new();
            // Rows whose numbered document does not resolve: key, number, why.
            let mut unresolved = Vec::new();
            for entry in w.versions.iter().db()? {
                let (k, v) = entry.db()?;
                match docs::version_rec(v.value(), &w.doc_hashes(), "version") {
                    Ok(rec) => {
                        if let Some(hash) = rec.object_hash {
                            *doc_counts.entry(hash).or_default() += 1;
                        }
                    }
                    Err(Error::Corrupt { what }) => {
                        let seq = codec::decode_version(v.value(), "version")
                            .ok()
                            .and_then(|(_, seq)| seq);
                        unresolved.push((k.value(), seq, what));
                    }
                    Err(e) => return Err(e),
                }
            }
            let mut docs = Vec::new();
            for entry in w.docs.index.iter().db()? {
                let (k, v) = entry.db()?;
                docs.push((k.value(), v.value()));
            }
            // The document each unresolved row names: the one `doc_index` places at its
            // number, whose record is damaged; a row without one names no known document.
            let mut damaged_docs = std::collections::HashSet::new();
            let mut blind = false;
            for ((eid, _, tx), seq, what) in unresolved {
                let placed: Vec<[u8; 32]> = docs
                    .iter()
                    .filter(|(_, (at, _, _))| Some(*at) == seq)
                    .map(|(hash, _)| *hash)
                    .collect();
                let entity = super::entity::id_of_eid(&w, eid).ok().flatten();
                let path = match &entity {
                    Some(id) => super::entity_rec(&w, id)
                        .ok()
                        .flatten()
                        .and_then(|r| r.source.map(|(_, path)| path)),
                    None => None,
                };
                let found = match (placed.as_slice(), seq) {
                    ([hash], Some(seq)) => {
                        *doc_counts.entry(*hash).or_default() += 1;
                        damaged_docs.insert(*hash);
                        let kind = if w.docs.data.get(seq).db()?.is_some() {
                            "doc_unreadable"
                        } else {
                            "doc_missing"
                        };
                        finding(
                            kind,
                            hex::encode(hash),
                            format!(
                                "{what}; gc kept the document and every content (a version \
                                 names it)"
                            ),
                        )
                    }
                    _ => {
                        blind = true;
                        finding(
                            "versions",
                            format!("version row of entity {eid} at tx {tx}"),
                            format!(
                                "{what}; no document is known by its number, so gc removed \
                                 nothing"
                            ),
                        )
                    }
                };
                report.damaged.push(Finding {
                    entity,
                    path,
                    tx: Some(tx),
                    ..found
                });
            }
            if blind {
                false
            } else {
                Self::sweep(&mut w, &mut report, docs, &doc_counts, &damaged_docs)?;
                true
            }
        };
        // Nothing swept: the transaction is dropped, which aborts it (it changed nothing).
        if swept {
            wtx.commit().db()?;
        }
        Ok(report)
    }

    /// [`RedbStore::gc`]'s removals once every version's document is known (`docs`: the
    /// `doc_index` rows; `doc_counts`: the versions of each document; `damaged`: documents
    /// whose records are not to be trusted). The contents are left as they are when a live
    /// document's record cannot say which contents it uses.
    fn sweep(
        w: &mut WriteTables<'_>,
        report: &mut GcReport,
        docs: Vec<([u8; 32], (u64, u64, bool))>,
        doc_counts: &HashMap<[u8; 32], u64>,
        damaged: &std::collections::HashSet<[u8; 32]>,
    ) -> Result<()> {
        let mut blob_counts: HashMap<[u8; 32], u64> = HashMap::new();
        let mut blobs_known = true;
        for (hash, (seq, refs, file_blob)) in docs {
            let counted = doc_counts.get(&hash).copied().unwrap_or(0);
            if counted == 0 {
                w.docs.index.remove(hash).db()?;
                if let Some(record) = w.docs.remove_record(seq)? {
                    report.bytes_freed += record.len() as u64;
                }
                report.documents_removed += 1;
                continue;
            }
            if counted != refs {
                report.counts_fixed += 1;
                w.docs.index.insert(hash, (seq, counted, file_blob)).db()?;
            }
            if damaged.contains(&hash) {
                blobs_known = false;
                continue;
            }
            let rec = match w.docs.data.get(seq).db()? {
                Some(record) => codec::decode::<DocRec>(record.value(), "document"),
                None => Err(Error::corrupt(format!("its record {seq} is missing"))),
            };
            match rec {
                Ok(rec) => {
                    for blob in docs::doc_blobs(&rec, file_blob) {
                        *blob_counts.entry(blob).or_default() += 1;
                    }
                }
                Err(Error::Corrupt { what }) => {
                    blobs_known = false;
                    report.damaged.push(finding(
                        "doc_unreadable",
                        hex::encode(hash),
                        format!(
                            "{what}; gc kept the document and every content (a version names \
                             it)"
                        ),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        if blobs_known {
            Self::sweep_blobs(w, report, blob_counts)?;
        }
        w.add_counter(super::STORED_BYTES, -(report.bytes_freed as i64))?;
        w.save_numbers_from()?;
        Ok(())
    }

    /// Removes the blobs no live document uses (`blob_counts`: their uses by document) and
    /// fixes the counts of the others.
    fn sweep_blobs(
        w: &mut WriteTables<'_>,
        report: &mut GcReport,
        mut blob_counts: HashMap<[u8; 32], u64>,
    ) -> Result<()> {
        let mut all_blobs = Vec::new();
        for entry in w.blobs.index.iter().db()? {
            let (k, v) = entry.db()?;
            all_blobs.push((k.value(), v.value()));
        }
        // A live suffix record keeps its base alive: propagate along the chains, reading
        // each live blob's header once.
        let locations: HashMap<[u8; 32], (u64, u64)> = all_blobs
            .iter()
            .map(|(hash, (offset, len, _))| (*hash, (*offset, *len)))
            .collect();
        let mut live: Vec<[u8; 32]> = blob_counts.keys().copied().collect();
        let chunk = w.blobs.chunk;
        while let Some(hash) = live.pop() {
            let Some((offset, len)) = locations.get(&hash) else {
                continue;
            };
            if let Some(base) =
                blobs::record_header(w.blobs.data()?, chunk, &hash, *offset, *len)?.base
            {
                let count = blob_counts.entry(base).or_default();
                *count += 1;
                if *count == 1 {
                    live.push(base);
                }
            }
        }
        for (hash, (offset, len, refs)) in all_blobs {
            let counted = blob_counts.get(&hash).copied().unwrap_or(0);
            if counted == 0 {
                w.blobs.index.remove(hash).db()?;
                blobs::erase_blob(&mut w.blobs, offset, len)?;
                report.bytes_freed += len;
                report.blobs_removed += 1;
            } else if counted != refs {
                report.counts_fixed += 1;
                w.blobs.index.insert(hash, (offset, len, counted)).db()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};
    use crate::store::redb::ReadTables;

    /// A new store in a temporary directory (kept while the returned guard lives).
    fn new_store() -> Result<(tempfile::TempDir, RedbStore)> {
        let dir = tempfile::tempdir().map_err(|e| crate::error::Error::io("tempdir", e))?;
        let store = RedbStore::create(dir.path())?;
        Ok((dir, store))
    }

    /// Puts file `/a` of filesystem `fs` holding `text`, in a transaction of its own.
    fn put_a(store: &RedbStore, text: &str) -> Result<Object> {
        let object = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a".into(),
            },
            text.into(),
        )?;
        Backend::transact(store, vec![Op::put(object.clone())], Origin::Cli)?;
        Ok(object)
    }

    /// A rebuild that meets a write to an entity whose first write the log lost (its body gone
    /// without an eviction) refuses as corrupt, naming salvage, instead of answering "not found"
    /// (corruption seed 114: a damaged key made a body unfindable while fsck called it only a
    /// lookup failure, so `fsck --repair` rebuilt and failed with `not_found`).
    #[test]
    fn a_rebuild_over_a_lost_first_write_is_corrupt_not_not_found() -> Result<()> {
        let (_dir, store) = new_store()?;
        put_a(&store, "one\n")?;
        put_a(&store, "two\n")?;
        let wtx = store.begin_write()?;
        {
            let mut ops = wtx.open_table(TX_OPS).db()?;
            ops.remove((1u64, 0u32)).db()?;
        }
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "op_missing"
                    && crate::store::damage::LOG_DAMAGE.contains(&f.kind)),
            "{findings:?}"
        );
        let answer = store.fsck_rebuild();
        assert!(
            matches!(&answer, Err(crate::error::Error::Corrupt { what })
                if what.contains("op 0 of tx 2") && what.contains("--salvage")),
            "{answer:?}"
        );
        Ok(())
    }

    /// A store whose table directory lost the log (a damaged name): fsck names log damage, so
    /// a repair does not rebuild, and a rebuild refuses instead of replaying an empty log over
    /// every table (corruption seed 114: the rebuild made a new, empty `tx_log` and dropped
    /// every row; the salvage after it then found an empty store).
    #[test]
    fn a_store_without_its_log_table_is_not_rebuilt_from_nothing() -> Result<()> {
        let (_dir, store) = new_store()?;
        let object = put_a(&store, "kept\n")?;
        let lost: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("tx_lox");
        let wtx = store.begin_write()?;
        wtx.rename_table(TX_LOG, lost).db()?;
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| crate::store::damage::LOG_DAMAGE.contains(&f.kind)),
            "{findings:?}"
        );
        let answer = store.fsck_rebuild();
        assert!(
            matches!(&answer, Err(crate::error::Error::Corrupt { what })
                if what.contains("tx_log") && what.contains("--salvage")),
            "{answer:?}"
        );
        // Nothing was dropped: with its name back, the store answers as before.
        let wtx = store.begin_write()?;
        wtx.rename_table(lost, TX_LOG).db()?;
        wtx.commit().db()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert!(store.as_of(object.id(), None, None)?.is_some());
        Ok(())
    }

    /// A rebuild while another reader of the store is live (a daemon's client) succeeds: the
    /// storage engine's check of the file after it waits for the reader, and skips when it
    /// keeps reading, instead of failing a repair that worked.
    #[test]
    fn a_rebuild_beside_a_live_reader_succeeds() -> Result<()> {
        let (_dir, store) = new_store()?;
        let object = put_a(&store, "read meanwhile\n")?;
        let reader = store.read()?;
        Backend::fsck_rebuild(&store)?;
        drop(reader);
        Backend::fsck_rebuild(&store)?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert!(store.as_of(object.id(), None, None)?.is_some());
        Ok(())
    }

    /// A chunk size in `meta` that damage changed (to the other size strata writes, or to bytes
    /// that are no size) is one `blob_chunk_size` finding, not a finding per chunk and per
    /// content; a rebuild writes the size the chunks show, and every content reads back.
    #[test]
    fn a_damaged_chunk_size_in_meta_is_found_and_repaired_from_the_chunks() -> Result<()> {
        for damage in [BLOB_CHUNK_OLD.to_le_bytes().to_vec(), vec![1, 2, 3]] {
            let (_dir, store) = new_store()?;
            // Hex of a multiplicative hash: ~20 KB after compression, five chunks.
            let text: String = (0..6000u32)
                .map(|i| format!("{:08x}", i.wrapping_mul(2_654_435_761)))
                .collect();
            put_a(&store, &text)?;
            let hash = crate::hash::sha256(text.as_bytes());
            let wtx = store.begin_write()?;
            wtx.open_table(META)
                .db()?
                .insert(BLOB_CHUNK_KEY, damage.as_slice())
                .db()?;
            wtx.commit().db()?;
            assert!(
                store.content(&hash).is_err(),
                "{damage:?}: reads cut wrongly"
            );
            let findings = store.fsck();
            let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
            // Bytes that are no size also stop the check of the metadata snapshots (it reads
            // contents): one more finding that the same repair clears.
            assert_eq!(
                kinds.first(),
                Some(&"blob_chunk_size"),
                "{damage:?}: {findings:?}"
            );
            assert!(
                kinds.len() == 1
                    || (damage.len() == 3 && kinds == ["blob_chunk_size", "unreadable"]),
                "{damage:?}: {findings:?}"
            );
            Backend::fsck_rebuild(&store)?;
            assert!(store.fsck().is_empty(), "{damage:?}: {:?}", store.fsck());
            assert_eq!(store.content(&hash)?, Some(text.into_bytes()));
        }
        Ok(())
    }

    /// A `meta` key saying from which transaction a format's rows begin (formats 5, 6 and 8)
    /// whose bytes damage made no number is one finding naming it (the op bodies are still
    /// checked and replayed), and a rebuild, which writes those rows from the first
    /// transaction on, repairs it; so are the floors of new document and directory numbers,
    /// which every writer reads (the rebuild drops them).
    #[test]
    fn a_damaged_since_key_in_meta_is_found_and_repaired() -> Result<()> {
        for key in ROW_FORMAT_SINCE_KEYS
            .into_iter()
            .chain([DOC_NUMBERS_FROM, DIR_NUMBERS_FROM])
        {
            let (_dir, store) = new_store()?;
            let object = put_a(&store, "a")?;
            let wtx = store.begin_write()?;
            wtx.open_table(META)
                .db()?
                .insert(key, [1u8, 2, 3].as_slice())
                .db()?;
            wtx.commit().db()?;
            let findings = store.fsck();
            let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
            // Readers read format 5's key too: the check of the metadata snapshots stops.
            let expected: &[&str] = match key {
                BY_TX_OMITTED_SINCE => &["meta_since", "unreadable"],
                _ => &["meta_since"],
            };
            assert_eq!(kinds, expected, "{key}: {findings:?}");
            assert!(findings[0].subject.contains(key), "{key}: {findings:?}");
            assert_eq!(findings[0].repair, crate::store::damage::REPAIR);
            Backend::fsck_rebuild(&store)?;
            assert!(store.fsck().is_empty(), "{key}: {:?}", store.fsck());
            put_a(&store, "a2")?;
            assert!(store.fsck().is_empty(), "{key}: {:?}", store.fsck());
            assert!(store.as_of(object.id(), None, None)?.is_some());
        }
        Ok(())
    }

    /// A content whose index row holds a damaged length (the 10 000-case corruption suite hung
    /// here: the rewrite of the old record's chunks ran for ~2^50 chunks) is restored at once,
    /// and reads back.
    #[test]
    fn restoring_a_content_whose_index_row_is_damaged_ends() -> Result<()> {
        let (_dir, store) = new_store()?;
        let text = "restored text\n".repeat(50);
        put_a(&store, &text)?;
        let hash = crate::hash::sha256(text.as_bytes()).0;
        {
            let wtx = store.begin_write()?;
            {
                let mut index = wtx.open_table(BLOB_INDEX).db()?;
                let (offset, _, refs) = index
                    .get(&hash)
                    .db()?
                    .map(|v| v.value())
                    .ok_or_else(|| crate::error::Error::invariant("no index row"))?;
                index.insert(&hash, (offset, u64::MAX / 2, refs)).db()?;
            }
            wtx.commit().db()?;
        }
        store.restore_contents(vec![(hash, text.as_bytes().to_vec())])?;
        let rtx = store.read()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        let (_, len, _) = index
            .get(&hash)
            .db()?
            .map(|v| v.value())
            .ok_or_else(|| crate::error::Error::invariant("no index row"))?;
        assert!(len < 4096, "the restored record's length is {len}");
        Ok(())
    }

    /// Three files `/a`, `/b`, `/c` of filesystem `fs` put in one transaction, with `c`'s
    /// version rows then removed behind the store's back when `garbage` (its document and
    /// content become garbage for gc), and the `doc_data` number of `a`'s document.
    fn three_files(store: &RedbStore, garbage: bool) -> Result<([Object; 3], u64)> {
        let file = |path: &str, text: &str| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: "fs".into(),
                    path: path.into(),
                },
                text.into(),
            )
        };
        let files = [
            file("/a", "alpha\n")?,
            file("/b", "beta\n")?,
            file("/c", "gamma\n")?,
        ];
        store.transact(files.iter().cloned().map(Op::put).collect(), Origin::Cli)?;
        let seq = doc_row(store, files[0].object_hash().0)?
            .ok_or_else(|| crate::error::Error::invariant("a's document"))?
            .0;
        if !garbage {
            return Ok((files, seq));
        }
        let eid = {
            let rtx = store.read()?;
            super::super::entity_rec(&ReadTables::open(&rtx)?, files[2].id())?
                .ok_or_else(|| crate::error::Error::invariant("c's entity"))?
                .eid
        };
        let wtx = store.begin_write()?;
        {
            let mut versions = wtx.open_table(VERSIONS).db()?;
            let keys: Vec<(u64, i64, u64)> = versions
                .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
                .db()?
                .map(|e| e.db().map(|(k, _)| k.value()))
                .collect::<Result<_>>()?;
            let mut by_tx = wtx.open_table(VERSIONS_BY_TX).db()?;
            for key in keys {
                versions.remove(key).db()?;
                by_tx.remove((key.0, key.2)).db()?;
            }
        }
        wtx.commit().db()?;
        Ok((files, seq))
    }

    /// The `doc_index` row of document `hash`.
    fn doc_row(store: &RedbStore, hash: [u8; 32]) -> Result<Option<(u64, u64, bool)>> {
        let rtx = store.read()?;
        let index = rtx.open_table(DOC_INDEX).db()?;
        Ok(index.get(&hash).db()?.map(|v| v.value()))
    }

    /// Whether content `hash` is stored.
    fn has_blob(store: &RedbStore, hash: &crate::hash::Hash) -> Result<bool> {
        let rtx = store.read()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        Ok(index.get(&hash.0).db()?.is_some())
    }

    /// Writes `record` as document number `seq` (`None`: removes it and its `doc_index` row).
    fn damage_doc(store: &RedbStore, seq: u64, record: Option<&[u8]>) -> Result<()> {
        let wtx = store.begin_write()?;
        {
            let mut data = wtx.open_table(DOC_DATA).db()?;
            match record {
                Some(bytes) => {
                    data.insert(seq, bytes).db()?;
                }
                None => {
                    data.remove(seq).db()?;
                    let mut index = wtx.open_table(DOC_INDEX).db()?;
                    let rows: Vec<[u8; 32]> = index
                        .iter()
                        .db()?
                        .filter_map(|e| e.db().ok())
                        .filter(|(_, v)| v.value().0 == seq)
                        .map(|(k, _)| k.value())
                        .collect();
                    for hash in rows {
                        index.remove(&hash).db()?;
                    }
                }
            }
        }
        wtx.commit().db()
    }

    /// gc over a version row whose document record is damaged: it removes the document no
    /// row names, keeps the damaged one and every content (the damaged record cannot say
    /// which contents it uses), reports the row naming the repair, marks the store damaged,
    /// and loses nothing: the other files read as before.
    #[test]
    fn gc_keeps_what_a_row_with_a_damaged_document_may_use() -> Result<()> {
        let (_dir, store) = new_store()?;
        let ([a, b, c], seq) = three_files(&store, true)?;
        damage_doc(&store, seq, Some(&[9, 9, 9]))?;
        let report = Backend::gc(&store)?;
        assert_eq!(report.documents_removed, 1, "{report:?}");
        assert_eq!(report.blobs_removed, 0, "{report:?}");
        assert_eq!(report.damaged.len(), 1, "{report:?}");
        let found = &report.damaged[0];
        assert_eq!(found.kind, "doc_unreadable");
        assert_eq!(found.entity.as_deref(), Some(a.id()));
        assert_eq!(found.path.as_deref(), Some("/a"));
        assert_eq!(found.repair, crate::store::damage::REPAIR);
        assert_eq!(
            doc_row(&store, c.object_hash().0)?,
            None,
            "c's document went"
        );
        assert!(
            doc_row(&store, a.object_hash().0)?.is_some(),
            "a's document stays"
        );
        for file in [&a, &b, &c] {
            let content = file
                .content_hash()
                .ok_or_else(|| Error::not_found("content"))?;
            assert!(has_blob(&store, content)?, "{}'s content stays", file.id());
        }
        let version = store.as_of(b.id(), None, None)?;
        assert_eq!(version.and_then(|v| v.object), Some(b.clone()));
        // A read of the damaged file still refuses; the store is marked damaged.
        assert!(matches!(
            store.as_of(a.id(), None, None),
            Err(Error::Corrupt { .. })
        ));
        let refused = Backend::gc(&store);
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("fsck --repair")),
            "{refused:?}"
        );
        Ok(())
    }

    /// gc over a version row naming a document number that no document has: the row's
    /// document is unknown (any unused-looking one may be it), so gc removes nothing and fixes
    /// nothing, and reports the row.
    #[test]
    fn gc_removes_nothing_when_a_rows_document_is_unknown() -> Result<()> {
        let (_dir, store) = new_store()?;
        let ([a, _, c], seq) = three_files(&store, true)?;
        damage_doc(&store, seq, None)?;
        let before = store.stats()?;
        let report = store.gc()?;
        assert_eq!(
            (
                report.documents_removed,
                report.blobs_removed,
                report.counts_fixed,
                report.bytes_freed
            ),
            (0, 0, 0, 0),
            "{report:?}"
        );
        assert_eq!(report.damaged.len(), 1, "{report:?}");
        assert_eq!(report.damaged[0].kind, "versions");
        assert_eq!(report.damaged[0].entity.as_deref(), Some(a.id()));
        assert!(report.damaged[0].detail.contains("removed nothing"));
        let after = store.stats()?;
        assert_eq!(
            (before.documents, before.blobs, before.stored_bytes),
            (after.documents, after.blobs, after.stored_bytes)
        );
        assert!(doc_row(&store, c.object_hash().0)?.is_some());
        Ok(())
    }

    /// Evicting a file whose version row names a damaged document record evicts it: the row
    /// was to go anyway, and its document (used by nothing else) goes with it, without its
    /// record being read; the content it named stays until gc, which then finds it unused.
    /// The other files are untouched and the store verifies after.
    #[test]
    fn evict_of_a_file_whose_document_is_damaged_evicts_it() -> Result<()> {
        for record in [Some([9u8, 9, 9].as_slice()), None] {
            let (_dir, store) = new_store()?;
            let ([a, b, c], seq) = three_files(&store, false)?;
            damage_doc(&store, seq, record)?;
            Backend::evict(&store, a.id(), Origin::Cli)?;
            let gone = store.as_of(a.id(), None, None);
            assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
            assert_eq!(doc_row(&store, a.object_hash().0)?, None);
            let version = store.as_of(b.id(), None, None)?;
            assert_eq!(version.and_then(|v| v.object), Some(b.clone()));
            let report = store.gc()?;
            assert!(report.damaged.is_empty(), "{report:?}");
            let a_content = a
                .content_hash()
                .ok_or_else(|| Error::not_found("content"))?;
            assert!(!has_blob(&store, a_content)?, "gc took a's content");
            assert_eq!(store.fsck(), vec![], "{record:?}");
            assert!(doc_row(&store, c.object_hash().0)?.is_some());
        }
        Ok(())
    }

    /// The scrub fills the free pages without growing the file, and leaves no fragment of an
    /// evicted secret in it, on a small store, a larger one, and one after heavy churn (every
    /// file rewritten many times: many free pages, of every table): the spare pages it leaves
    /// its own commits are enough, and the pages they hold are filled by its second pass.
    #[test]
    fn the_scrub_fills_free_pages_without_growing_the_file() -> Result<()> {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut hex = |len: usize| -> String {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    char::from(b"0123456789abcdef"[(seed % 16) as usize])
                })
                .collect()
        };
        let file = |path: String, text: String| {
            Object::file_text(
                FilesystemSource {
                    filesystem_id: "fs".into(),
                    path,
                },
                text,
            )
        };
        // (files, rewrites of each, bytes of each)
        for (files, rewrites, size) in [(10, 0, 300), (3000, 0, 2000), (200, 30, 3000)] {
            let (dir, store) = new_store()?;
            for round in 0..=rewrites {
                let mut ops = Vec::new();
                for n in 0..files {
                    ops.push(Op::put(file(format!("/f{n}"), hex(size))?));
                    if ops.len() == 500 {
                        store.transact(std::mem::take(&mut ops), Origin::Cli)?;
                    }
                }
                if !ops.is_empty() {
                    store.transact(ops, Origin::Cli)?;
                }
                let _ = round;
            }
            // Random bytes: stored as they are (compression would hide a fragment).
            let secret_bytes: Vec<u8> = hex(400 * 1024)
                .as_bytes()
                .chunks(2)
                .map(|pair| {
                    let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    digit(pair[0]) << 4 | digit(pair[1])
                })
                .collect();
            let secret = Object::file_bytes(
                FilesystemSource {
                    filesystem_id: "fs".into(),
                    path: "/secret".into(),
                },
                secret_bytes.clone(),
            )?;
            let mut put = crate::store::Put::new(secret.clone());
            put.bytes = Some(secret_bytes.clone());
            store.transact(vec![Op::Put(Box::new(put))], Origin::Cli)?;
            Backend::evict(&store, secret.id(), Origin::Cli)?;
            Backend::gc(&store)?;
            let path = dir.path().join(super::super::DB_FILE);
            let before = super::super::file_size(&path).0;
            store.scrub_free_pages()?;
            let after = super::super::file_size(&path).0;
            assert!(
                after <= before,
                "{files} files, {rewrites} rewrites: the scrub grew the file {before} -> {after}"
            );
            let bytes = std::fs::read(&path).map_err(|e| Error::io("reading the file", e))?;
            let needles: std::collections::HashSet<&[u8]> = secret_bytes.chunks(32).collect();
            let left = bytes.windows(32).filter(|w| needles.contains(w)).count();
            assert_eq!(
                left, 0,
                "{files} files, {rewrites} rewrites: fragments left"
            );
            assert_eq!(store.fsck(), vec![]);
        }
        Ok(())
    }

    /// Evicting a file whose first 88 bits other ids share (tool calls, which keep their whole
    /// keys, written before and after it) leaves fsck clean and the others found: the 88-bit
    /// limit of docs/store.md needs a second file, not any hash id.
    #[test]
    fn evicting_a_file_whose_bits_hash_ids_share_leaves_fsck_clean() -> Result<()> {
        let (_dir, store) = new_store()?;
        let a = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a".into(),
            },
            "alpha\n".into(),
        )?;
        let toolcall = |id: &str| {
            Object::toolcall(
                id,
                crate::object::ToolcallFields {
                    tool: "grep".into(),
                    args: serde_json::Map::new(),
                    args_display: None,
                    status: crate::object::ToolStatus::Fail,
                    chat_ref: "chat:s".into(),
                    file_refs: None,
                },
                "no match".into(),
            )
        };
        let twin = |fill: char| format!("{}{}", &a.id()[..22], fill.to_string().repeat(42));
        let (low, high) = (twin('0'), twin('f'));
        store.transact(vec![Op::put(toolcall(&low)?)], Origin::Cli)?;
        store.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        store.transact(vec![Op::put(toolcall(&high)?)], Origin::Cli)?;
        assert_eq!(store.fsck(), vec![]);
        Backend::evict(&store, a.id(), Origin::Cli)?;
        assert_eq!(store.fsck(), vec![]);
        assert!(matches!(
            store.as_of(a.id(), None, None),
            Err(Error::NotFound { .. })
        ));
        for id in [&low, &high] {
            assert!(store.as_of(id, None, None)?.is_some(), "{id}");
        }
        Ok(())
    }

    /// A file `/secret` of `kib` KiB of random bytes (stored as they are), put: the object and
    /// its bytes.
    fn put_secret(
        store: &RedbStore,
        path: &str,
        kib: usize,
        mut seed: u64,
    ) -> Result<(Object, Vec<u8>)> {
        let bytes: Vec<u8> = (0..kib * 1024)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect();
        let secret = Object::file_bytes(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            bytes.clone(),
        )?;
        let mut put = crate::store::Put::new(secret.clone());
        put.bytes = Some(bytes.clone());
        store.transact(vec![Op::Put(Box::new(put))], Origin::Cli)?;
        Ok((secret, bytes))
    }

    /// How many 32-byte pieces of `secret` the store file in `dir` holds.
    fn fragments(dir: &std::path::Path, secret: &[u8]) -> Result<usize> {
        let path = dir.join(super::super::DB_FILE);
        let bytes = std::fs::read(&path).map_err(|e| Error::io("reading the file", e))?;
        let needles: std::collections::HashSet<&[u8]> = secret.chunks(32).collect();
        Ok(bytes.windows(32).filter(|w| needles.contains(w)).count())
    }

    /// Two erasures at once (two daemon clients): one that is refused (nothing committed) while
    /// another commits does not take the note the other needs, and the other's scrub runs: its
    /// secret leaves the free pages, and a kill before that scrub would leave the note.
    #[test]
    fn a_refused_erasure_beside_a_committed_one_leaves_its_scrub_owed() -> Result<()> {
        let (dir, store) = new_store()?;
        let (secret, bytes) = put_secret(&store, "/secret", 256, 0x2545_f491_4f6c_dd1d)?;
        // A begins (an evict of what turns out to be nothing).
        let a = store.owe_scrub_before_erasure()?;
        // B evicts the secret and commits.
        Backend::evict(&store, secret.id(), Origin::Cli)?;
        // A is refused, before B's scrub.
        store.nothing_erased(a, &Error::not_found("file:nothing"));
        assert!(
            store.scrub_owed(),
            "B committed and has not scrubbed: the scrub is owed"
        );
        // B scrubs.
        store.finish_erasure()?;
        assert_eq!(
            fragments(dir.path(), &bytes)?,
            0,
            "B's secret left in free pages"
        );
        assert!(!store.scrub_owed());
        Ok(())
    }

    /// A scrub while a reader that began before the evict still lives (a daemon's client
    /// reading) cannot take the pages that reader sees: they are freed only once it ends. The
    /// note stays, and the next gc zeroes them.
    #[test]
    fn a_scrub_beside_a_live_reader_leaves_the_note() -> Result<()> {
        gc_after_a_reader_at_the_scrub(true, 0x5851_f42d_4c95_7f2d)
    }

    /// Evicts a secret with a reader running at its scrub (begun before the evict when
    /// `reader_first`, else after it), which keeps the note; ends the reader, then runs a gc,
    /// which must take the secret's pages and remove the note.
    fn gc_after_a_reader_at_the_scrub(reader_first: bool, seed: u64) -> Result<()> {
        let (dir, store) = new_store()?;
        let (secret, bytes) = put_secret(&store, "/secret", 256, seed)?;
        let early = if reader_first {
            Some(store.read()?)
        } else {
            None
        };
        Backend::evict(&store, secret.id(), Origin::Cli)?;
        let reader = match early {
            Some(reader) => reader,
            None => store.read()?,
        };
        store.finish_erasure()?;
        assert!(store.scrub_owed(), "the reader kept the note");
        drop(reader);
        Backend::gc(&store)?;
        assert_eq!(
            fragments(dir.path(), &bytes)?,
            0,
            "the secret left in free pages"
        );
        assert!(!store.scrub_owed(), "the gc left the note");
        Ok(())
    }

    /// A gc while a reader that began before an evict still lives (a daemon's client) finds
    /// the scrub owed (the reader keeps the note), but the pages that reader holds are still
    /// held: it does not redo the whole scrub, however many gcs run. Once the reader ends, the
    /// next gc scrubs, takes the secret's pages and removes the note. Failed before: every gc
    /// scrubbed again.
    #[test]
    fn a_gc_beside_the_reader_that_keeps_the_note_does_not_scrub_again() -> Result<()> {
        let (dir, store) = new_store()?;
        let (secret, bytes) = put_secret(&store, "/secret", 256, 0x2545_f491_4f6c_dd1d)?;
        let reader = store.read()?;
        Backend::evict(&store, secret.id(), Origin::Cli)?;
        store.finish_erasure()?;
        assert!(store.scrub_owed(), "the reader keeps the note");
        assert_eq!(store.ledger().scrubbed, 1);
        // Readers that begin and end after the evict hold none of its pages.
        for _ in 0..3 {
            drop(store.read()?);
            Backend::gc(&store)?;
            assert!(store.scrub_owed());
        }
        assert_eq!(
            store.ledger().scrubbed,
            1,
            "a gc scrubbed again for nothing"
        );
        drop(reader);
        Backend::gc(&store)?;
        assert_eq!(store.ledger().scrubbed, 2);
        assert_eq!(
            fragments(dir.path(), &bytes)?,
            0,
            "the secret left in free pages"
        );
        assert!(!store.scrub_owed());
        Ok(())
    }

    /// A scrub that kept the note only for a reader that began after the evict (a daemon's
    /// client reading at that moment, holding none of its pages) leaves nothing for a later gc
    /// to wait for: once that reader ended, a gc on the quiet store scrubs and removes the
    /// note. Failed before (fix14's skip): no old transaction ever ended, so every gc skipped
    /// the scrub and the note stayed for the handle's life.
    #[test]
    fn a_gc_on_a_quiet_store_removes_a_note_kept_for_a_later_reader() -> Result<()> {
        gc_after_a_reader_at_the_scrub(false, 0x9e37_79b9_7f4a_7c15)
    }

    /// A store dropped while a panic unwinds (a panic outside the storage guard, with the
    /// store on the stack) after its file grew (an evict's scrub) leaves a file that opens and
    /// verifies: redb's drop impls skip their staging while a thread panics, so the close's
    /// repack and compaction then damaged the file. Failed before: the drop's compaction
    /// panicked inside redb (bitmap.rs "must be less than"), and the next open failed.
    #[test]
    fn a_store_dropped_while_a_panic_unwinds_opens_again_sound() -> Result<()> {
        let (dir, store) = new_store()?;
        let (secret, _) = put_secret(&store, "/secret", 256, 0x2545_f491_4f6c_dd1d)?;
        let reader = store.read()?;
        Backend::evict(&store, secret.id(), Origin::Cli)?;
        store.finish_erasure()?;
        drop(reader);
        Backend::gc(&store)?;
        let panics = super::super::guard::panics_caught();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _store = store;
            std::panic::resume_unwind(Box::new("a panic outside the storage guard"));
        }));
        assert!(unwound.is_err());
        assert_eq!(
            super::super::guard::panics_caught(),
            panics,
            "the drop panicked inside redb"
        );
        let again = RedbStore::open(dir.path())?;
        assert_eq!(RedbStore::fsck(&again), vec![]);
        Ok(())
    }

    /// An erasure a panic inside redb unwinds through (caught by the guard) is settled: the
    /// ledger does not count it as committing for the handle's life, which kept every later
    /// scrub from removing the note.
    #[test]
    fn an_erasure_a_panic_unwinds_through_is_settled() -> Result<()> {
        let (_dir, store) = new_store()?;
        let caught = super::super::guard::guarded(
            &std::sync::atomic::AtomicBool::new(false),
            "evicting",
            || -> Result<()> {
                let _settling = store.begin_erasure()?;
                std::panic::panic_any("a damaged page");
            },
        );
        assert!(matches!(caught, Err(Error::Corrupt { .. })), "{caught:?}");
        assert_eq!(store.ledger().committing, 0);
        assert!(store.scrub_owed(), "it may have committed: the note stays");
        store.scrub_free_pages()?;
        assert!(!store.scrub_owed());
        Ok(())
    }

    /// A gc that scrubs while an evict has begun (its note written) but not committed (two
    /// daemon clients) does not take the note away: the evict's freed pages come after that
    /// scrub, and the evict's own scrub runs.
    #[test]
    fn a_gc_scrub_before_an_evicts_commit_leaves_its_scrub_owed() -> Result<()> {
        let (dir, store) = new_store()?;
        let (secret, bytes) = put_secret(&store, "/secret", 256, 0x9e37_79b9_7f4a_7c15)?;
        let evict = store.owe_scrub_before_erasure()?;
        // The gc finds the note and scrubs, before the evict commits.
        Backend::gc(&store)?;
        assert!(store.scrub_owed(), "the evict under way needs the note");
        RedbStore::evict(&store, secret.id(), Origin::Cli)?;
        store.erasure_committed(evict);
        assert!(store.scrub_owed());
        store.finish_erasure()?;
        assert_eq!(
            fragments(dir.path(), &bytes)?,
            0,
            "the secret left in free pages"
        );
        assert!(!store.scrub_owed());
        Ok(())
    }

    /// Chat `c` of `turns` turns (each version's document a delta on the last one's, or
    /// whole when the rules say so).
    fn chat(turns: usize) -> Result<Object> {
        let turns = (0..turns)
            .map(|n| crate::object::Turn {
                role: crate::object::Role::User,
                content: format!("turn {n} {}", "words ".repeat(20)),
                toolcall_refs: None,
            })
            .collect();
        Object::chat("c", turns)
    }

    /// Evicting a chat (a chained entity: its documents are deltas on its earlier ones, and
    /// before they go every other document based on one is rewritten whole) whose own document
    /// record is damaged (garbage, or gone with its index row), or beside another entity's
    /// damaged record, evicts it: its rows and documents go, the damaged one without being read
    /// (its contents stay for gc), and a damaged record of another entity stays as it was (it
    /// cannot be based on the chat's and be read anyway). The files read as before, and once
    /// the other damaged record is repaired by hand fsck finds the store clean.
    #[test]
    fn evict_of_a_chat_whose_document_is_damaged_evicts_it() -> Result<()> {
        // (which chat version's record is damaged, or None: file a's; the damage)
        let garbage = Some([9u8, 9, 9].as_slice());
        for (which, record) in [
            (Some(0), garbage),
            (Some(3), garbage),
            (Some(5), garbage),
            (Some(3), None),
            (None, garbage),
        ] {
            let (_dir, store) = new_store()?;
            let mut hashes = Vec::new();
            for k in 1..=6 {
                let version = chat(k)?;
                hashes.push(version.object_hash().0);
                store.transact(vec![Op::put(version)], Origin::Session)?;
            }
            // The files after the chat: their records come after the chat's first.
            let ([a, b, c], a_seq) = three_files(&store, false)?;
            let seq = match which {
                Some(n) => {
                    doc_row(&store, hashes[n])?
                        .ok_or_else(|| Error::invariant("the chat's document"))?
                        .0
                }
                None => a_seq,
            };
            let a_record = {
                let rtx = store.read()?;
                let data = rtx.open_table(DOC_DATA).db()?;
                data.get(a_seq).db()?.map(|v| v.value().to_vec())
            };
            damage_doc(&store, seq, record)?;
            let evicted = Backend::evict(&store, "chat:c", Origin::Cli);
            assert!(evicted.is_ok(), "{which:?} {record:?}: {evicted:?}");
            let gone = store.as_of("chat:c", None, None);
            assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
            for hash in &hashes {
                assert_eq!(doc_row(&store, *hash)?, None, "{which:?} {record:?}");
            }
            for file in [&b, &c] {
                let version = store.as_of(file.id(), None, None)?;
                assert_eq!(version.and_then(|v| v.object).as_ref(), Some(file));
            }
            if which.is_none() {
                // a's record as it was: the store is whole again.
                let bytes = a_record.ok_or_else(|| Error::invariant("a's record"))?;
                damage_doc(&store, a_seq, Some(&bytes))?;
                let version = store.as_of(a.id(), None, None)?;
                assert_eq!(version.and_then(|v| v.object), Some(a.clone()));
            }
            let report = Backend::gc(&store)?;
            assert!(report.damaged.is_empty(), "{report:?}");
            assert_eq!(store.fsck(), vec![], "{which:?} {record:?}");
        }
        Ok(())
    }

    /// A version row that does not decode cannot say which op wrote it: evicting its file is
    /// refused, naming the repair, and changes nothing.
    #[test]
    fn evict_of_a_file_whose_row_does_not_decode_is_refused() -> Result<()> {
        let (_dir, store) = new_store()?;
        let object = put_a(&store, "one\n")?;
        let wtx = store.begin_write()?;
        {
            let mut versions = wtx.open_table(VERSIONS).db()?;
            let keys: Vec<(u64, i64, u64)> = versions
                .iter()
                .db()?
                .map(|e| e.db().map(|(k, _)| k.value()))
                .collect::<Result<_>>()?;
            for key in keys {
                versions.insert(key, [0xffu8, 0xff, 0xff].as_slice()).db()?;
            }
        }
        wtx.commit().db()?;
        let before = store.stats()?;
        let refused = store.evict(object.id(), Origin::Cli);
        assert!(
            matches!(&refused, Err(Error::Corrupt { what })
                if what.contains("cannot be evicted") && what.contains("fsck --repair")),
            "{refused:?}"
        );
        let after = store.stats()?;
        assert_eq!(
            (before.versions, before.documents, before.transactions),
            (after.versions, after.documents, after.transactions)
        );
        Ok(())
    }
}
