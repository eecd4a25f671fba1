//! The metadata cache: what a metadata line needs of each indexed object, without its content.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::hash::Hash;
use crate::object::{ContentOmitted, Fields, FilesystemSource, Object, ToolStatus, file_type_of};
use crate::resolve::FilesystemResolver;
use crate::store::{FileView, ObjectMeta};

/// What a file in the session is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// Read: its content is known.
    Read,
    /// A stub: known by path only, shown `[unread]`.
    Stub,
    /// Denied by the deny rules: never read.
    Denied,
    /// Binary: no text content.
    Binary,
    /// Over the content limit.
    TooLarge,
    /// Deleted: its entity is a tombstone now, shown `[deleted]`.
    Deleted,
}

/// One entry of the metadata cache: what a metadata line needs, without the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meta {
    /// A file.
    File {
        /// Its source (filesystem id and canonical path).
        source: FilesystemSource,
        /// The path the agent sees (reverse-resolved through the session's mounts).
        path: String,
        /// `file_type`.
        file_type: String,
        /// `char_count` (0 for stubs and deleted files).
        char_count: u64,
        /// `file_hash` of the current version.
        file_hash: Option<Hash>,
        /// Read, stub, deleted…
        state: FileState,
    },
    /// A tool call.
    Toolcall {
        /// The tool's name.
        tool: String,
        /// ok or fail.
        status: ToolStatus,
    },
}

/// The metadata cache entry of a current object (`None` for infrastructure objects).
pub(super) fn meta_of(resolver: &FilesystemResolver, object: &Object) -> Option<Meta> {
    match object.fields() {
        Fields::File(f) => Some(file_meta(
            resolver,
            object.source()?.as_filesystem().clone(),
            f,
            object.file_hash().copied(),
            object.content_omitted(),
        )),
        Fields::Toolcall(f) => Some(Meta::Toolcall {
            tool: f.tool.clone(),
            status: f.status,
        }),
        _ => None,
    }
}

/// The metadata cache entry of a version read with [`Store::metadata_many`] (no content read),
/// taken by value: its strings move into the entry (a resume builds 10 000 of them).
pub(super) fn meta_of_stored(resolver: &FilesystemResolver, stored: ObjectMeta) -> Option<Meta> {
    let source = stored
        .source
        .map(|crate::object::Source::Filesystem(source)| source);
    let Some(doc) = stored.document else {
        return source.map(|s| deleted_meta(resolver, s));
    };
    match doc.fields {
        Fields::File(f) => Some(file_meta_owned(
            resolver,
            source?,
            f.file_type,
            f.char_count,
            doc.file_hash,
            stored.info.content_omitted,
        )),
        Fields::Toolcall(f) => Some(Meta::Toolcall {
            tool: f.tool,
            status: f.status,
        }),
        _ => None,
    }
}

/// The metadata cache entry of a live file version: its fields, its hash (`None` for a stub) and
/// why its content is null, if it is.
pub(super) fn file_meta(
    resolver: &FilesystemResolver,
    source: FilesystemSource,
    fields: &crate::object::FileFields,
    file_hash: Option<crate::hash::Hash>,
    content_omitted: Option<ContentOmitted>,
) -> Meta {
    file_meta_owned(
        resolver,
        source,
        fields.file_type.clone(),
        fields.char_count,
        file_hash,
        content_omitted,
    )
}

/// [`file_meta`] with the file type given by value.
fn file_meta_owned(
    resolver: &FilesystemResolver,
    source: FilesystemSource,
    file_type: String,
    char_count: u64,
    file_hash: Option<crate::hash::Hash>,
    content_omitted: Option<ContentOmitted>,
) -> Meta {
    let state = file_state(content_omitted, file_hash);
    Meta::File {
        path: resolver.reverse_resolve(&source.filesystem_id, &source.path),
        source,
        file_type,
        char_count,
        file_hash,
        state,
    }
}

/// The state of a live file version: why its content is null, if it is, else read or a stub.
fn file_state(content_omitted: Option<ContentOmitted>, file_hash: Option<Hash>) -> FileState {
    match content_omitted {
        Some(ContentOmitted::Denied) => FileState::Denied,
        Some(ContentOmitted::Binary) => FileState::Binary,
        Some(ContentOmitted::TooLarge) => FileState::TooLarge,
        None if file_hash.is_none() => FileState::Stub,
        None => FileState::Read,
    }
}

