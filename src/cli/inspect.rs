//! The reading commands: `ls`, `show`, `cat`, `history`, `diff`.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;
use strata::object::{ContentOmitted, Object, ObjectType};
use strata::resolve::{absolute_path, machine_filesystem_id};
use strata::store::{HistoryQuery, Order, Store, Version, VersionInfo};

use super::args::{CatArgs, DiffArgs, HistoryArgs, LsArgs, ShowArgs};
use super::refs::resolve_ref;
use super::{Ctx, as_of, output};

/// The byte size of a version's file: its content, its kept bytes, or the size recorded.
fn size_of(store: &Store, version: &Version) -> Result<Option<u64>> {
    if let Some(size) = version.info.size {
        return Ok(Some(size));
    }
    let Some(object) = &version.object else {
        return Ok(None);
    };
    if let Some(content) = object.content() {
        return Ok(Some(content.len() as u64));
    }
    if object.content_omitted() == Some(ContentOmitted::Binary)
        && let Some(hash) = object.file_hash()
    {
        return Ok(store.content(hash)?.map(|bytes| bytes.len() as u64));
    }
    Ok(None)
}

/// The display name of an entity: its path for a file, else its id.
fn name_of(object: &Object) -> String {
    match object.source() {
        Some(source) => source.as_filesystem().path.clone(),
        None => object.id().to_string(),
    }
}

/// Reads the version of `id` the flags ask for; a tombstone or nothing is an error that says so.
fn visible(store: &Store, id: &str, args: &super::args::AsOfArgs) -> Result<(Version, Object)> {
    let (valid, tx) = as_of(store, args)?;
    match store.as_of(id, valid, tx)? {
        Some(Version {
            object: Some(object),
            info,
        }) => Ok((
            Version {
                object: Some(object.clone()),
                info,
            },
            object,
        )),
        Some(version) => bail!(
            "{id} does not exist at that time: deleted from {} (tx {}); see `strata history {id}`",
            version.info.valid_from.to_rfc3339(),
            version.info.tx_id.0
        ),
        None => bail!("{id} did not exist yet at that time; see `strata history {id}`"),
    }
}

