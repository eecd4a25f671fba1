//! The context block (seed 003's order): system prompt, one metadata line per pooled object, the
//! chat with tool outputs replaced by `toolcall_ref` lines, then the active contents, pinned
//! first, then most recently activated, within a budget of UTF-16 characters.
//!
//! Neither a name nor a content can forge the block's own lines: paths and tool names are
//! quoted as `ls` quotes them (a control character makes them a JSON string), and every content
//! (an active object's, a multi-line turn's) sits between a start and an end line that carry a
//! nonce made fresh for each render (seed 001: "explicit delimiters around injected file
//! content"), which no stored text can know.

use crate::error::{Error, Result};
use crate::object::{Object, utf16_len};
use crate::resolve::quoted;

use super::{FileState, Meta, Session};

/// The header of one active content block: `ACTIVE_CONTENT id={id}` then the content.
pub const ACTIVE_CONTENT: &str = "ACTIVE_CONTENT";

/// The line that ends an active content: `END_CONTENT nonce={nonce}`.
pub const END_CONTENT: &str = "END_CONTENT";

/// How to render.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// At most this many UTF-16 units of active content; unlimited when `None`.
    pub budget: Option<u64>,
    /// The nonce of the content delimiters; a fresh one when `None` (give one only to compare
    /// renders in tests).
    pub nonce: Option<String>,
    /// Text appended to the system prompt, after a blank line: the agent layer's instructions
    /// for the tools the session has (file descriptors' `<file_descriptor_instructions>`).
    pub prompt_addition: Option<String>,
}

/// A fresh nonce: 16 hex characters no stored text can predict.
pub fn fresh_nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // RandomState is seeded from the operating system's randomness.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let seed = [
        hasher.finish().to_le_bytes(),
        u64::from(std::process::id()).to_le_bytes(),
        (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64)
            .to_le_bytes(),
    ]
    .concat();
    hex::encode(&crate::hash::blake3(&seed)[..8])
}

/// `text` framed between a start and an end line carrying `nonce`.
fn framed(start: &str, text: &str, nonce: &str) -> String {
    format!("{start} nonce={nonce}\n{text}\n{END_CONTENT} nonce={nonce}")
}

impl Session {
    /// The metadata line of `id`, or `None` when the cache does not know it.
    pub fn metadata_line(&self, id: &str) -> Option<String> {
        Some(match self.cache.get(id)? {
            Meta::File {
                path,
                file_type,
                char_count,
                state,
                ..
            } => {
                let tail = match state {
                    FileState::Read => format!("char_count={char_count}"),
                    FileState::Stub => "[unread]".to_string(),
                    FileState::Deleted => "[deleted]".to_string(),
                    FileState::Denied => "[unread] [denied]".to_string(),
                    FileState::Binary => "char_count=0 [binary]".to_string(),
                    FileState::TooLarge => "char_count=0 [too large]".to_string(),
                };
                format!(
                    "id={id} type=file path={} file_type={} {tail}",
                    quoted(path),
                    quoted(file_type)
                )
            }
            Meta::Toolcall { tool, status } => {
                format!(
                    "id={id} type=toolcall tool={} status={}",
                    quoted(tool),
                    status.as_str()
                )
            }
        })
    }

    /// The metadata pool as lines joined by `\n`; an empty pool renders an empty string.
    pub fn render_metadata(&self) -> String {
        let lines: Vec<String> = self
            .sets
            .pool()
            .ids()
            .iter()
            .map(|id| {
                self.metadata_line(id)
                    .unwrap_or_else(|| format!("id={id} [unknown]"))
            })
            .collect();
        lines.join("\n")
    }

    /// The chat: one `role: content` block per turn (a content with a line break or another
    /// control character framed by lines carrying `nonce`), each followed by a `toolcall_ref
    /// id=… tool=… status=…` line per tool call made during it, blocks blank-line separated.
    pub fn render_chat(&self, nonce: &str) -> String {
        let blocks: Vec<String> = self
            .turns
            .iter()
            .map(|turn| {
                let role = turn.role.as_str();
                let mut block = if turn.content.chars().any(char::is_control) {
                    format!("{role}:\n{}", framed("TEXT", &turn.content, nonce))
                } else {
                    format!("{role}: {}", turn.content)
                };
                for id in turn.toolcall_refs.iter().flatten() {
                    match self.cache.get(id) {
                        Some(Meta::Toolcall { tool, status }) => block.push_str(&format!(
                            "\ntoolcall_ref id={id} tool={} status={}",
                            quoted(tool),
                            status.as_str()
                        )),
                        _ => block.push_str(&format!("\ntoolcall_ref id={id}")),
                    }
                }
                block
            })
            .collect();
        blocks.join("\n\n")
    }