/// The metadata cache entry of a deleted file.
pub(super) fn deleted_meta(resolver: &FilesystemResolver, source: FilesystemSource) -> Meta {
    Meta::File {
        path: resolver.reverse_resolve(&source.filesystem_id, &source.path),
        file_type: file_type_of(&source.path),
        char_count: 0,
        file_hash: None,
        state: FileState::Deleted,
        source,
    }
}

/// The metadata cache of a session: its entries by id. Loaded through a snapshot it starts lean
/// (the files' texts in one buffer, in the order of the index, nothing converted per file) and
/// becomes a map at its first use other than a resume's walk of the files
/// ([`MetaCache::file_at`]); what either form answers is the same.
#[derive(Clone, Debug, Default)]
pub(super) struct MetaCache {
    /// The entries, when `lean` is `None`.
    map: FxHashMap<String, Meta>,
    /// The entries as loaded, until the first change.
    lean: Option<Box<Lean>>,
    /// The map of `lean`'s files, built at the first lookup while `lean` holds the entries.
    lazy: OnceLock<FxHashMap<String, Meta>>,
}

/// A text of [`Lean::text`]: its start and end.
type Span = (usize, usize);

/// Entries as loaded: each file's texts in one buffer, other entries whole.
#[derive(Clone, Debug)]
pub(super) struct Lean {
    text: String,
    files: Vec<LeanFile>,
    /// For each position of the ids loaded, its file in `files` ([`NO_FILE`] when none).
    at: Vec<u32>,
    /// Entries that are not files (tool calls), by id.
    others: FxHashMap<String, Meta>,
    /// Resolves the agent paths of the files when an entry is made of one.
    resolver: FilesystemResolver,
}

/// No file at this position of [`Lean::at`].
const NO_FILE: u32 = u32::MAX;

/// One file of [`Lean`], its texts in [`Lean::text`].
#[derive(Clone, Copy, Debug)]
pub(super) struct LeanFile {
    id: Span,
    filesystem_id: Span,
    path: Span,
    /// `None` for a tombstone (its type follows its path).
    file_type: Option<Span>,
    char_count: u64,
    file_hash: Option<Hash>,
    state: FileState,
}

impl Lean {
    /// An empty set of entries for `ids` ids loaded.
    pub(super) fn new(ids: usize, resolver: FilesystemResolver) -> Self {
        Lean {
            text: String::new(),
            files: Vec::with_capacity(ids),
            at: vec![NO_FILE; ids],
            others: FxHashMap::default(),
            resolver,
        }
    }

    fn push_text(&mut self, text: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(text);
        (start, self.text.len())
    }

    fn str(&self, (start, end): Span) -> &str {
        self.text.get(start..end).unwrap_or_default()
    }

    /// Keeps the file `view` as the entry of `id`, the id at position `n` of those loaded.
    pub(super) fn push_file(&mut self, n: usize, id: &str, view: &FileView<'_>) {
        let Ok(slot) = u32::try_from(self.files.len()) else {
            // Past 4 billion files: kept whole.
            if let Some(meta) = self.meta_of_view(view) {
                self.others.insert(id.to_string(), meta);
            }
            return;
        };
        if self.text.is_empty() {
            self.text
                .reserve(self.at.len() * (id.len() + view.path.len() + 8));
        }
        let id = self.push_text(id);
        // Files mostly share one filesystem id: kept once.
        let filesystem_id = match self.files.last() {
            Some(last) if self.str(last.filesystem_id) == view.filesystem_id => last.filesystem_id,
            _ => self.push_text(view.filesystem_id),
        };
        let path = self.push_text(view.path);
        let (file_type, char_count, file_hash, state) = match &view.document {
            Some(doc) => (
                Some(self.push_text(doc.file_type)),
                doc.char_count,
                doc.file_hash,
                file_state(view.content_omitted, doc.file_hash),
            ),
            None => (None, 0, None, FileState::Deleted),
        };
        self.files.push(LeanFile {
            id,
            filesystem_id,
            path,
            file_type,
            char_count,
            file_hash,
            state,
        });
        if let Some(at) = self.at.get_mut(n) {
            *at = slot;
        }
    }

    /// Keeps `meta` as the entry of `id` (not a file kept lean).
    pub(super) fn push_meta(&mut self, id: String, meta: Meta) {
        self.others.insert(id, meta);
    }

