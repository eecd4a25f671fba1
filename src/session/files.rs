//! The session's files on disk: resolving agent paths, reading them through the index's one
//! disk path, discovery, stub activation's read, and the watcher's hook.

use super::*;

impl Session {
    /// Looks at the file of `source` at `real` (its real path on this machine) through the one
    /// disk path: the gone rule, the deny rules, the read and hash. Returns what was seen and
    /// its stat cache change.
    pub(super) fn look_at(
        &self,
        source: &FilesystemSource,
        real: &std::path::Path,
    ) -> (Look, StatChange) {
        let start = Timestamp::now();
        let presence = match real.to_str() {
            Some(path) => presence(&mut DirStat::new(true), path),
            None => Presence::Unknown(std::io::Error::other("the path is not UTF-8")),
        };
        let look = look(&source.path, real, presence, self.indexer.look_rules(None));
        let change = StatChange::of(&look, start);
        (look, change)
    }

    /// Plans what [`Session::look_at`] saw and queues its stat cache change for the next commit.
    pub(super) fn plan_look(
        &mut self,
        source: FilesystemSource,
        look: Look,
        change: StatChange,
    ) -> Result<Planned> {
        let on_machine = source.filesystem_id == self.resolver.machine_id();
        let path = source.path.clone();
        let planned = self.indexer.plan_look(source, look)?;
        if on_machine {
            record(&mut self.stat, &path, change);
        }
        Ok(planned)
    }

    /// Plans a full index of `source` from the file at `real` on this machine: a file the agent
    /// names must be there and be a regular file.
    ///
    /// # Errors
    /// [`Error::Io`] when it is missing or cannot be read; [`Error::InvalidPath`] when it is not
    /// a regular file.
    pub(super) fn index_from_disk(
        &mut self,
        source: FilesystemSource,
        real: &std::path::Path,
    ) -> Result<Planned> {
        self.index_from_disk_keeping(source, real)
            .map(|(planned, _)| planned)
    }

    /// [`Session::index_from_disk`], also returning the file's object as read (`None` when a
    /// deny rule kept it unread).
    pub(super) fn index_from_disk_keeping(
        &mut self,
        source: FilesystemSource,
        real: &std::path::Path,
    ) -> Result<(Planned, Option<Object>)> {
        let (look, change) = self.look_at(&source, real);
        self.index_look(source, real, look, change)
    }

    /// Plans what a look at `real` saw (the file's object when it was read) and queues its stat
    /// cache change for the next commit.
    fn index_look(
        &mut self,
        source: FilesystemSource,
        real: &std::path::Path,
        look: Look,
        change: StatChange,
    ) -> Result<(Planned, Option<Object>)> {
        let shown = real.display().to_string();
        match look {
            Look::Gone(Presence::Missing(err)) => Err(Error::io(format!("opening {shown}"), err)),
            Look::Gone(_) => Err(Error::invalid_path(
                shown,
                "it is not a regular file; read files, discover directories' files one by one",
            )),
            Look::Unreadable(err) => Err(Error::io(format!("reading {shown}"), err)),
            Look::Read { reading, stat, .. } => {
                let prepared = crate::index::Prepared::new(source.clone(), reading)?;
                let object = prepared.object.clone();
                let planned = self.index_prepared(&source, prepared, &stat, change)?;
                Ok((planned, Some(object)))
            }
            look => Ok((self.plan_look(source, look, change)?, None)),
        }
    }

    /// Plans a file of `source` read under `stat` (its mtime the version's valid time) and
    /// prepared, and queues its stat cache change for the next commit.
    pub(super) fn index_prepared(
        &mut self,
        source: &FilesystemSource,
        prepared: crate::index::Prepared,
        stat: &crate::store::FileStat,
        change: StatChange,
    ) -> Result<Planned> {
        let mtime = Timestamp::saturating_from_micros(stat.mtime_ns / 1000);
        let planned = self.indexer.plan_prepared(prepared, Some(mtime))?;
        if source.filesystem_id == self.resolver.machine_id() {
            record(&mut self.stat, &source.path, change);
        }
        Ok(planned)
    }

    /// Remembers the on-disk spelling of a file whose identity path differs from the path it
    /// was opened by (a case-insensitive mount), on its put too, so that resume opens it by it.
    pub(super) fn record_spelling(
        &mut self,
        planned: &mut Planned,
        resolved: &crate::resolve::ResolvedPath,
    ) {
        if resolved.open_path == resolved.canonical_path {
            self.spellings.remove(&planned.id);
            return;
        }
        if let Some(Op::Put(put)) = planned.ops.first_mut() {
            put.spelling = Some(resolved.open_path.clone());
        }
        self.spellings
            .insert(planned.id.clone(), resolved.open_path.clone());
    }

    /// Carries a recorded spelling `open` over to the new version `planned` puts.
    pub(super) fn keep_spelling(planned: &mut Planned, open: &str, canonical: &str) {
        if open != canonical
            && let Some(Op::Put(put)) = planned.ops.first_mut()
        {
            put.spelling = Some(open.to_string());
        }
    }

