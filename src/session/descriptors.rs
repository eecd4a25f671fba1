//! The persisted side of a session's file descriptors (seed 004) and the agent layer's cache.
//!
//! A session keeps its descriptors' settings and table in its configuration record
//! ([`SessionConfig::descriptors`]); `agent::fd` holds the paging and the tools, and
//! `agent::descriptors` converts between the two. A descriptor made from a tool's output refers
//! to the stored tool call (its id and a byte range of its output) instead of copying the
//! output; one whose content is no stored output's slice (a user input) keeps its content.

use std::any::Any;
use std::collections::BTreeMap;

use super::*;

/// The descriptor settings of a session, kept with the store's settings (`[file_descriptor]`).
pub use crate::index::DescriptorSettings;

/// Where a descriptor's content is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DescriptorOrigin {
    /// Bytes `start..end` of the stored output of tool call `id`.
    Toolcall {
        /// The tool call's id.
        id: String,
        /// The first byte (a character boundary).
        start: usize,
        /// The byte after the last (a character boundary).
        end: usize,
    },
    /// The content itself.
    Inline {
        /// The content.
        content: String,
    },
}

/// One persisted descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescriptorEntry {
    /// `tool_result` or `user_input`.
    pub source: String,
    /// The page size it was made with, in characters.
    pub page_size: usize,
    /// Where its content is.
    pub origin: DescriptorOrigin,
}

/// A session's descriptors: settings, the counter (ids are never reused) and the table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Descriptors {
    /// The settings.
    pub settings: DescriptorSettings,
    /// The number of the next descriptor (`fd:{next_id}`); starts at 1.
    pub next_id: u64,
    /// The descriptors by id (`fd:1`, …).
    pub table: BTreeMap<String, DescriptorEntry>,
}

impl Descriptors {
    /// An empty table with `settings`.
    pub fn new(settings: DescriptorSettings) -> Self {
        Descriptors {
            settings,
            next_id: 1,
            table: BTreeMap::new(),
        }
    }
}

/// Slots, one per type, where the agent layer keeps what it derived from the session (the live
/// descriptor table with its line indexes, pending approvals), dropped whenever the session is
/// reloaded.
#[derive(Default)]
pub(super) struct AgentCache(HashMap<std::any::TypeId, Box<dyn Any + Send>>);

impl std::fmt::Debug for AgentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AgentCache({} slots)", self.0.len())
    }
}

impl Session {
    /// The descriptors, when the session has them.
    pub fn descriptors(&self) -> Option<&Descriptors> {
        self.config.descriptors.as_ref()
    }

    /// Replaces the descriptors (the agent layer, after a tool call made or extracted one); the
    /// configuration record is written with the next commit.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn set_descriptors(&mut self, descriptors: Option<Descriptors>) -> Result<()> {
        self.writable()?;
        if self.config.descriptors != descriptors {
            self.config.descriptors = descriptors;
            self.config_dirty = true;
        }
        Ok(())
    }

    /// The content of a descriptor: its inline content, or its slice of the stored (or queued)
    /// output of its tool call, as this session sees it.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tool call is gone (evicted); [`Error::Corrupt`] when the range
    /// does not lie on character boundaries of its output.
    pub fn descriptor_content(&self, entry: &DescriptorEntry) -> Result<String> {
        match &entry.origin {
            DescriptorOrigin::Inline { content } => Ok(content.clone()),
            DescriptorOrigin::Toolcall { id, start, end } => {
                let object = match self.queued_object(id) {
                    Some(object) => Some(object.clone()),
                    None => match self.store.as_of(id, None, self.view) {
                        Ok(version) => version.and_then(|v| v.object),
                        Err(Error::NotFound { .. }) => None,
                        Err(e) => return Err(e),
                    },
                };
                let output = object
                    .as_ref()
                    .and_then(Object::content)
                    .ok_or_else(|| Error::not_found(format!("the output of tool call {id}")))?;
                output.get(*start..*end).map(str::to_string).ok_or_else(|| {
                    Error::corrupt(format!(
                        "a descriptor's range {start}..{end} does not lie in the output of {id}"
                    ))
                })
            }
        }
    }

    /// The agent layer's cached value of type `T`, if it holds one.
    pub fn agent_cache<T: Any + Send>(&mut self) -> Option<&mut T> {
        self.agent_cache
            .0
            .get_mut(&std::any::TypeId::of::<T>())?
            .downcast_mut::<T>()
    }

    /// Keeps `value` as the agent layer's cached value of type `T` (replacing the last one).
    pub fn set_agent_cache<T: Any + Send>(&mut self, value: T) {
        self.agent_cache
            .0
            .insert(std::any::TypeId::of::<T>(), Box::new(value));
    }
}
