//! Backup (`strata backup DIR`): a copy of the store as one read transaction sees it, made
//! while writers go on (redb's readers see one committed state and never block a commit), then
//! verified by fsck. The copy is a store like any other: open it with `--store DIR`, or move it
//! into place to restore.

use super::*;

use redb::{TableDefinition, TableHandle};

use super::RedbStore;
use super::tables::*;
use crate::error::{Error, Result};
use crate::store::rescue::BackupReport;

/// Copies every row of `def` as `rtx` sees it into `wtx`; a table the store lacks (made before
/// it existed) is skipped.
fn copy_table<K, V>(
    rtx: &ReadTransaction,
    wtx: &WriteTransaction,
    def: TableDefinition<K, V>,
) -> Result<()>
where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    let from = match rtx.open_table(def) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(Error::storage(format!("opening {}", def.name()), e)),
    };
    let mut to = wtx.open_table(def).db()?;
    for entry in from.iter().db()? {
        let (k, v) = entry.db()?;
        to.insert(k.value(), v.value()).db()?;
    }
    Ok(())
}

impl RedbStore {
    /// Copies the store, as one read transaction sees it, into a new store in `dir` (with the
    /// settings file), and verifies the copy.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `dir` holds a store or is this store's directory; storage
    /// and I/O errors.
    pub fn backup(&self, dir: &Path) -> Result<BackupReport> {
        if let Some(own) = &self.dir
            && let (Ok(a), Ok(b)) = (std::fs::canonicalize(own), std::fs::canonicalize(dir))
            && a == b
        {
            return Err(Error::invalid_input(
                "a backup goes to a new directory, not over the store itself",
            ));
        }
        // The snapshot first: everything copied is what this transaction sees.
        let rtx = self.read()?;
        let copy = RedbStore::create(dir)?;
        let wtx = copy.begin_write()?;
        copy_table(&rtx, &wtx, META)?;
        copy_table(&rtx, &wtx, BLOB_DATA)?;
        copy_table(&rtx, &wtx, BLOB_INDEX)?;
        copy_table(&rtx, &wtx, DOC_DATA)?;
        copy_table(&rtx, &wtx, DOC_INDEX)?;
        copy_table(&rtx, &wtx, ENTITIES)?;
        copy_table(&rtx, &wtx, ENTITY_IDS)?;
        copy_table(&rtx, &wtx, VERSIONS)?;
        copy_table(&rtx, &wtx, VERSIONS_BY_TX)?;
        copy_table(&rtx, &wtx, MATCH_OPS)?;
        copy_table(&rtx, &wtx, TX_LOG)?;
        copy_table(&rtx, &wtx, TX_OPS)?;
        copy_table(&rtx, &wtx, EVICTED_OPS)?;
        copy_table(&rtx, &wtx, PATHS)?;
        copy_table(&rtx, &wtx, PATHS_BY_DIR)?;
        copy_table(&rtx, &wtx, STAT_BY_DIR)?;
        copy_table(&rtx, &wtx, DIRECTORIES)?;
        copy_table(&rtx, &wtx, DIRECTORY_PATHS)?;
        copy_table(&rtx, &wtx, FILESYSTEMS)?;
        copy_table(&rtx, &wtx, FILESYSTEM_IDS)?;
        if matches!(
            rtx.open_table(FILESYSTEMS),
            Err(redb::TableError::TableDoesNotExist(_))
        ) {
            // A format-4 file read as it is: its rows have long keys, which the copy (made with
            // the filesystem tables) must be told to keep, as the upgrade does.
            super::fsnum::register_long(&wtx)?;
        }
        // A store before format 9 read as it is: its whole-path stat cache rows are moved
        // into the copy's directory-keyed table, as its upgrade would.
        super::dirnum::copy_old_stat_rows(&rtx, &wtx)?;
        wtx.delete_table(STAT_CACHE).db()?;
        // And its whole-path `paths` rows (before format 10) into `paths_by_dir`.
        super::dirnum::move_paths_within(&wtx)?;
        {
            // The copy was made with this build's `meta` keys, and the store's copied over
            // them. A key the store lacks says something of its rows, which the copy keeps as
            // they are: evictions recorded only from some transaction on, a `versions_by_tx` row
            // for every write, whole entity rows, 4 032-byte blob chunks.
            let from = rtx.open_table(META).db()?;
            let mut to = wtx.open_table(META).db()?;
            for key in [
                EVICTIONS_SINCE,
                BY_TX_OMITTED_SINCE,
                SOURCES_IN_IDS_SINCE,
                FS_IN_HEADERS_SINCE,
                SHORT_ENTITY_KEYS_SINCE,
                DOC_SEQS_SINCE,
                BLOB_CHUNK_KEY,
            ] {
                if from.get(key).db()?.is_none() {
                    to.remove(key).db()?;
                }
            }
        }
        wtx.commit().db()?;
        drop(rtx);
        if let Some(own) = &self.dir {
            let settings = own.join("settings.toml");
            if settings.exists() {
                let text = std::fs::read(&settings)
                    .map_err(|e| Error::io(format!("reading {}", settings.display()), e))?;
                crate::store::private::write_file(&dir.join("settings.toml"), &text)?;
            }
        }
        let findings = copy.fsck();
        copy.settle_damage(&findings)?;
        let head = copy.chain_head()?;
        drop(copy);
        Ok(BackupReport {
            head,
            bytes: file_size(&dir.join(DB_FILE)).0,
            findings,
        })
    }
}
