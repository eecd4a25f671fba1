//! The chat: turns, tool calls, the system prompt, and auto-collapse.

use super::*;

impl Session {
    /// Records a tool call: a toolcall object of this session's chat, added to index, pool and
    /// active set, its id appended to the latest turn's `toolcall_refs` (when the chat has no
    /// turn yet, as over MCP, the call joins no turn: a later turn may name it); then
    /// auto-collapse runs. Recording an id this session recorded before makes a new version of it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the call is malformed; [`Error::Conflict`] when the id belongs
    /// to another session's chat or to another type.
    pub fn record_toolcall(&mut self, input: ToolcallInput) -> Result<String> {
        self.writable()?;
        let id = input
            .id
            .unwrap_or_else(|| format!("toolcall:{}", ulid::new_ulid()));
        let chat_ref = format!("chat:{}", self.session_id);
        if !self.pending_at.contains_key(&id)
            && let Some(version) = self.store.get_if_known(&id)?
        {
            let info = self.store.entity(&id)?;
            if info.object_type != ObjectType::Toolcall {
                return Err(Error::Conflict {
                    entity: id,
                    expected: "a tool call id".into(),
                    actual: format!("a {} with this id", info.object_type),
                });
            }
            let owner = version.object.and_then(|o| match o.fields() {
                Fields::Toolcall(f) => Some(f.chat_ref.clone()),
                _ => None,
            });
            if owner.as_deref() != Some(chat_ref.as_str()) {
                return Err(Error::Conflict {
                    entity: id,
                    expected: format!("a tool call of {chat_ref}"),
                    actual: format!(
                        "a tool call of {}; tool call ids are global, give a new one",
                        owner.unwrap_or_else(|| "a deleted chat".into())
                    ),
                });
            }
        }
        let object = Object::toolcall(
            &id,
            ToolcallFields {
                tool: input.tool,
                args: input.args,
                args_display: input.args_display,
                status: input.status,
                chat_ref,
                file_refs: input.file_refs,
            },
            input.output,
        )?;
        if let Some(meta) = meta_of(&self.resolver, &object) {
            self.cache.insert(id.clone(), meta);
        }
        self.queue(Op::put(object));
        self.sets.add_active(&id);
        let already = self
            .turns
            .iter()
            .any(|t| t.toolcall_refs.iter().flatten().any(|r| *r == id));
        if !already && let Some(turn) = std::sync::Arc::make_mut(&mut self.turns).last_mut() {
            turn.toolcall_refs
                .get_or_insert_with(Vec::new)
                .push(id.clone());
            self.chat_dirty = true;
        }
        self.collapse();
        Ok(id)
    }

    /// Notes that tool call `call_id` (about to be recorded) was made by `caller`: a new
    /// [`CallerSpan`] when the last one names another caller.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn note_caller(&mut self, caller: &str, call_id: &str) -> Result<()> {
        self.writable()?;
        if self
            .config
            .callers
            .last()
            .is_some_and(|s| s.caller == caller)
        {
            return Ok(());
        }
        self.config.callers.push(CallerSpan {
            caller: caller.to_string(),
            from: call_id.to_string(),
        });
        self.config_dirty = true;
        Ok(())
    }

    /// Appends a turn to the chat; `toolcall_refs` name tool calls this session recorded and no
    /// turn references yet. Then auto-collapse runs. Returns the new turn count.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a ref that is not an unreferenced tool call of this session.
    pub fn append_turn(
        &mut self,
        role: Role,
        content: String,
        toolcall_refs: Vec<String>,
    ) -> Result<usize> {
        self.writable()?;
        let referenced: HashSet<&String> = if toolcall_refs.is_empty() {
            HashSet::new()
        } else {
            self.turns
                .iter()
                .flat_map(|t| t.toolcall_refs.iter().flatten())
                .collect()
        };
        for (i, r) in toolcall_refs.iter().enumerate() {
            if !matches!(self.cache.get(r), Some(Meta::Toolcall { .. })) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is not a tool call of this session; record it first"
                )));
            }
            if referenced.contains(r) || toolcall_refs[..i].contains(r) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is already referenced by a turn; a tool call joins one turn"
                )));
            }
        }
        std::sync::Arc::make_mut(&mut self.turns).push(Turn {
            role,
            content,
            toolcall_refs: (!toolcall_refs.is_empty()).then_some(toolcall_refs),
        });
        self.chat_dirty = true;
        self.collapse();
        Ok(self.turns.len())
    }

    /// Replaces the system prompt.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn set_system_prompt(&mut self, prompt: String) -> Result<()> {
        self.writable()?;
        if prompt != self.system_prompt {
            self.system_prompt = prompt;
            self.prompt_dirty = true;
        }
        Ok(())
    }

    /// Auto-collapse: deactivate tool calls outside the last [`RECENT_TURNS`] turns, and all but
    /// the last [`RECENT_TOOLCALLS_PER_TURN`] of the current turn; never files, never pinned ones.
    /// Tool calls no turn names yet (made after the last turn, or before any) count as the
    /// current turn's, after its own.
    pub(super) fn collapse(&mut self) {
        // The index only grows and a turn's refs are never taken back, so the tool calls no
        // turn references are kept between calls: only new index entries are looked at, and
        // the turns are read whole only while one of them is still unreferenced.
        let (mut unreferenced, scanned) = std::mem::take(&mut self.unreferenced);
        let ids = self.sets.index().ids();
        let scanned = scanned.min(ids.len());
        unreferenced.extend(
            ids[scanned..]
                .iter()
                .filter(|id| matches!(self.cache.get(*id), Some(Meta::Toolcall { .. })))
                .cloned(),
        );
        let scanned = ids.len();
        if let Some(last) = self.turns.last() {
            let last_refs: Vec<&String> = last.toolcall_refs.iter().flatten().collect();
            unreferenced.retain(|id| !last_refs.contains(&id));
        }
        if !unreferenced.is_empty() {
            let referenced: HashSet<&str> = self
                .turns
                .iter()
                .flat_map(|t| t.toolcall_refs.iter().flatten().map(String::as_str))
                .collect();
            unreferenced.retain(|id| !referenced.contains(id.as_str()));
        }
        self.unreferenced = (unreferenced, scanned);
        let unreferenced: Vec<&str> = self.unreferenced.0.iter().map(String::as_str).collect();
        let mut keep: HashSet<&str> = HashSet::new();
        let mut current: Vec<&str> = Vec::new();
        if let Some((last, earlier)) = self.turns.split_last() {
            let from = earlier.len().saturating_sub(RECENT_TURNS - 1);
            for turn in &earlier[from..] {
                keep.extend(turn.toolcall_refs.iter().flatten().map(String::as_str));
            }
            current.extend(last.toolcall_refs.iter().flatten().map(String::as_str));
        }
        current.extend(unreferenced);
        let skip = current.len().saturating_sub(RECENT_TOOLCALLS_PER_TURN);
        keep.extend(current[skip..].iter().copied());
        let drop: Vec<String> = self
            .sets
            .active()
            .ids()
            .iter()
            .filter(|id| matches!(self.cache.get(*id), Some(Meta::Toolcall { .. })))
            .filter(|id| !keep.contains(id.as_str()) && !self.sets.pinned().contains(id))
            .cloned()
            .collect();
        for id in drop {
            self.sets.remove_active(&id);
        }
    }
}