pub(super) fn ls(store: &Store, ctx: &mut Ctx<'_>, args: LsArgs) -> Result<ExitCode> {
    let (valid, tx) = as_of(store, &args.as_of)?;
    let filesystem_id = machine_filesystem_id();
    let prefix = match &args.prefix {
        Some(prefix) => {
            let absolute = absolute_path(prefix, &ctx.cwd)?;
            std::fs::canonicalize(&absolute)
                .ok()
                .and_then(|p| p.to_str().map(str::to_string))
                .unwrap_or(absolute)
        }
        None => "/".to_string(),
    };
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for (path, id) in store.paths_under(&filesystem_id, &prefix)? {
        let Some(version) = store.as_of(&id, valid, tx)? else {
            continue;
        };
        let deleted = version.object.is_none();
        if deleted && !args.all {
            continue;
        }
        let versions = store
            .history(
                &id,
                HistoryQuery {
                    as_of_tx: tx,
                    ..HistoryQuery::default()
                },
            )?
            .len();
        let size = size_of(store, &version)?;
        let state = match &version.object {
            None => "deleted",
            Some(o) => match o.content_omitted() {
                Some(reason) => reason.as_str(),
                None if o.is_stub() => "stub",
                None => "",
            },
        };
        json_rows.push(json!({
            "path": path,
            "id": id,
            "size": size,
            "versions": versions,
            "last_change": version.info.valid_from.to_rfc3339(),
            "tx_id": version.info.tx_id.0,
            "state": if state.is_empty() { "text" } else { state },
        }));
        rows.push(vec![
            output::path(&path),
            size.map_or("-".into(), output::bytes),
            versions.to_string(),
            version.info.valid_from.to_rfc3339(),
            state.to_string(),
        ]);
    }
    if args.json.json {
        writeln!(ctx.out, "{}", serde_json::to_string_pretty(&json_rows)?)?;
    } else {
        output::table(
            ctx.out,
            &["PATH", "SIZE", "VERSIONS", "LAST CHANGE", ""],
            &rows,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn show(store: &Store, ctx: &mut Ctx<'_>, args: ShowArgs) -> Result<ExitCode> {
    let id = resolve_ref(store, &ctx.cwd, &args.reference)?;
    let (version, object) = visible(store, &id, &args.as_of)?;
    if args.json.json {
        writeln!(
            ctx.out,
            "{}",
            serde_json::to_string_pretty(&object.to_json())?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let hash = |h: Option<&strata::Hash>| h.map_or("null".to_string(), |h| h.to_hex());
    let mut rows: Vec<Vec<String>> = vec![
        vec!["xt/id".into(), object.id().to_string()],
        vec!["type".into(), object.object_type().to_string()],
    ];
    if let Some(source) = object.source() {
        let fs = source.as_filesystem();
        rows.push(vec!["path".into(), output::path(&fs.path)]);
        rows.push(vec!["filesystem".into(), fs.filesystem_id.clone()]);
    }
    rows.push(vec![
        "valid from".into(),
        version.info.valid_from.to_rfc3339(),
    ]);
    if let Some(to) = version.info.valid_to {
        rows.push(vec!["valid to".into(), to.to_rfc3339()]);
    }
    rows.push(vec![
        "written".into(),
        format!(
            "tx {} at {}",
            version.info.tx_id.0,
            version.info.tx_time.to_rfc3339()
        ),
    ]);
    rows.push(vec![
        "identity_hash".into(),
        object.identity_hash().to_hex(),
    ]);
    rows.push(vec!["file_hash".into(), hash(object.file_hash())]);
    rows.push(vec!["content_hash".into(), hash(object.content_hash())]);
    rows.push(vec![
        "metadata_hash".into(),
        object.metadata_hash().to_hex(),
    ]);
    rows.push(vec!["object_hash".into(), object.object_hash().to_hex()]);
    if let serde_json::Value::Object(fields) = object.fields().to_json() {
        for (key, value) in fields {
            let text = match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            rows.push(vec![key, text]);
        }
    }
    if let Some(size) = size_of(store, &version)? {
        rows.push(vec!["size".into(), output::bytes(size)]);
    }
    // A denied file has no file hash either, so it looks like a stub: the reason comes first.
    if let Some(reason) = object.content_omitted() {
        rows.push(vec![
            "content".into(),
            format!("null ({})", reason.as_str()),
        ]);
    } else if object.is_stub() {
        rows.push(vec!["content".into(), "[unread]".into()]);
    }
    output::table(ctx.out, &["FIELD", "VALUE"], &rows)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn cat(store: &Store, ctx: &mut Ctx<'_>, args: CatArgs) -> Result<ExitCode> {
    let id = resolve_ref(store, &ctx.cwd, &args.reference)?;
    let (version, object) = visible(store, &id, &args.as_of)?;
    if let Some(content) = object.content() {
        ctx.out.write_all(content.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    match (object.content_omitted(), object.file_hash()) {
        (Some(ContentOmitted::Binary), Some(hash)) => {
            let bytes = store.content(hash)?.with_context(|| {
                format!("the bytes of {id} ({hash}) are missing; run `strata fsck`")
            })?;
            ctx.out.write_all(&bytes)?;
            Ok(ExitCode::SUCCESS)
        }
        (Some(ContentOmitted::TooLarge), _) => bail!(
            "{} has no stored content: at {} it was over the content limit (max_content_bytes in \
             settings.toml)",
            name_of(&object),
            version.info.size.map_or("?".into(), output::bytes)
        ),
        (Some(ContentOmitted::Denied), _) => bail!(
            "{} has no stored content: a deny rule (secrets) keeps its bytes out of the store",
            name_of(&object)
        ),
        _ if object.is_stub() => bail!(
            "{} is a stub: known by path only, never read; run `strata index` on it",
            name_of(&object)
        ),
        _ => bail!(
            "{} ({}) has no content",
            name_of(&object),
            object.object_type()
        ),
    }
}

/// A version row as `history --json` prints it.
fn version_json(store: &Store, info: &VersionInfo) -> Result<serde_json::Value> {
    Ok(json!({
        "tx_id": info.tx_id.0,
        "tx_time": info.tx_time.to_rfc3339(),
        "valid_from": info.valid_from.to_rfc3339(),
        "valid_to": info.valid_to.map(|t| t.to_rfc3339()),
        "object_hash": info.object_hash.map(|h| h.to_hex()),
        "deleted": info.is_tombstone(),
        "size": version_size(store, info)?,
        "content_omitted": info.content_omitted.map(ContentOmitted::as_str),
    }))
}

/// The byte size of the version `info` describes.
fn version_size(store: &Store, info: &VersionInfo) -> Result<Option<u64>> {
    if info.is_tombstone() {
        return Ok(None);
    }
    let version = store.as_of(&info.entity, Some(info.valid_from), Some(info.tx_id))?;
    match version {
        Some(version) => size_of(store, &version),
        None => Ok(None),
    }
}

pub(super) fn history(store: &Store, ctx: &mut Ctx<'_>, args: HistoryArgs) -> Result<ExitCode> {
    if args.as_of.valid_at.is_some() {
        bail!(
            "history lists the versions at every valid time, so --valid-at does not apply; use \
             --as-of-tx or --tx-time to list them as the store knew them then"
        );
    }
    let id = resolve_ref(store, &ctx.cwd, &args.reference)?;
    let (_, tx) = as_of(store, &args.as_of)?;
    let query = HistoryQuery {
        order: if args.by_tx {
            Order::TxAsc
        } else {
            Order::ValidAsc
        },
        with_corrections: args.corrections,
        as_of_tx: tx,
        ..HistoryQuery::default()
    };
    let versions = store.history(&id, query)?;
    if args.json.json {
        let rows = versions
            .iter()
            .map(|info| version_json(store, info))
            .collect::<Result<Vec<_>>>()?;
        writeln!(ctx.out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let entity = store.entity(&id)?;
    let title = match &entity.source {
        Some(source) => format!(
            "{} ({})",
            output::path(&source.as_filesystem().path),
            output::short(&id)
        ),
        None => format!("{id} ({})", entity.object_type),
    };
    writeln!(ctx.out, "{title}")?;
    let mut rows = Vec::new();
    for info in &versions {
        rows.push(vec![
            info.tx_id.0.to_string(),
            info.tx_time.to_rfc3339(),
            info.valid_from.to_rfc3339(),
            match info.object_hash {
                Some(hash) => output::short(&hash.to_hex()),
                None => "deleted".into(),
            },
            version_size(store, info)?.map_or("-".into(), output::bytes),
        ]);
    }
    output::table(
        ctx.out,
        &["TX", "TX TIME", "VALID FROM", "OBJECT", "SIZE"],
        &rows,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The text of a version for diffing: its content, or a line saying why there is none.
fn diff_text(store: &Store, version: Option<&Version>) -> Result<String> {
    let Some(version) = version else {
        return Ok(String::new());
    };
    let Some(object) = &version.object else {
        return Ok(String::new());
    };
    if let Some(content) = object.content() {
        return Ok(content.to_string());
    }
    if object.content_omitted() == Some(ContentOmitted::Binary)
        && let Some(hash) = object.file_hash()
    {
        let size = store.content(hash)?.map_or(0, |b| b.len());
        return Ok(format!("Binary file {hash} ({size} bytes)\n"));
    }
    Ok(match object.content_omitted() {
        Some(reason) => format!("[content not stored: {}]\n", reason.as_str()),
        None if object.object_type() == ObjectType::Session => {
            serde_json::to_string_pretty(&object.fields().to_json())? + "\n"
        }
        None => "[unread]\n".to_string(),
    })
}

pub(super) fn diff(store: &Store, ctx: &mut Ctx<'_>, args: DiffArgs) -> Result<ExitCode> {
    let id = resolve_ref(store, &ctx.cwd, &args.reference)?;
    let latest = store.chain_head()?.map_or(0, |(tx, _)| tx.0);
    for tx in [args.from, args.to].into_iter().flatten() {
        if tx == 0 || tx > latest {
            bail!("transaction {tx} does not exist: the store has transactions 1 to {latest}");
        }
    }
    let versions = store.history(
        &id,
        HistoryQuery {
            order: Order::TxAsc,
            ..HistoryQuery::default()
        },
    )?;
    let to_tx = match args.to {
        Some(tx) => tx,
        None => latest,
    };
    let from_tx = match args.from {
        Some(tx) => Some(tx),
        None => {
            // The version before the one visible at TO: the newest write strictly before it.
            let current = store.as_of(&id, None, Some(strata::store::TxId(to_tx)))?;
            let current_tx = current.map(|v| v.info.tx_id.0).unwrap_or(0);
            versions
                .iter()
                .map(|v| v.tx_id.0)
                .filter(|tx| *tx < current_tx)
                .max()
        }
    };
    let old = match from_tx {
        Some(tx) => store.as_of(&id, None, Some(strata::store::TxId(tx)))?,
        None => None,
    };
    let new = store.as_of(&id, None, Some(strata::store::TxId(to_tx)))?;
    let old_text = diff_text(store, old.as_ref())?;
    let new_text = diff_text(store, new.as_ref())?;
    let name = match store.entity(&id)?.source {
        Some(source) => output::path(&source.as_filesystem().path),
        None => id.clone(),
    };
    // A side where the entity does not exist (not yet, or deleted) is /dev/null, as in git: a
    // deleted file is not an empty one.
    let exists = |version: &Option<Version>| version.as_ref().is_some_and(|v| v.object.is_some());
    let old_label = match from_tx {
        Some(tx) if exists(&old) => format!("a{name} (tx {tx})"),
        _ => "/dev/null".into(),
    };
    let new_label = if exists(&new) {
        format!("b{name} (tx {to_tx})")
    } else {
        "/dev/null".into()
    };
    let diff = similar::TextDiff::from_lines(&old_text, &new_text);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&old_label, &new_label)
        .to_string();
    if text.is_empty() && exists(&old) != exists(&new) {
        // Created or deleted without a line of content (an empty file): say so all the same.
        writeln!(ctx.out, "--- {old_label}\n+++ {new_label}")?;
    }
    write!(ctx.out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}