    /// The path to open file `id` (identity path `canonical`) by: its recorded on-disk
    /// spelling, or the identity path itself.
    pub(super) fn open_path<'a>(&'a self, id: &str, canonical: &'a str) -> &'a str {
        self.spellings.get(id).map_or(canonical, String::as_str)
    }

    /// The real path to read file `id` from on this machine, checked as [`Session::read`] checks
    /// an agent's path: symlinks are followed, but not out of the file's mount (a file replaced
    /// by a link to a secret outside the mount must not be read into the session by a resume,
    /// a stub activation or the watcher).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when a link leads out of the mount or the path does not resolve.
    pub(super) fn checked_open_path(
        &self,
        id: &str,
        source: &FilesystemSource,
    ) -> Result<std::path::PathBuf> {
        let agent = self
            .resolver
            .reverse_resolve(&source.filesystem_id, &source.path);
        let mut resolved = self.resolver.resolve(&agent)?;
        resolved.open_path = self.open_path(id, &source.path).to_string();
        self.resolver.check_symlinks(&resolved)
    }

    pub(super) fn source_of(
        &self,
        agent_path: &str,
    ) -> Result<(FilesystemSource, crate::resolve::ResolvedPath)> {
        let resolved = self.resolver.resolve(agent_path)?;
        Ok((
            FilesystemSource {
                filesystem_id: resolved.filesystem_id.clone(),
                path: resolved.canonical_path.clone(),
            },
            resolved,
        ))
    }

    /// The agent reads a file: it is indexed (created, updated or unchanged) and joins the index,
    /// the pool and the active set (as the most recently activated).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve, lies on a filesystem strata cannot
    /// read (use [`Session::read_supplied`]), or leaves its mount; [`Error::Io`] when the file
    /// cannot be read.
    pub fn read(&mut self, agent_path: &str) -> Result<Touched> {
        self.writable()?;
        let (source, resolved) = self.source_of(agent_path)?;
        let real = self.resolver.check_symlinks(&resolved)?;
        let mut planned = self.index_from_disk(source.clone(), &real)?;
        self.record_spelling(&mut planned, &resolved);
        self.after_read(planned, &source)
    }

    /// [`Session::read`], also returning the file's object as read: its content (null for a
    /// binary file or one over the content limit) and `file_hash`, the SHA-256 of its bytes.
    /// `None` when a deny rule kept it unread (it joins the session as a denied stub).
    ///
    /// # Errors
    /// As [`Session::read`].
    pub fn read_object(&mut self, agent_path: &str) -> Result<(Touched, Option<Object>)> {
        self.writable()?;
        let (source, resolved) = self.source_of(agent_path)?;
        let real = self.resolver.check_symlinks(&resolved)?;
        let (mut planned, object) = self.index_from_disk_keeping(source.clone(), &real)?;
        self.record_spelling(&mut planned, &resolved);
        Ok((self.after_read(planned, &source)?, object))
    }

    /// The agent reads a file whose bytes the runtime supplies (a path on the runtime's own
    /// filesystem, which strata cannot open): as [`Session::read`], undated by any mtime.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve.
    pub fn read_supplied(&mut self, agent_path: &str, bytes: &[u8]) -> Result<Touched> {
        self.writable()?;
        let (source, _) = self.source_of(agent_path)?;
        let reading = read_stream(bytes, self.indexer.max_content_bytes())
            .map_err(|e| Error::io(format!("reading the bytes given for {agent_path}"), e))?;
        let planned = self.indexer.plan_reading(source.clone(), reading, None)?;
        self.after_read(planned, &source)
    }

    pub(super) fn after_read(
        &mut self,
        planned: Planned,
        source: &FilesystemSource,
    ) -> Result<Touched> {
        self.apply_planned(&planned, source);
        self.ensure_cached(&planned.id)?;
        self.sets.add_active(&planned.id);
        Ok(Touched {
            path: self
                .resolver
                .reverse_resolve(&source.filesystem_id, &source.path),
            id: planned.id,
            action: planned.action,
        })
    }

    /// Files seen by `ls`, `grep` or `find` output: each becomes a stub unless it exists, and
    /// joins the index and the pool (not the active set).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve (nothing changes then).
    pub fn discover(&mut self, agent_paths: &[&str]) -> Result<Vec<Touched>> {
        self.writable()?;
        let sources = agent_paths
            .iter()
            .map(|p| self.source_of(p))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(sources.len());
        for (source, resolved) in sources {
            let path = self
                .resolver
                .reverse_resolve(&source.filesystem_id, &source.path);
            let mut planned = self.indexer.discover_file(source.clone())?;
            self.record_spelling(&mut planned, &resolved);
            let action = if self.pending_at.contains_key(&planned.id) {
                Action::Unchanged
            } else {
                self.apply_planned(&planned, &source);
                self.ensure_cached(&planned.id)?;
                planned.action
            };
            self.sets.add_to_pool(&planned.id);
            out.push(Touched {
                id: planned.id,
                path,
                action,
            });
        }
        Ok(out)
    }

