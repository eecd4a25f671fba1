//! The sets as the agent changes them: activate (upgrading a stub), deactivate, pin, unpin.

use super::*;

impl Session {
    /// Activates `id`: promotes it from the index to the pool when needed, reads a stub (or a
    /// deleted file) from its source, and makes it the most recently activated.
    ///
    /// # Errors
    /// The original's texts: `Object not found`, `Cannot activate {type}: infrastructure objects
    /// cannot be activated`, `Object not in session`, `Source inaccessible - cannot upgrade stub`
    /// (then nothing changes: a stub in the pool stays there, shown `[unread]`; one only in the
    /// index stays out of the pool).
    pub fn activate(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.index().contains(id) {
            return Err(self.not_in_session(id)?);
        }
        // The source is read before any set changes: a failed activation leaves the session
        // exactly as it was (an object only in the index stays out of the pool).
        if let Some(Meta::File { source, state, .. }) = self.cache.get(id).cloned()
            && matches!(
                state,
                FileState::Stub | FileState::Deleted | FileState::Denied
            )
        {
            self.upgrade(&source).map_err(|e| {
                Error::invalid_input(format!(
                    "Source inaccessible - cannot upgrade stub {id} ({e})"
                ))
            })?;
        }
        self.sets.add_to_pool(id);
        self.sets.add_active(id);
        Ok(())
    }

    /// The error for an id outside the session index, in the original's words.
    pub(super) fn not_in_session(&self, id: &str) -> Result<Error> {
        if self.queued_object(id).is_none() && !self.store.entity_exists(id)? {
            return Ok(Error::not_found(format!("Object not found: {id}")));
        }
        let object_type = self.store.entity(id)?.object_type;
        if !object_type.is_content() {
            return Ok(Error::invalid_input(format!(
                "Cannot activate {object_type}: infrastructure objects cannot be activated"
            )));
        }
        Ok(Error::invalid_input(format!(
            "Object not in session: {id}; read or discover it first"
        )))
    }

    /// Deactivates `id`; it stays in the pool.
    ///
    /// # Errors
    /// `Object not active` when it is not active.
    pub fn deactivate(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.remove_active(id) {
            return Err(Error::invalid_input(format!("Object not active: {id}")));
        }
        Ok(())
    }

    /// Pins `id` (protects it from auto-collapse; does not activate it).
    ///
    /// # Errors
    /// `Object not in metadata pool` when it is not in the pool.
    pub fn pin(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.pool().contains(id) {
            return Err(Error::invalid_input(format!(
                "Object not in metadata pool: {id}"
            )));
        }
        self.sets.pin(id);
        Ok(())
    }

    /// Unpins `id`.
    ///
    /// # Errors
    /// `Object not pinned` when it is not pinned.
    pub fn unpin(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.unpin(id) {
            return Err(Error::invalid_input(format!("Object not pinned: {id}")));
        }
        Ok(())
    }
}