    /// The entry of a file view made whole (for the rare file not kept lean).
    fn meta_of_view(&self, view: &FileView<'_>) -> Option<Meta> {
        let source = FilesystemSource {
            filesystem_id: view.filesystem_id.to_string(),
            path: view.path.to_string(),
        };
        Some(match &view.document {
            Some(doc) => file_meta_owned(
                &self.resolver,
                source,
                doc.file_type.to_string(),
                doc.char_count,
                doc.file_hash,
                view.content_omitted,
            ),
            None => deleted_meta(&self.resolver, source),
        })
    }

    /// The entry of `file`, made whole.
    fn meta(&self, file: &LeanFile) -> Meta {
        let source = FilesystemSource {
            filesystem_id: self.str(file.filesystem_id).to_string(),
            path: self.str(file.path).to_string(),
        };
        Meta::File {
            path: self
                .resolver
                .reverse_resolve(&source.filesystem_id, &source.path),
            file_type: match file.file_type {
                Some(span) => self.str(span).to_string(),
                None => file_type_of(&source.path),
            },
            char_count: file.char_count,
            file_hash: file.file_hash,
            state: file.state,
            source,
        }
    }

    /// The files' entries as a map.
    fn files_map(&self) -> FxHashMap<String, Meta> {
        let mut map = FxHashMap::with_capacity_and_hasher(self.files.len(), Default::default());
        for file in &self.files {
            map.insert(self.str(file.id).to_string(), self.meta(file));
        }
        map
    }
}

/// A file entry as a resume's walk sees it: borrowed from either form of the cache.
#[derive(Clone, Copy, Debug)]
pub(super) enum FileRef<'a> {
    /// An entry of the map (a [`Meta::File`]).
    Whole(&'a Meta),
    /// A file kept lean.
    Lean(&'a Lean, &'a LeanFile),
}

impl<'a> FileRef<'a> {
    /// The source's filesystem id.
    pub(super) fn filesystem_id(self) -> &'a str {
        match self {
            FileRef::Whole(Meta::File { source, .. }) => &source.filesystem_id,
            FileRef::Whole(_) => "",
            FileRef::Lean(lean, file) => lean.str(file.filesystem_id),
        }
    }

    /// The source's canonical path.
    pub(super) fn path(self) -> &'a str {
        match self {
            FileRef::Whole(Meta::File { source, .. }) => &source.path,
            FileRef::Whole(_) => "",
            FileRef::Lean(lean, file) => lean.str(file.path),
        }
    }

    /// The file's state.
    pub(super) fn state(self) -> FileState {
        match self {
            FileRef::Whole(Meta::File { state, .. }) => *state,
            FileRef::Whole(_) => FileState::Deleted,
            FileRef::Lean(_, file) => file.state,
        }
    }

    /// `file_hash` of the current version.
    pub(super) fn file_hash(self) -> Option<Hash> {
        match self {
            FileRef::Whole(Meta::File { file_hash, .. }) => *file_hash,
            FileRef::Whole(_) => None,
            FileRef::Lean(_, file) => file.file_hash,
        }
    }

    /// The entry, made whole.
    pub(super) fn to_meta(self) -> Meta {
        match self {
            FileRef::Whole(meta) => meta.clone(),
            FileRef::Lean(lean, file) => lean.meta(file),
        }
    }
}

impl MetaCache {
    /// A cache of the entries of `map`.
    pub(super) fn of_map(map: FxHashMap<String, Meta>) -> Self {
        MetaCache {
            map,
            ..MetaCache::default()
        }
    }

    /// A cache of the entries loaded in `lean`.
    pub(super) fn of_lean(lean: Lean) -> Self {
        MetaCache {
            lean: Some(Box::new(lean)),
            ..MetaCache::default()
        }
    }

    /// The entry of `id`.
    pub(super) fn get(&self, id: &str) -> Option<&Meta> {
        match &self.lean {
            None => self.map.get(id),
            Some(lean) => lean
                .others
                .get(id)
                .or_else(|| self.lazy.get_or_init(|| lean.files_map()).get(id)),
        }
    }