    /// The active ids in render order: pinned ones first (in pin order), then the others, most
    /// recently activated first.
    pub fn render_order(&self) -> Vec<String> {
        let active = self.sets.active();
        let pinned = self.sets.pinned();
        let mut out: Vec<String> = pinned
            .ids()
            .iter()
            .filter(|id| active.contains(id))
            .cloned()
            .collect();
        out.extend(
            active
                .ids()
                .iter()
                .rev()
                .filter(|id| !pinned.contains(id))
                .cloned(),
        );
        out
    }

    /// The current object of `id` as this session sees it: queued, or read from the store at the
    /// viewed commit (latest otherwise); `None` for a tombstone.
    fn object_for_render(&self, id: &str) -> Result<Option<Object>> {
        if let Some(object) = self.queued_object(id) {
            return Ok(Some(object.clone()));
        }
        match self.store.as_of(id, None, self.view) {
            Ok(version) => Ok(version.and_then(|v| v.object)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The text shown for an active object: its content, or a note saying why there is none.
    fn shown_content(&self, id: &str) -> Result<String> {
        let object = self.object_for_render(id)?;
        Ok(match (object, self.cache.get(id)) {
            (Some(object), _) if object.content().is_some() => {
                object.content().unwrap_or_default().to_string()
            }
            (None, _) => "[deleted]".to_string(),
            (Some(_), Some(Meta::File { state, .. })) => match state {
                FileState::Binary => "[binary content not shown]".to_string(),
                FileState::TooLarge => "[content over the size limit, not kept]".to_string(),
                FileState::Denied => "[denied]".to_string(),
                _ => "[unread]".to_string(),
            },
            (Some(_), _) => String::new(),
        })
    }

    /// The context block: system prompt, metadata pool, chat, active contents (sections joined
    /// by a blank line, empty ones left out). With a budget, each active content that fits is
    /// shown whole, the first that does not is cut with a marker saying how to read the rest,
    /// and the others are named as not shown.
    ///
    /// # Errors
    /// Store errors reading the active objects.
    pub fn render(&self, options: &RenderOptions) -> Result<String> {
        let mut sections: Vec<String> = Vec::new();
        if !self.system_prompt.is_empty() {
            sections.push(self.system_prompt.clone());
        }
        if let Some(addition) = options.prompt_addition.as_ref().filter(|a| !a.is_empty()) {
            sections.push(addition.clone());
        }
        let metadata = self.render_metadata();
        if !metadata.is_empty() {
            sections.push(metadata);
        }
        let nonce = options.nonce.clone().unwrap_or_else(fresh_nonce);
        let chat = self.render_chat(&nonce);
        if !chat.is_empty() {
            sections.push(chat);
        }
        let mut remaining = options.budget;
        let mut not_shown: Vec<String> = Vec::new();
        let mut cut_done = false;
        let mut blocks: Vec<String> = Vec::new();
        for id in self.render_order() {
            if cut_done {
                not_shown.push(format!("id={id}"));
                continue;
            }
            let content = self.shown_content(&id)?;
            let length = utf16_len(&content);
            match remaining {
                Some(left) if length > left => {
                    let (cut, shown) = prefix_utf16(&content, left);
                    let start = format!("{ACTIVE_CONTENT} id={id}");
                    blocks.push(format!(
                        "{}\n[cut: {shown} of {length} characters shown; read the rest with `strata cat {id}`, or deactivate other objects]",
                        framed(&start, cut, &nonce)
                    ));
                    remaining = Some(0);
                    cut_done = true;
                }
                _ => {
                    remaining = remaining.map(|left| left - length);
                    let start = format!("{ACTIVE_CONTENT} id={id}");
                    blocks.push(framed(&start, &content, &nonce));
                }
            }
        }
        if !not_shown.is_empty() {
            blocks.push(format!(
                "NOT_SHOWN (over the budget): {}",
                not_shown.join(" ")
            ));
        }
        sections.extend(blocks);
        Ok(sections.join("\n\n"))
    }
}

/// The longest prefix of `text` of at most `limit` UTF-16 units, and its length in those units.
fn prefix_utf16(text: &str, limit: u64) -> (&str, u64) {
    let mut used = 0u64;
    for (at, c) in text.char_indices() {
        let width = c.len_utf16() as u64;
        if used + width > limit {
            return (&text[..at], used);
        }
        used += width;
    }
    (text, used)
}

#[cfg(test)]
mod tests {
    use super::prefix_utf16;

    #[test]
    fn prefixes_count_utf16_units() {
        assert_eq!(prefix_utf16("abc", 2), ("ab", 2));
        assert_eq!(prefix_utf16("a😀b", 2), ("a", 1));
        assert_eq!(prefix_utf16("a😀b", 3), ("a😀", 3));
        assert_eq!(prefix_utf16("ab", 9), ("ab", 2));
    }
}
