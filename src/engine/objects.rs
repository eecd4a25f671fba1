//! Objects and their history: `ls`, `show`, `cat`, `history`, `diff`, and how a reference (a
//! path, an id, an id prefix) and an as-of point (valid time, transaction) are resolved.

use std::path::Path;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::Apply;
use super::{Engine, Error, Result};
use crate::object::{ContentOmitted, Object, ObjectType};
use crate::resolve::{absolute_path, machine_filesystem_id, quoted};
use crate::store::{HistoryQuery, Listing, Order, Store, Timestamp, TxId, Version, VersionInfo};

/// The shortest id prefix a reference may use.
pub const MIN_PREFIX: usize = 8;

/// Which version a reading request reads: at a valid time, as the store knew it at a transaction
/// or a transaction time. Every field defaults to "now" / "latest".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AsOf {
    /// The valid time to read at (RFC 3339); default now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_at: Option<String>,
    /// Read as the store knew it after this transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_tx: Option<u64>,
    /// Read as the store knew it at this time (RFC 3339); ignored when `as_of_tx` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_time: Option<String>,
}

/// Parses a time given as `flag` ([`Timestamp::parse_given`]: finer than a microsecond is
/// truncated), saying which flag held what on error.
fn parse_time(flag: &str, text: &str) -> Result<Timestamp> {
    Timestamp::parse_given(text).map_err(|e| {
        let reason = match e {
            Error::InvalidInput { reason } => reason,
            other => other.to_string(),
        };
        Error::invalid_input(format!("{flag} {text}: {reason}"))
    })
}

impl Engine {
    /// The valid time and transaction `as_of` asks for.
    pub(super) fn resolve_as_of(&self, as_of: &AsOf) -> Result<(Option<Timestamp>, Option<TxId>)> {
        let valid = as_of
            .valid_at
            .as_deref()
            .map(|t| parse_time("--valid-at", t))
            .transpose()?;
        let tx = match (as_of.as_of_tx, as_of.tx_time.as_deref()) {
            (Some(tx), _) => Some(self.check_tx("--as-of-tx", tx)?),
            (None, Some(time)) => {
                let at = parse_time("--tx-time", time)?;
                match self.store.tx_at_time(at)? {
                    Some(tx) => Some(tx),
                    None => {
                        return Err(Error::invalid_input(format!(
                            "--tx-time {time}: the store knew nothing yet at that time"
                        )));
                    }
                }
            }
            (None, None) => None,
        };
        Ok((valid, tx))
    }

    /// Resolves `reference`: a path (relative to `cwd`) known to the store or present on disk
    /// wins; then an exact entity id; then `id:PREFIX` or a hex prefix of at least
    /// [`MIN_PREFIX`] characters, which must be unambiguous.
    pub(super) fn resolve_ref(&self, cwd: Option<&str>, reference: &str) -> Result<String> {
        let store = &self.store;
        if let Some(prefix) = reference.strip_prefix("id:") {
            return by_id(store, prefix, reference);
        }
        if let Some(path) = host_path(reference, cwd) {
            if let Some(id) = store.entity_at_path(&machine_filesystem_id(), &path)? {
                return Ok(id);
            }
            if let Some(err) = self.unknown_path(reference, &path)? {
                return Err(err);
            }
        }
        if store.entity_exists(reference)? {
            return Ok(reference.to_string());
        }
        by_id(store, reference, reference)
    }