    /// Reads a stub's source from disk; an error when it cannot be read or stays a stub, and then
    /// nothing is queued (not even the stat cache entry of the read).
    pub(super) fn upgrade(&mut self, source: &FilesystemSource) -> Result<()> {
        let (puts, removes) = (self.stat.puts.len(), self.stat.removes.len());
        let result = self.try_upgrade(source);
        if result.is_err() {
            self.stat.puts.truncate(puts);
            self.stat.removes.truncate(removes);
        }
        result
    }

    pub(super) fn try_upgrade(&mut self, source: &FilesystemSource) -> Result<()> {
        if source.filesystem_id != self.resolver.machine_id() {
            return Err(Error::invalid_path(
                source.path.as_str(),
                "it lies on a filesystem strata cannot read; the runtime must supply its bytes",
            ));
        }
        let id =
            crate::object::sourced_identity(ObjectType::File, &Source::Filesystem(source.clone()))?
                .to_hex();
        let open = self.open_path(&id, &source.path).to_string();
        let real = self.checked_open_path(&id, source)?;
        let mut planned = self.index_from_disk(source.clone(), &real)?;
        Self::keep_spelling(&mut planned, &open, &source.path);
        if let Some(Op::Put(put)) = planned.ops.first()
            && put.object.is_stub()
        {
            return Err(Error::PermissionDenied {
                reason: format!("{} is denied by the deny rules", source.path),
            });
        }
        if planned.ops.is_empty()
            && matches!(
                self.cache.get(&planned.id),
                Some(Meta::File {
                    state: FileState::Denied | FileState::Stub,
                    ..
                })
            )
        {
            return Err(Error::PermissionDenied {
                reason: format!("{} is denied by the deny rules", source.path),
            });
        }
        self.apply_planned(&planned, source);
        Ok(())
    }

    /// The watcher's hook for a change of the file at `canonical_path` on this machine: re-index
    /// it (or record its deletion) and refresh the metadata cache; the sets never change. Files
    /// outside the session index are ignored (`None`).
    ///
    /// # Errors
    /// [`Error::Io`] when the file exists but cannot be read; [`Error::InvalidPath`] when a
    /// symlink now leads out of its mount.
    pub fn file_changed(&mut self, canonical_path: &str) -> Result<Option<Action>> {
        self.writable()?;
        let source = FilesystemSource {
            filesystem_id: self.resolver.machine_id().to_string(),
            path: canonical_path.to_string(),
        };
        let id =
            crate::object::sourced_identity(ObjectType::File, &Source::Filesystem(source.clone()))?
                .to_hex();
        if !self.sets.index().contains(&id) {
            return Ok(None);
        }
        // Gone by the one disk path's rule (a file that became a directory is gone too);
        // otherwise read as `read` would, not following a link out of the file's mount.
        let gone = presence(&mut DirStat::new(true), canonical_path);
        let planned = if gone.is_gone() {
            let look = Look::Gone(gone);
            let change = StatChange::of(&look, Timestamp::now());
            self.plan_look(source.clone(), look, change)?
        } else {
            let real = self.checked_open_path(&id, &source)?;
            let (look, change) = self.look_at(&source, &real);
            if let Look::Unreadable(err) = look {
                return Err(Error::io(format!("reading {}", real.display()), err));
            }
            self.plan_look(source.clone(), look, change)?
        };
        self.apply_planned(&planned, &source);
        Ok(Some(planned.action))
    }

    /// The watcher's cache-only hook, after it committed a change of the file at
    /// `canonical_path` on this machine: the metadata cache takes the store's current version
    /// (or `[deleted]`); the sets and the queue never change. Returns whether the session
    /// holds the file.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the stored version does not decode.
    pub fn file_committed(&mut self, canonical_path: &str) -> Result<bool> {
        let source = FilesystemSource {
            filesystem_id: self.resolver.machine_id().to_string(),
            path: canonical_path.to_string(),
        };
        let id =
            crate::object::sourced_identity(ObjectType::File, &Source::Filesystem(source.clone()))?
                .to_hex();
        if !self.sets.index().contains(&id) || self.view.is_some() {
            return Ok(false);
        }
        let meta = match self.store.metadata(&id, None)? {
            Some(stored) => meta_of_stored(&self.resolver, stored),
            None => Some(deleted_meta(&self.resolver, source)),
        };
        if let Some(meta) = meta {
            self.cache.insert(id, meta);
        }
        Ok(true)
    }

    /// The canonical paths on this machine the watcher should watch: the session's files.
    pub fn watched_paths(&self) -> Vec<String> {
        self.sets
            .index()
            .ids()
            .iter()
            .filter_map(|id| match self.cache.get(id) {
                Some(Meta::File { source, .. })
                    if source.filesystem_id == self.resolver.machine_id() =>
                {
                    Some(source.path.clone())
                }
                _ => None,
            })
            .collect()
    }
}