    /// Whether `id` has an entry.
    pub(super) fn contains_key(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Sets the entry of `id`.
    pub(super) fn insert(&mut self, id: String, meta: Meta) {
        self.map_mut().insert(id, meta);
    }

    /// The entries as a map to change (a lean cache becomes one).
    fn map_mut(&mut self) -> &mut FxHashMap<String, Meta> {
        if let Some(lean) = self.lean.take() {
            let mut map = self.lazy.take().unwrap_or_else(|| lean.files_map());
            map.extend(lean.others);
            self.map = map;
        }
        &mut self.map
    }

    /// The file entry of `id`, the id at position `n` of the index as loaded: taken from the
    /// lean form without making it whole when it still holds that id there (a resume's walk).
    pub(super) fn file_at(&self, n: usize, id: &str) -> Option<FileRef<'_>> {
        if let Some(lean) = &self.lean
            && let Some(&slot) = lean.at.get(n)
            && slot != NO_FILE
            && let Some(file) = usize::try_from(slot).ok().and_then(|k| lean.files.get(k))
            && lean.str(file.id) == id
        {
            return Some(FileRef::Lean(lean, file));
        }
        match self.get(id)? {
            meta @ Meta::File { .. } => Some(FileRef::Whole(meta)),
            Meta::Toolcall { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::MountMapping;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    /// Files of every state, viewed as a snapshot hands them over.
    fn views() -> Vec<(String, FileView<'static>)> {
        let doc = |file_hash: Option<Hash>| {
            Some(crate::store::FileViewDoc {
                file_type: "text",
                char_count: 12,
                file_hash,
            })
        };
        let view = |n: usize, content_omitted, document| {
            let path: &'static str = Box::leak(format!("/work/tree/f{n}.rs").into_boxed_str());
            (
                format!("file:{n}"),
                FileView {
                    entity: "",
                    filesystem_id: if n == 3 { "other" } else { "fs" },
                    path,
                    spelling: None,
                    content_omitted,
                    document,
                },
            )
        };
        vec![
            view(0, None, doc(Some(Hash([1; 32])))),
            view(1, None, doc(None)),
            view(2, Some(ContentOmitted::Denied), doc(None)),
            view(3, Some(ContentOmitted::Binary), doc(Some(Hash([2; 32])))),
            view(4, Some(ContentOmitted::TooLarge), doc(Some(Hash([3; 32])))),
            view(5, None, None),
        ]
    }

    /// A lean cache answers as the map of the same entries, before and after it becomes one,
    /// and a resume's walk sees the same files through either form.
    #[test]
    fn a_lean_cache_answers_as_its_map() -> TestResult {
        let resolver =
            FilesystemResolver::new(vec![MountMapping::new("/repo", "/work/tree")], "fs")?;
        let views = views();
        let call = Meta::Toolcall {
            tool: "grep".into(),
            status: ToolStatus::Ok,
        };
        let mut lean = Lean::new(views.len() + 1, resolver.clone());
        let mut map = FxHashMap::default();
        for (n, (id, view)) in views.iter().enumerate() {
            lean.push_file(n, id, view);
            let whole = lean.meta_of_view(view).ok_or("no entry")?;
            map.insert(id.clone(), whole);
        }
        lean.push_meta("toolcall:a".into(), call.clone());
        map.insert("toolcall:a".into(), call.clone());
        let ids: Vec<String> = views
            .iter()
            .map(|(id, _)| id.clone())
            .chain(["toolcall:a".to_string()])
            .collect();
        let lean = MetaCache::of_lean(lean);
        let whole = MetaCache::of_map(map.clone());
        assert!(matches!(
            whole.get("file:1"),
            Some(Meta::File {
                state: FileState::Stub,
                ..
            })
        ));
        assert!(matches!(
            whole.get("file:5"),
            Some(Meta::File {
                state: FileState::Deleted,
                ..
            })
        ));
        for (n, id) in ids.iter().enumerate() {
            let (a, b) = (lean.file_at(n, id), whole.file_at(n, id));
            assert_eq!(a.map(FileRef::to_meta), b.map(FileRef::to_meta), "{id}");
            assert_eq!(a.map(FileRef::path), b.map(FileRef::path));
            assert_eq!(a.map(FileRef::filesystem_id), b.map(FileRef::filesystem_id));
            assert_eq!(a.map(FileRef::state), b.map(FileRef::state));
            assert_eq!(a.map(FileRef::file_hash), b.map(FileRef::file_hash));
            // At another position, or once the index moved on, the id is looked up.
            assert_eq!(
                lean.file_at(n + 1, id).map(FileRef::to_meta),
                b.map(FileRef::to_meta)
            );
        }
        for id in ids.iter().map(String::as_str).chain(["file:9"]) {
            assert_eq!(lean.get(id), whole.get(id), "{id}");
            assert_eq!(lean.contains_key(id), whole.contains_key(id));
        }
        // A change makes it a map holding every entry, the tool call's too.
        let mut changed = lean.clone();
        changed.insert("file:9".into(), call.clone());
        map.insert("file:9".into(), call);
        assert_eq!(changed.map, map);
        assert!(changed.lean.is_none());
        Ok(())
    }
}
