//! The damage marker of a PostgreSQL store: the one row of `strata_damage`, written when fsck
//! finds problems (or a read meets damage) and removed by a clean fsck, as redb's
//! `store.damaged` file is. Every handle on every machine sees it: a commit reads it in the
//! statement that locks the head and is refused while it is there, pointing at the repair;
//! reads still answer what verifies.

use super::*;

impl PgStore {
    /// Why the store is marked damaged: this handle's own finding, else the marker row (read
    /// now); `None` when it is not, or the marker cannot be read.
    pub(super) fn damage(&self) -> Option<String> {
        if let Some(reason) = self.remembered_damage() {
            return Some(reason);
        }
        if self.layout < 2 {
            return None;
        }
        self.read_here(|t| {
            Ok(
                t.maybe_row("SELECT reason FROM strata_damage WHERE id = 1", &[])
                    .pg("reading the damage marker")?
                    .map(|row| row.get::<_, String>(0)),
            )
        })
        .ok()
        .flatten()
    }

    /// Records that a read met damage (`what`): the marker row (unless one is there) tells
    /// every handle; when it cannot be written (a standby), this handle remembers it.
    pub(super) fn note_damage(&self, what: &str) {
        let reason = format!("a read found damage: {what}");
        let written = self.mark(&reason, "", false);
        self.remember(written.is_err().then_some(reason));
    }

    /// Sets the damage state from what fsck found: the marker row written with `findings`, or
    /// removed. A read-only handle writes it when the server allows it (a primary does, as
    /// redb's read-only handle writes its marker file); when it cannot (a standby), the verdict
    /// stays with this handle.
    ///
    /// # Errors
    /// [`Error::Storage`] when a read-write handle cannot write the marker.
    pub(super) fn settle_damage(&self, findings: &[Finding]) -> Result<()> {
        let (reason, written) = if findings.is_empty() {
            (None, self.unmark())
        } else {
            let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
            let reason = format!("fsck found {} problems", findings.len());
            let written = self.mark(&reason, &lines.join("\n"), true);
            (Some(reason), written)
        };
        self.remember(reason.filter(|_| written.is_err()));
        if self.read_only { Ok(()) } else { written }
    }

    /// Whether an eviction may go through the damage mark, as redb's does
    /// (`writable_for_erasure`): `false` when the store is not marked (or fsck now finds it
    /// clean, which removes the mark), `true` when every finding is a damaged document (its
    /// record unreadable or missing) or a content such a document names: the eviction removes
    /// the document without reading it, and `strata fsck --repair` cannot restore one (the log
    /// holds object hashes, not documents), so refusing would keep a secret the user asks to
    /// erase.
    ///
    /// # Errors
    /// The refusal of a damaged store when any other finding is there; a read-only handle's.
    pub(super) fn erasable_damage(&self) -> Result<bool> {
        self.check_writable()?;
        let Some(reason) = self.damage() else {
            return Ok(false);
        };
        let findings = Backend::fsck(self)?;
        if findings.is_empty() {
            return Ok(false);
        }
        let erasable =
            |f: &Finding| (f.kind == "documents" && f.subject.len() == 64) || f.kind == "blobs";
        if findings.iter().all(erasable) {
            return Ok(true);
        }
        Err(crate::store::damage::refusal(&reason))
    }

    /// Damage this handle met that the marker row could not record.
    pub(super) fn remembered_damage(&self) -> Option<String> {
        self.damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// What this handle knows of damage that the marker row does not hold.
    fn remember(&self, reason: Option<String>) {
        *self
            .damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = reason;
    }

    /// Writes the marker row: replacing one that is there when `replace`, else only when there
    /// is none.
    ///
    /// # Errors
    /// When it cannot be written (a standby, a layout without the table, the database).
    fn mark(&self, reason: &str, details: &str, replace: bool) -> Result<()> {
        if self.layout < 2 {
            return Err(Error::invalid_input(
                "this layout has no damage marker; open the store read-write once to upgrade it",
            ));
        }
        let sql = if replace {
            "INSERT INTO strata_damage VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE SET reason = \
             EXCLUDED.reason, details = EXCLUDED.details"
        } else {
            "INSERT INTO strata_damage VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING"
        };
        let reason = format!("{reason} (found {})", Timestamp::now());
        self.write_marker(|t| t.run(sql, &[&reason, &details]))
    }

    /// Removes the marker row (the store verified).
    fn unmark(&self) -> Result<()> {
        if self.layout < 2 {
            return Ok(());
        }
        self.write_marker(|t| t.run("DELETE FROM strata_damage WHERE id = 1", &[]))
    }

    /// Runs `f` in a read-write transaction of its own (also on a read-only handle's session).
    fn write_marker(
        &self,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> std::result::Result<u64, postgres::Error>
        + Send,
    ) -> Result<()> {
        self.with_client(|client| {
            let mut t = client
                .build_transaction()
                .read_only(false)
                .start()
                .pg("beginning a write of the damage marker")?;
            f(&mut t).pg("writing the damage marker")?;
            t.commit().pg("committing the damage marker")
        })
    }
}
