//! Descriptors over a session: the live [`FdTable`] (kept in the session's agent cache, rebuilt
//! from the persisted [`crate::Descriptors`] after a reload), wrapping large tool output, `read_fd`, and
//! writing every change back to the session.
//!
//! A descriptor made from a tool's output is persisted as a reference to the stored tool call
//! (its id and the byte range of its output), not as a copy; one extracted from such a
//! descriptor refers to the same tool call with a narrower range. Other content (an extraction
//! from user input, user input itself) is kept inline.

use serde_json::{Map, Value};

use super::fd::{FdConfig, FdSource, FdTable, FdText};
use crate::error::{Error, Result};
use crate::session::{DescriptorEntry, DescriptorOrigin, DescriptorSettings, Session};

/// The agent layer's cached state of a session.
struct Live {
    table: FdTable,
}

fn config_of(settings: &DescriptorSettings) -> FdConfig {
    FdConfig {
        enabled: true,
        max_direct_output_chars: settings.max_direct_output_chars,
        default_page_size: settings.default_page_size,
        max_input_chars: settings.max_input_chars,
        page_user_input: settings.page_user_input,
    }
}

/// Checks descriptor settings as the original does (every size greater than 0).
///
/// # Errors
/// [`Error::InvalidInput`] naming the setting that is 0.
pub fn check_settings(settings: &DescriptorSettings) -> Result<()> {
    config_of(settings)
        .validate()
        .map_err(|e| Error::invalid_input(e.to_string()))
}

/// The text the session's system prompt gets when it has descriptors: llmproc's
/// `<file_descriptor_instructions>` (and the user-input block when user input is paged).
pub fn prompt_addition(session: &Session) -> Option<String> {
    session
        .descriptors()
        .and_then(|d| config_of(&d.settings).system_prompt_addition())
}