    /// Why `path` (named as `reference`), on disk but not in the store, is not there, with a
    /// command that works: a directory is listed, an unreadable file must be made readable, a
    /// file in an indexed tree is indexed; a path outside every indexed tree is only named.
    /// `None` when nothing is on disk there.
    fn unknown_path(&self, reference: &str, path: &str) -> Result<Option<Error>> {
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(None);
        };
        let quoted_ref = shell_word(reference);
        if meta.is_dir() {
            return Ok(Some(Error::invalid_input(format!(
                "{reference} is a directory; name a file in it (`strata ls {quoted_ref}` lists \
                 those the store has)"
            ))));
        }
        if !meta.is_file() {
            return Ok(Some(Error::invalid_input(format!(
                "{reference} is not a regular file, so the store does not hold it; strata \
                 indexes regular files only"
            ))));
        }
        if let Err(err) = std::fs::File::open(path) {
            return Ok(Some(Error::not_found(format!(
                "{reference} in the store: the file cannot be read ({err}), so indexing skips it; \
                 make it readable, then run `strata index {quoted_ref}`"
            ))));
        }
        // Inside an indexed tree when some directory above it (short of `/`) holds stored files.
        let filesystem = machine_filesystem_id();
        let mut inside = false;
        for dir in Path::new(path).ancestors().skip(1) {
            let Some(dir) = dir.to_str().filter(|d| *d != "/") else {
                continue;
            };
            if !self.store.paths_under(&filesystem, dir)?.is_empty() {
                inside = true;
                break;
            }
        }
        if !inside {
            return Ok(Some(Error::not_found(format!(
                "{reference} in the store: it is outside every tree the store has indexed \
                 (`strata ls` lists what it has)"
            ))));
        }
        Ok(Some(Error::not_found(format!(
            "{reference} in the store: it is new since the last index; run `strata index \
             {quoted_ref}` to add it"
        ))))
    }

    /// The version of `id` the as-of point selects; a tombstone or nothing is an error that
    /// says which.
    pub(super) fn visible(&self, id: &str, as_of: &AsOf) -> Result<(VersionInfo, Object)> {
        let (valid, tx) = self.resolve_as_of(as_of)?;
        match self.store.as_of(id, valid, tx)? {
            Some(Version {
                object: Some(object),
                info,
            }) => Ok((info, object)),
            Some(version) => Err(Error::not_found(format!(
                "{id} at that time: it was deleted from {} (tx {}); see `strata history {id}`",
                version.info.valid_from.to_rfc3339(),
                version.info.tx_id.0
            ))),
            None => Err(Error::not_found(format!(
                "{id} at that time: it did not exist yet; see `strata history {id}`"
            ))),
        }
    }
}

/// `text` as one word for a shell command line: as is when it is plain, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@=".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The canonical host path `reference` names, if it reads as a path.
fn host_path(reference: &str, cwd: Option<&str>) -> Option<String> {
    let absolute = match cwd {
        Some(cwd) => absolute_path(reference, cwd).ok()?,
        None if reference.starts_with('/') => absolute_path(reference, "/").ok()?,
        None => return None,
    };
    // An existing file is named by its real path (symlinks resolved), as scans record it.
    match std::fs::canonicalize(&absolute) {
        Ok(real) => real.to_str().map(str::to_string),
        Err(_) => Some(absolute),
    }
}

/// Resolves an exact id or an id prefix.
fn by_id(store: &Store, prefix: &str, reference: &str) -> Result<String> {
    if store.entity_exists(prefix)? {
        return Ok(prefix.to_string());
    }
    let is_hex = prefix.bytes().all(|b| b.is_ascii_hexdigit());
    if prefix.len() < MIN_PREFIX || !is_hex {
        return Err(Error::invalid_input(format!(
            "{reference:?} names no path in the store and no entity; give a path, a full id, or an \
             id prefix of at least {MIN_PREFIX} hex characters (see `strata ls`)"
        )));
    }
    let matches = store.ids_with_prefix(&prefix.to_ascii_lowercase(), 11)?;
    match matches.as_slice() {
        [] => Err(Error::not_found(format!(
            "an entity whose id starts with {prefix}; see `strata ls`"
        ))),
        [one] => Ok(one.clone()),
        many => {
            let shown: Vec<String> = many.iter().take(10).map(|id| format!("  {id}")).collect();
            Err(Error::invalid_input(format!(
                "id prefix {prefix} is ambiguous; it matches:\n{}{}\ngive more characters",
                shown.join("\n"),
                if many.len() > 10 { "\n  …" } else { "" }
            )))
        }
    }
}

/// The display name of an entity: its path for a file, else its id.
fn name_of(object: &Object) -> String {
    match object.source() {
        Some(source) => source.as_filesystem().path.clone(),
        None => object.id().to_string(),
    }
}

/// `ls`: the files the store knows under a path, as of a time.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsRequest {
    /// Only paths under this prefix (a host path; relative ones are taken from `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The caller's working directory, for a relative prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Include deleted files.
    #[serde(default)]
    pub all: bool,
    /// Which version to list.
    #[serde(default)]
    pub as_of: AsOf,
}

