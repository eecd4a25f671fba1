//! The metadata cache: what a metadata line needs of each indexed object, without its content.

use serde::Serialize;

use crate::hash::Hash;
use crate::object::{ContentOmitted, Fields, FilesystemSource, Object, ToolStatus, file_type_of};
use crate::resolve::FilesystemResolver;
use crate::store::ObjectMeta;

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
    let state = match content_omitted {
        Some(ContentOmitted::Denied) => FileState::Denied,
        Some(ContentOmitted::Binary) => FileState::Binary,
        Some(ContentOmitted::TooLarge) => FileState::TooLarge,
        None if file_hash.is_none() => FileState::Stub,
        None => FileState::Read,
    };
    Meta::File {
        path: resolver.reverse_resolve(&source.filesystem_id, &source.path),
        source,
        file_type,
        char_count,
        file_hash,
        state,
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
