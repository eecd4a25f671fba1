//! The reading commands: `ls`, `show`, `cat`, `history`, `diff`.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;
use strata::engine::{AsOf, CatRequest, DiffRequest, HistoryRequest, LsRequest, ShowRequest};

use super::args::{AsOfArgs, CatArgs, DiffArgs, HistoryArgs, KnownArgs, LsArgs, ShowArgs};
use super::{Invocation, output};

impl From<AsOfArgs> for AsOf {
    fn from(args: AsOfArgs) -> Self {
        AsOf {
            valid_at: args.valid_at,
            ..args.known.into()
        }
    }
}

impl From<KnownArgs> for AsOf {
    fn from(args: KnownArgs) -> Self {
        AsOf {
            valid_at: None,
            as_of_tx: args.as_of_tx,
            tx_time: args.tx_time,
        }
    }
}

/// A hash field of an envelope: its hex, or `null`.
fn hash_text(value: &Value) -> String {
    value.as_str().unwrap_or("null").to_string()
}

impl Invocation<'_> {
    pub(super) fn ls(&mut self, args: LsArgs) -> Result<ExitCode> {
        let rows = self.call(LsRequest {
            prefix: args.prefix.map(|p| p.display().to_string()),
            cwd: self.cwd(),
            all: args.all,
            as_of: args.as_of.into(),
        })?;
        // Damaged files are listed as such, and named on stderr: the exit says not all is well.
        // A damaged row without an id is the listing itself (the store is marked damaged).
        let damaged: Vec<&strata::engine::LsRow> =
            rows.iter().filter(|r| r.damage.is_some()).collect();
        let code = if damaged.is_empty() {
            ExitCode::SUCCESS
        } else {
            let mut err = std::io::stderr();
            let files = damaged.iter().filter(|r| !r.id.is_empty()).count();
            for row in &damaged {
                let damage = row.damage.as_deref().unwrap_or_default();
                if row.id.is_empty() {
                    writeln!(err, "strata: {damage}")?;
                } else {
                    writeln!(
                        err,
                        "strata: {} is damaged: {damage}",
                        output::path(&row.path)
                    )?;
                }
            }
            if files > 0 {
                writeln!(
                    err,
                    "strata: {files} of {} files are damaged; `strata fsck` says what is affected \
                     and `strata fsck --repair` repairs what can be repaired",
                    rows.iter().filter(|r| !r.id.is_empty()).count()
                )?;
            }
            ExitCode::from(2)
        };
        if args.json.json {
            self.print_json(&rows)?;
            return Ok(code);
        }
        // Paths under the current directory are shown relative to it, as git shows them; the
        // path comes last, so that no column is padded to the longest path.
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                vec![
                    row.size.map_or("-".into(), output::bytes),
                    row.versions.to_string(),
                    row.last_change.clone(),
                    row.state.clone(),
                    output::path(&output::relative(&row.path, &self.cwd)),
                ]
            })
            .collect();
        output::table(
            self.out,
            &["SIZE", "VERSIONS", "LAST CHANGE", "STATE", "PATH"],
            &table,
        )?;
        Ok(code)
    }

    pub(super) fn show(&mut self, args: ShowArgs) -> Result<ExitCode> {
        let shown = self.call(ShowRequest {
            reference: args.reference,
            cwd: self.cwd(),
            as_of: args.as_of.into(),
        })?;
        if args.json.json {
            writeln!(self.out, "{}", serde_json::to_string_pretty(&shown.object)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        let object = &shown.object;
        let text = |key: &str| object[key].as_str().unwrap_or_default().to_string();
        let mut rows: Vec<Vec<String>> = vec![
            vec!["xt/id".into(), text("xt/id")],
            vec!["type".into(), text("type")],
        ];
        if let Some(source) = object["source"].as_object() {
            let path = source.get("path").and_then(Value::as_str).unwrap_or("");
            let filesystem = source
                .get("filesystemId")
                .and_then(Value::as_str)
                .unwrap_or("");
            rows.push(vec!["path".into(), output::path(path)]);
            rows.push(vec!["filesystem".into(), filesystem.to_string()]);
        }
        rows.push(vec!["valid from".into(), shown.valid_from.clone()]);
        if let Some(to) = &shown.valid_to {
            rows.push(vec!["valid to".into(), to.clone()]);
        }
        rows.push(vec![
            "written".into(),
            format!("tx {} at {}", shown.tx_id, shown.tx_time),
        ]);
        for key in [
            "identity_hash",
            "file_hash",
            "content_hash",
            "metadata_hash",
            "object_hash",
        ] {
            rows.push(vec![key.into(), hash_text(&object[key])]);
        }
        if let Value::Object(fields) = &shown.fields {
            for (key, value) in fields {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                rows.push(vec![key.clone(), text]);
            }
        }
        if let Some(size) = shown.size {
            rows.push(vec!["size".into(), output::bytes(size)]);
        }
        // A denied file has no file hash either, so it looks like a stub: the reason comes first.
        if let Some(reason) = &shown.content_omitted {
            rows.push(vec!["content".into(), format!("null ({reason})")]);
        } else if shown.stub {
            rows.push(vec!["content".into(), "[unread]".into()]);
        }
        output::table(self.out, &["FIELD", "VALUE"], &rows)?;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn cat(&mut self, args: CatArgs) -> Result<ExitCode> {
        let content = self.call(CatRequest {
            reference: args.reference,
            cwd: self.cwd(),
            as_of: args.as_of.into(),
        })?;
        self.out.write_all(&content.body.bytes()?)?;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn history(&mut self, args: HistoryArgs) -> Result<ExitCode> {
        let history = self.call(HistoryRequest {
            reference: args.reference,
            cwd: self.cwd(),
            corrections: args.corrections,
            by_tx: args.by_tx,
            as_of: AsOf {
                valid_at: args.valid_at,
                ..args.known.into()
            },
        })?;
        if args.json.json {
            self.print_json(&history.versions)?;
            return Ok(ExitCode::SUCCESS);
        }
        let title = match &history.path {
            Some(path) => format!("{} ({})", output::path(path), output::short(&history.id)),
            None => format!("{} ({})", history.id, history.object_type),
        };
        writeln!(self.out, "{title}")?;
        let rows: Vec<Vec<String>> = history
            .versions
            .iter()
            .map(|row| {
                vec![
                    row.tx_id.to_string(),
                    row.tx_time.clone(),
                    row.valid_from.clone(),
                    match &row.object_hash {
                        Some(hash) => output::short(hash),
                        None => "deleted".into(),
                    },
                    row.size.map_or("-".into(), output::bytes),
                ]
            })
            .collect();
        output::table(
            self.out,
            &["TX", "TX TIME", "VALID FROM", "OBJECT", "SIZE"],
            &rows,
        )?;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn diff(&mut self, args: DiffArgs) -> Result<ExitCode> {
        let diff = self.call(DiffRequest {
            reference: args.reference,
            cwd: self.cwd(),
            from: args.from,
            to: args.to,
        })?;
        write!(self.out, "{}", diff.text)?;
        Ok(ExitCode::SUCCESS)
    }
}