/// One file of `ls`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LsRow {
    /// The canonical path.
    pub path: String,
    /// The entity id.
    pub id: String,
    /// Byte size, as the content's stored record states it (`None` when unknown: stubs, denied
    /// files, deleted files).
    pub size: Option<u64>,
    /// How many versions the store knew then.
    pub versions: u64,
    /// Start of the version in valid time (RFC 3339).
    pub last_change: String,
    /// The transaction that wrote the version.
    pub tx_id: u64,
    /// `text`, `binary`, `too_large`, `denied`, `stub`, `deleted`, or `damaged` (its rows fail
    /// their checks, or its content's record is missing or its header unreadable: see
    /// `damage`; the content's bytes are not read, `fsck` checks them).
    pub state: String,
    /// What is damaged, for a `damaged` row (its other fields are then empty). A damaged row with
    /// an empty id is the listing itself: the store is marked damaged, so files may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

impl Apply for LsRequest {
    type Response = Vec<LsRow>;

    /// # Errors
    /// [`Error::InvalidInput`] for a bad as-of point; store errors.
    fn apply(self, engine: &Engine) -> Result<Vec<LsRow>> {
        let store = &engine.store;
        let (valid, tx) = engine.resolve_as_of(&self.as_of)?;
        let prefix = match &self.prefix {
            Some(prefix) => {
                let absolute = absolute_path(prefix, self.cwd.as_deref().unwrap_or("/"))?;
                std::fs::canonicalize(&absolute)
                    .ok()
                    .and_then(|p| p.to_str().map(str::to_string))
                    .unwrap_or(absolute)
            }
            None => "/".to_string(),
        };
        let mut rows = Vec::new();
        // Version rows and the content records' headers only: no object is rebuilt, no content
        // read. The store answers for a chunk of files at a time (one read each).
        let paths = store.paths_under(&machine_filesystem_id(), &prefix)?;
        for chunk in paths.chunks(LS_CHUNK) {
            let ids: Vec<&str> = chunk.iter().map(|(_, id)| id.as_str()).collect();
            let answers = store.listings(&ids, valid, tx, self.all)?;
            for ((path, id), answer) in chunk.iter().zip(answers) {
                // A file whose rows are damaged is listed as such; the others still are.
                match answer {
                    Ok(Some(listing)) => rows.push(ls_row(path.clone(), id.clone(), listing)),
                    Ok(None) => {}
                    Err(e @ Error::Corrupt { .. }) => rows.push(LsRow {
                        path: path.clone(),
                        id: id.clone(),
                        size: None,
                        versions: 0,
                        last_change: String::new(),
                        tx_id: 0,
                        state: "damaged".to_string(),
                        damage: Some(e.to_string()),
                    }),
                    Err(e) => return Err(e),
                }
            }
        }
        // On a store marked damaged, a file the damage took from the tables is not listed and
        // nothing above can tell: the listing says it may be incomplete.
        if let Some(reason) = store.damage() {
            rows.push(LsRow {
                path: prefix,
                id: String::new(),
                size: None,
                versions: 0,
                last_change: String::new(),
                tx_id: 0,
                state: "damaged".to_string(),
                damage: Some(format!(
                    "the store is marked damaged ({reason}), so this listing may miss files the \
                     damage lost; run `strata fsck` to see what is affected and `strata fsck \
                     --repair` to repair it"
                )),
            });
        }
        Ok(rows)
    }
}

/// How many files `ls` asks the store about at once: one read transaction each.
const LS_CHUNK: usize = 512;

/// The `ls` row of entity `id` at `path` from what the store listed of it.
fn ls_row(path: String, id: String, listing: Listing) -> LsRow {
    let Listing {
        info,
        versions,
        size,
    } = listing;
    let state = match info.content_omitted {
        _ if info.is_tombstone() => "deleted",
        Some(reason) => reason.as_str(),
        // A live version with no content and no reason is a stub (never read).
        None if size.is_none() => "stub",
        None => "text",
    };
    LsRow {
        state: state.to_string(),
        path,
        id,
        size,
        versions,
        last_change: info.valid_from.to_rfc3339(),
        tx_id: info.tx_id.0,
        damage: None,
    }
}

/// `show`: one object's envelope and version.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    /// A path, an entity id, or an id prefix of at least 8 hex characters (`id:PREFIX` forces
    /// ids).
    pub reference: String,
    /// The caller's working directory, for a relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Which version to show.
    #[serde(default)]
    pub as_of: AsOf,
}