/// The live table of `session`, built from its persisted descriptors when the cache has none;
/// `None` when the session has no descriptors.
///
/// # Errors
/// [`Error::Corrupt`] when the persisted table is inconsistent.
fn live(session: &mut Session) -> Result<Option<&mut FdTable>> {
    let Some(descriptors) = session.descriptors().cloned() else {
        return Ok(None);
    };
    if session.agent_cache::<Live>().is_none() {
        let mut entries = Vec::with_capacity(descriptors.table.len());
        for (id, entry) in &descriptors.table {
            let content = match session.descriptor_content(entry) {
                Ok(content) => content,
                // An evicted tool call takes its descriptors with it.
                Err(Error::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            entries.push((
                id.clone(),
                source_of(&entry.source),
                entry.page_size,
                content,
            ));
        }
        let table = FdTable::restore(
            config_of(&descriptors.settings),
            descriptors.next_id,
            entries,
        )
        .map_err(|e| Error::corrupt(format!("the descriptors of session {}: {e}", session.id())))?;
        session.set_agent_cache(Live { table });
    }
    Ok(session.agent_cache::<Live>().map(|live| &mut live.table))
}

fn source_of(name: &str) -> FdSource {
    match name {
        "user_input" => FdSource::UserInput,
        _ => FdSource::ToolResult,
    }
}

/// Writes the live table's new descriptors `created` (ids, oldest first) back to the session,
/// with where each one's content is.
fn persist(session: &mut Session, created: &[(String, DescriptorOrigin, FdSource)]) -> Result<()> {
    let Some(mut descriptors) = session.descriptors().cloned() else {
        return Ok(());
    };
    let Some(table) = live(session)? else {
        return Ok(());
    };
    descriptors.next_id = table.next_id();
    for (id, origin, source) in created {
        let page_size = table
            .info(id)
            .map_or(descriptors.settings.default_page_size, |i| i.page_size);
        descriptors.table.insert(
            id.clone(),
            DescriptorEntry {
                source: source.as_str().to_string(),
                page_size,
                origin: origin.clone(),
            },
        );
    }
    session.set_descriptors(Some(descriptors))
}

/// Replaces the output of tool `tool` (recorded as tool call `call_id`) by a descriptor when the
/// session has descriptors, the tool is not a descriptor tool and the output is longer than
/// `max_direct_output_chars`: returns the `<fd_result>` to answer with instead, else `None`.
///
/// # Errors
/// As the session's descriptors when they must be rebuilt.
pub fn wrap_output(
    session: &mut Session,
    tool: &str,
    call_id: &str,
    output: &str,
) -> Result<Option<String>> {
    let Some(table) = live(session)? else {
        return Ok(None);
    };
    let before = table.next_id();
    let Some(wrapped) = table.wrap_tool_output(tool, output) else {
        return Ok(None);
    };
    let id = format!("fd:{before}");
    let origin = DescriptorOrigin::Toolcall {
        id: call_id.to_string(),
        start: 0,
        end: output.len(),
    };
    persist(session, &[(id, origin, FdSource::ToolResult)])?;
    Ok(Some(wrapped))
}

/// Replaces a large user input by a descriptor when the session pages user input (seed 004's
/// `page_user_input`, input longer than `max_input_chars`): returns the new descriptor's id and
/// the message to give the model instead, else `None`. The input is persisted inline with the
/// session's descriptors.
///
/// # Errors
/// As the session's descriptors when they must be rebuilt; [`Error::InvalidInput`] on a
/// read-only view.
pub fn page_user_input(session: &mut Session, input: &str) -> Result<Option<(String, String)>> {
    let Some(table) = live(session)? else {
        return Ok(None);
    };
    let before = table.next_id();
    let Some(message) = table.wrap_user_input(input) else {
        return Ok(None);
    };
    let id = format!("fd:{before}");
    let origin = DescriptorOrigin::Inline {
        content: input.to_string(),
    };
    persist(session, &[(id.clone(), origin, FdSource::UserInput)])?;
    Ok(Some((id, message)))
}

/// `read_fd` (RFC007's arguments and answers); a descriptor it extracts is persisted as a
/// narrower reference to the same tool call when its source descriptor is one.
///
/// # Errors
/// [`Error::InvalidInput`] when the session has no descriptors.
pub fn read_fd(session: &mut Session, args: &Map<String, Value>) -> Result<FdText> {
    let source_fd = args.get("fd").and_then(Value::as_str).map(str::to_string);
    let source_entry = source_fd
        .as_deref()
        .and_then(|fd| session.descriptors()?.table.get(fd).cloned());
    let Some(table) = live(session)? else {
        return Err(Error::invalid_input(
            "this session has no file descriptors (they are off); read_fd has nothing to read",
        ));
    };
    let before = table.next_id();
    let answer = table.call_read_fd(&Value::Object(args.clone()));
    if table.next_id() == before {
        return Ok(answer);
    }
    let new_id = format!("fd:{before}");
    let new_content = table.content(&new_id).unwrap_or_default().to_string();
    let source_content = source_fd
        .as_deref()
        .and_then(|fd| table.content(fd))
        .unwrap_or_default();
    let origin = match source_entry.map(|e| e.origin) {
        Some(DescriptorOrigin::Toolcall { id, start, .. }) => {
            match source_content.find(new_content.as_str()) {
                Some(at) => DescriptorOrigin::Toolcall {
                    id,
                    start: start + at,
                    end: start + at + new_content.len(),
                },
                None => DescriptorOrigin::Inline {
                    content: new_content,
                },
            }
        }
        _ => DescriptorOrigin::Inline {
            content: new_content,
        },
    };
    persist(session, &[(new_id, origin, FdSource::ToolResult)])?;
    Ok(answer)
}

/// `fd_to_file(fd, file_path, mode, create, exist_ok)` (seed 004): the original's checks and
/// texts, the write done as strata's other writes (`agent::write`), so it is checked, atomic and
/// recorded. Returns the answer and the file entity written, if one was.
///
/// # Errors
/// [`Error::InvalidInput`] when the session has no descriptors; store errors.
pub(crate) fn fd_to_file(
    session: &mut Session,
    args: &Map<String, Value>,
) -> Result<(FdText, Option<String>)> {
    let Some(table) = live(session)? else {
        return Err(Error::invalid_input(
            "this session has no file descriptors (they are off); fd_to_file has nothing to write",
        ));
    };
    let table = table.clone();
    let mut sink = Sink {
        session,
        written: None,
        failure: None,
    };
    let answer = table.call_fd_to_file(&Value::Object(args.clone()), &mut sink);
    if let Some(e) = sink.failure {
        return Err(e);
    }
    Ok((answer, sink.written))
}

/// The session as `fd_to_file`'s sink.
struct Sink<'a> {
    session: &'a mut Session,
    written: Option<String>,
    failure: Option<Error>,
}

impl super::fd::FileSink for Sink<'_> {
    fn exists(&mut self, path: &str) -> bool {
        super::write::exists_for_fd(self.session, path)
    }

    fn write(
        &mut self,
        path: &str,
        content: &str,
        mode: super::fd::WriteMode,
    ) -> std::result::Result<u64, String> {
        let append = mode == super::fd::WriteMode::Append;
        match super::write::write_for_fd(self.session, path, content, append) {
            Ok(Ok((size, id))) => {
                self.written = Some(id);
                Ok(size)
            }
            Ok(Err(why)) => Err(why),
            Err(e) => {
                let why = e.to_string();
                self.failure = Some(e);
                Err(why)
            }
        }
    }
}