/// What `show` answers: the envelope and what the version row adds to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShowResponse {
    /// The envelope with the seed's field names (`schema/objects/<type>.schema.json`).
    pub object: Value,
    /// The type's own fields (the metadata hash's input).
    pub fields: Value,
    /// Start of the version in valid time (RFC 3339).
    pub valid_from: String,
    /// End of the version in valid time, when a later one starts.
    pub valid_to: Option<String>,
    /// The transaction that wrote it.
    pub tx_id: u64,
    /// That transaction's time (RFC 3339).
    pub tx_time: String,
    /// Byte size of the file's content or kept bytes.
    pub size: Option<u64>,
    /// Why the content is null (`binary`, `too_large`, `denied`).
    pub content_omitted: Option<String>,
    /// Whether the object is a stub (known by path only, never read).
    pub stub: bool,
}

impl Apply for ShowRequest {
    type Response = ShowResponse;

    /// # Errors
    /// [`Error::NotFound`] when the reference names nothing or nothing is visible then.
    fn apply(self, engine: &Engine) -> Result<ShowResponse> {
        let id = engine.resolve_ref(self.cwd.as_deref(), &self.reference)?;
        let (info, object) = engine.visible(&id, &self.as_of)?;
        let size = engine
            .store
            .version_sizes(&id, std::slice::from_ref(&info))?
            .pop()
            .flatten();
        Ok(ShowResponse {
            fields: object.fields().to_json(),
            valid_from: info.valid_from.to_rfc3339(),
            valid_to: info.valid_to.map(Timestamp::to_rfc3339),
            tx_id: info.tx_id.0,
            tx_time: info.tx_time.to_rfc3339(),
            size,
            content_omitted: object.content_omitted().map(|r| r.as_str().to_string()),
            stub: object.is_stub(),
            object: object.to_json(),
        })
    }
}

/// `cat`: one object's content, raw.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatRequest {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// The caller's working directory, for a relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Which version to read.
    #[serde(default)]
    pub as_of: AsOf,
}

/// What `cat` answers: the content, as text when it is UTF-8, else base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CatResponse {
    /// The entity id.
    pub id: String,
    /// The bytes.
    #[serde(flatten)]
    pub body: Body,
}

/// Bytes on the wire: UTF-8 text as it is, anything else in base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Body {
    /// UTF-8 text.
    Text {
        /// The text.
        text: String,
    },
    /// Other bytes.
    Base64 {
        /// The bytes in standard base64.
        base64: String,
    },
}

impl Body {
    /// The body of `bytes`.
    pub fn of(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => Body::Text { text },
            Err(e) => Body::Base64 {
                base64: base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
            },
        }
    }

    /// The bytes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the base64 does not decode.
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Body::Text { text } => Ok(text.as_bytes().to_vec()),
            Body::Base64 { base64 } => base64::engine::general_purpose::STANDARD
                .decode(base64)
                .map_err(|e| Error::invalid_input(format!("base64 body: {e}"))),
        }
    }
}

impl Apply for CatRequest {
    type Response = CatResponse;

    /// # Errors
    /// [`Error::NotFound`] when the version has no stored content (too large, denied, a stub);
    /// [`Error::Corrupt`] when kept bytes are missing.
    fn apply(self, engine: &Engine) -> Result<CatResponse> {
        let id = engine.resolve_ref(self.cwd.as_deref(), &self.reference)?;
        let (info, object) = engine.visible(&id, &self.as_of)?;
        if let Some(content) = object.content() {
            return Ok(CatResponse {
                id,
                body: Body::Text {
                    text: content.to_string(),
                },
            });
        }
        let name = quoted(&name_of(&object)).into_owned();
        match (object.content_omitted(), object.file_hash()) {
            (Some(ContentOmitted::Binary), Some(hash)) => {
                let bytes = engine.store.content(hash)?.ok_or_else(|| {
                    Error::corrupt(format!(
                        "the bytes of {id} ({hash}) are missing; run `strata fsck`"
                    ))
                })?;
                Ok(CatResponse {
                    id,
                    body: Body::of(bytes),
                })
            }
            (Some(ContentOmitted::TooLarge), _) => Err(Error::not_found(format!(
                "content of {name}: at {} bytes it was over the content limit \
                 (max_content_bytes in settings.toml), so none is stored",
                info.size.map_or("?".into(), |s| s.to_string())
            ))),
            (Some(ContentOmitted::Denied), _) => Err(Error::not_found(format!(
                "content of {name}: a deny rule (secrets) keeps its bytes out of the store"
            ))),
            _ if object.is_stub() => Err(Error::not_found(format!(
                "content of {name}: it is a stub, known by path only, never read; run `strata \
                 index` on it"
            ))),
            _ => Err(Error::not_found(format!(
                "content of {name} ({}): it has none",
                object.object_type()
            ))),
        }
    }
}

/// `history`: one object's versions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// The caller's working directory, for a relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Include corrections (versions later superseded at the same valid time).
    #[serde(default)]
    pub corrections: bool,
    /// Order by transaction instead of valid time.
    #[serde(default)]
    pub by_tx: bool,
    /// As the store knew it then (`valid_at` does not apply: every valid time is listed).
    #[serde(default)]
    pub as_of: AsOf,
}

/// One version of `history`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryRow {
    /// The transaction that wrote it.
    pub tx_id: u64,
    /// That transaction's time (RFC 3339).
    pub tx_time: String,
    /// Start in valid time (RFC 3339).
    pub valid_from: String,
    /// End in valid time, when a later version starts.
    pub valid_to: Option<String>,
    /// The object hash; `None` for a tombstone.
    pub object_hash: Option<String>,
    /// Whether the entity does not exist in this version.
    pub deleted: bool,
    /// Byte size of the content or kept bytes.
    pub size: Option<u64>,
    /// Why the content is null.
    pub content_omitted: Option<String>,
}

/// What `history` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryResponse {
    /// The entity id.
    pub id: String,
    /// Its type.
    pub object_type: String,
    /// Its canonical path, for a file.
    pub path: Option<String>,
    /// The versions, in the order asked for.
    pub versions: Vec<HistoryRow>,
}

impl Apply for HistoryRequest {
    type Response = HistoryResponse;

    /// # Errors
    /// [`Error::InvalidInput`] when `valid_at` is given; [`Error::NotFound`] for a reference
    /// that names nothing.
    fn apply(self, engine: &Engine) -> Result<HistoryResponse> {
        if self.as_of.valid_at.is_some() {
            return Err(Error::invalid_input(
                "history lists the versions at every valid time, so --valid-at does not apply; \
                 use --as-of-tx or --tx-time to list them as the store knew them then",
            ));
        }
        let id = engine.resolve_ref(self.cwd.as_deref(), &self.reference)?;
        let (_, tx) = engine.resolve_as_of(&self.as_of)?;
        let query = HistoryQuery {
            order: if self.by_tx {
                Order::TxAsc
            } else {
                Order::ValidAsc
            },
            with_corrections: self.corrections,
            as_of_tx: tx,
            ..HistoryQuery::default()
        };
        let store = &engine.store;
        let versions = store.history(&id, query)?;
        let sizes = store.version_sizes(&id, &versions)?;
        let entity = store.entity(&id)?;
        Ok(HistoryResponse {
            object_type: entity.object_type.to_string(),
            path: entity.source.map(|s| s.as_filesystem().path.clone()),
            versions: versions
                .iter()
                .zip(sizes)
                .map(|(info, size)| HistoryRow {
                    tx_id: info.tx_id.0,
                    tx_time: info.tx_time.to_rfc3339(),
                    valid_from: info.valid_from.to_rfc3339(),
                    valid_to: info.valid_to.map(Timestamp::to_rfc3339),
                    object_hash: info.object_hash.map(|h| h.to_hex()),
                    deleted: info.is_tombstone(),
                    size,
                    content_omitted: info.content_omitted.map(|r| r.as_str().to_string()),
                })
                .collect(),
            id,
        })
    }
}

/// `diff`: a unified diff between two versions of an object.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// The caller's working directory, for a relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The older version, as a transaction id (default: the version before `to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// The newer version, as a transaction id (default: the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
}

/// What `diff` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffResponse {
    /// The entity id.
    pub id: String,
    /// The transaction of the older side (`None`: the entity did not exist before).
    pub from_tx: Option<u64>,
    /// The transaction the newer side is read at.
    pub to_tx: u64,
    /// The unified diff, with `---`/`+++` labels (`/dev/null` for a side where the entity does
    /// not exist).
    pub text: String,
}

/// Whether a version holds no text to diff line by line (binary or too large), as git's
/// "Binary files … differ" case.
fn is_opaque(version: Option<&Version>) -> bool {
    version
        .and_then(|v| v.object.as_ref())
        .and_then(Object::content_omitted)
        .is_some_and(|r| matches!(r, ContentOmitted::Binary | ContentOmitted::TooLarge))
}

/// The text of a version for diffing: its content, or a line saying why there is none.
fn diff_text(version: Option<&Version>) -> Result<String> {
    let Some(object) = version.and_then(|v| v.object.as_ref()) else {
        return Ok(String::new());
    };
    if let Some(content) = object.content() {
        return Ok(content.to_string());
    }
    Ok(match object.content_omitted() {
        Some(reason) => format!("[content not stored: {}]\n", reason.as_str()),
        None if object.object_type() == ObjectType::Session => {
            serde_json::to_string_pretty(&object.fields().to_json())
                .map_err(|e| Error::invalid_input(format!("session fields: {e}")))?
                + "\n"
        }
        None => "[unread]\n".to_string(),
    })
}

impl Apply for DiffRequest {
    type Response = DiffResponse;

    /// # Errors
    /// [`Error::InvalidInput`] for a transaction the store does not have.
    fn apply(self, engine: &Engine) -> Result<DiffResponse> {
        let store = &engine.store;
        let id = engine.resolve_ref(self.cwd.as_deref(), &self.reference)?;
        let latest = store.chain_head()?.map_or(0, |(tx, _)| tx.0);
        for tx in [self.from, self.to].into_iter().flatten() {
            if tx == 0 || tx > latest {
                return Err(Error::invalid_input(format!(
                    "transaction {tx} does not exist: the store has transactions 1 to {latest}"
                )));
            }
        }
        let to_tx = self.to.unwrap_or(latest);
        let from_tx = match self.from {
            Some(tx) => Some(tx),
            None => {
                // The version before the one visible at TO: the newest write strictly before it.
                let current = store.version_info(&id, None, Some(TxId(to_tx)))?;
                let current_tx = current.map_or(0, |v| v.tx_id.0);
                let query = HistoryQuery {
                    order: Order::TxAsc,
                    ..HistoryQuery::default()
                };
                store
                    .history(&id, query)?
                    .iter()
                    .map(|v| v.tx_id.0)
                    .filter(|tx| *tx < current_tx)
                    .max()
            }
        };
        let old = match from_tx {
            Some(tx) => store.as_of(&id, None, Some(TxId(tx)))?,
            None => None,
        };
        let new = store.as_of(&id, None, Some(TxId(to_tx)))?;
        let old_text = diff_text(old.as_ref())?;
        let new_text = diff_text(new.as_ref())?;
        let name = match store.entity(&id)?.source {
            Some(source) => quoted(&source.as_filesystem().path).into_owned(),
            None => id.clone(),
        };
        // A side where the entity does not exist (not yet, or deleted) is /dev/null, as in git:
        // a deleted file is not an empty one.
        let exists =
            |version: &Option<Version>| version.as_ref().is_some_and(|v| v.object.is_some());
        let old_label = match from_tx {
            Some(tx) if exists(&old) => format!("a{name} (tx {tx})"),
            _ => "/dev/null".into(),
        };
        // The newer side is labelled with the transaction that wrote the version read at TO.
        let new_label = match &new {
            Some(version) if version.object.is_some() => {
                format!("b{name} (tx {})", version.info.tx_id.0)
            }
            _ => "/dev/null".into(),
        };
        if is_opaque(old.as_ref()) || is_opaque(new.as_ref()) {
            let same = old
                .as_ref()
                .and_then(|v| v.object.as_ref().map(Object::object_hash))
                == new
                    .as_ref()
                    .and_then(|v| v.object.as_ref().map(Object::object_hash));
            let text = if same {
                String::new()
            } else {
                format!("Binary files {old_label} and {new_label} differ\n")
            };
            return Ok(DiffResponse {
                id,
                from_tx,
                to_tx,
                text,
            });
        }
        let mut text = similar::TextDiff::from_lines(&old_text, &new_text)
            .unified_diff()
            .context_radius(3)
            .header(&old_label, &new_label)
            .to_string();
        if text.is_empty() && exists(&old) != exists(&new) {
            // Created or deleted without a line of content (an empty file): say so all the same.
            text = format!("--- {old_label}\n+++ {new_label}\n");
        }
        Ok(DiffResponse {
            id,
            from_tx,
            to_tx,
            text,
        })
    }
}
