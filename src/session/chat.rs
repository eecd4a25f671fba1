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
        let already = self.referenced().contains(&id);
        if !already && let Some(turn) = std::sync::Arc::make_mut(&mut self.turns).last_mut() {
            turn.toolcall_refs
                .get_or_insert_with(Vec::new)
                .push(id.clone());
            self.referenced().insert(id.clone());
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
        for (i, r) in toolcall_refs.iter().enumerate() {
            if !matches!(self.cache.get(r), Some(Meta::Toolcall { .. })) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is not a tool call of this session; record it first"
                )));
            }
            if self.referenced().contains(r) || toolcall_refs[..i].contains(r) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is already referenced by a turn; a tool call joins one turn"
                )));
            }
        }
        self.referenced().extend(toolcall_refs.iter().cloned());
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

    /// Every tool call id a turn names (built from the turns on first use, then kept).
    fn referenced(&mut self) -> &mut rustc_hash::FxHashSet<String> {
        let turns = &self.turns;
        self.referenced.get_or_insert_with(|| {
            turns
                .iter()
                .flat_map(|t| t.toolcall_refs.iter().flatten().cloned())
                .collect()
        })
    }

    /// Auto-collapse: deactivate tool calls outside the last [`RECENT_TURNS`] turns, and all but
    /// the last [`RECENT_TOOLCALLS_PER_TURN`] of the current turn; never files, never pinned ones.
    /// Tool calls no turn names yet (made after the last turn, or before any) count as the
    /// current turn's, after its own.
    pub(super) fn collapse(&mut self) {
        self.update_unreferenced();
        let keep = self.collapse_keep();
        // Only the active tool calls can be dropped, and the sets know which active ids were
        // added since the last collapse: the kept tool calls and those are all it looks at, not
        // every active file (a 10 000-file session's active set is read once after a load).
        let mut drop = Vec::new();
        let mut kept = Vec::new();
        for id in self.sets.active_candidates() {
            if !matches!(self.cache.get(id), Some(Meta::Toolcall { .. })) {
                continue;
            }
            if keep.contains(id) || self.sets.pinned().contains(id) {
                kept.push(id.to_string());
            } else {
                drop.push(id.to_string());
            }
        }
        for id in drop {
            self.sets.remove_active(&id);
        }
        self.sets.watch_active(kept);
    }

    /// Brings [`Session::unreferenced`] up to date: the index only grows and a turn's refs are
    /// never taken back, so the tool calls no turn references are kept between calls and only
    /// new index entries are looked at.
    fn update_unreferenced(&mut self) {
        let (mut unreferenced, scanned) = std::mem::take(&mut self.unreferenced);
        let ids = self.sets.index().ids();
        let scanned = scanned.min(ids.len());
        unreferenced.extend(
            ids[scanned..]
                .iter()
                .filter(|id| matches!(self.cache.get(id), Some(Meta::Toolcall { .. })))
                .cloned(),
        );
        let scanned = ids.len();
        if let Some(last) = self.turns.last() {
            let last_refs: Vec<&String> = last.toolcall_refs.iter().flatten().collect();
            unreferenced.retain(|id| !last_refs.contains(&id));
        }
        if !unreferenced.is_empty() {
            let referenced = self.referenced();
            unreferenced.retain(|id| !referenced.contains(id));
        }
        self.unreferenced = (unreferenced, scanned);
    }

    /// The tool calls auto-collapse keeps active: those of the last [`RECENT_TURNS`] turns but
    /// the current one, and the last [`RECENT_TOOLCALLS_PER_TURN`] of the current turn's (its
    /// own refs, then the unreferenced ones).
    fn collapse_keep(&self) -> HashSet<&str> {
        let mut keep: HashSet<&str> = HashSet::new();
        let mut current: Vec<&str> = Vec::new();
        if let Some((last, earlier)) = self.turns.split_last() {
            let from = earlier.len().saturating_sub(RECENT_TURNS - 1);
            for turn in &earlier[from..] {
                keep.extend(turn.toolcall_refs.iter().flatten().map(String::as_str));
            }
            current.extend(last.toolcall_refs.iter().flatten().map(String::as_str));
        }
        current.extend(self.unreferenced.0.iter().map(String::as_str));
        let skip = current.len().saturating_sub(RECENT_TOOLCALLS_PER_TURN);
        keep.extend(current[skip..].iter().copied());
        keep
    }

    /// What a collapse that looked at every active id would drop now (tests: after any
    /// operation it must be nothing, or the candidates missed one).
    #[cfg(test)]
    fn full_scan_would_drop(&self) -> Vec<String> {
        let keep = self.collapse_keep();
        self.sets
            .active()
            .ids()
            .iter()
            .filter(|id| matches!(self.cache.get(id), Some(Meta::Toolcall { .. })))
            .filter(|id| !keep.contains(id.as_str()) && !self.sets.pinned().contains(id))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ToolStatus;
    use crate::session::SessionOptions;
    use proptest::prelude::*;

    /// One step of a session's life that can change which tool calls are active.
    #[derive(Clone, Debug)]
    enum Step {
        Record,
        Rerecord(usize),
        Turn(usize),
        Pin(usize),
        Unpin(usize),
        Activate(usize),
        Deactivate(usize),
        CommitAndLoad,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => Just(Step::Record),
            1 => any::<usize>().prop_map(Step::Rerecord),
            3 => (0..4usize).prop_map(Step::Turn),
            1 => any::<usize>().prop_map(Step::Pin),
            1 => any::<usize>().prop_map(Step::Unpin),
            1 => any::<usize>().prop_map(Step::Activate),
            1 => any::<usize>().prop_map(Step::Deactivate),
            1 => Just(Step::CommitAndLoad),
        ]
    }

    fn call(id: &str) -> ToolcallInput {
        ToolcallInput {
            id: Some(id.to_string()),
            tool: "t".into(),
            args: serde_json::Map::new(),
            args_display: None,
            status: ToolStatus::Ok,
            file_refs: None,
            output: format!("out {id}"),
        }
    }

    /// A refusal (pinning what is pinned, unpinning what is not) is a valid outcome of a step.
    fn refused_is_fine(outcome: Result<()>) -> Result<()> {
        match outcome {
            Err(Error::InvalidInput { .. }) => Ok(()),
            other => other,
        }
    }

    /// Runs `steps`, checking after each that collapses that a collapse looking at every active
    /// id would drop nothing more: the candidates the sets keep never miss a tool call.
    fn run(steps: &[Step]) -> Result<()> {
        let store = Store::in_memory()?;
        let settings = Settings::default();
        let mut s = Session::create(&store, &settings, SessionOptions::default())?;
        let mut calls: Vec<String> = Vec::new();
        for step in steps {
            let pick = |k: &usize| calls.get(k % calls.len().max(1)).cloned();
            match step {
                Step::Record => {
                    let id = format!("tc-{}", calls.len());
                    s.record_toolcall(call(&id))?;
                    calls.push(id);
                }
                Step::Rerecord(k) => {
                    if let Some(id) = pick(k) {
                        s.record_toolcall(call(&id))?;
                    }
                }
                Step::Turn(n) => {
                    let refs: Vec<String> = s.unreferenced.0.iter().take(*n).cloned().collect();
                    s.append_turn(crate::object::Role::Assistant, "turn".into(), refs)?;
                }
                Step::Pin(k) => {
                    if let Some(id) = pick(k) {
                        refused_is_fine(s.pin(&id))?;
                    }
                }
                Step::Unpin(k) => {
                    if let Some(id) = pick(k) {
                        refused_is_fine(s.unpin(&id))?;
                    }
                }
                Step::Activate(k) => {
                    if let Some(id) = pick(k) {
                        refused_is_fine(s.activate(&id))?;
                    }
                }
                Step::Deactivate(k) => {
                    if let Some(id) = pick(k) {
                        refused_is_fine(s.deactivate(&id))?;
                    }
                }
                Step::CommitAndLoad => {
                    s.commit()?;
                    s = Session::load(&store, &settings, s.id())?;
                }
            }
            // Recording and turns collapse (activation, pins and loads do not).
            let collapsed = matches!(step, Step::Record | Step::Rerecord(_) | Step::Turn(_));
            let missed = s.full_scan_would_drop();
            if collapsed && !missed.is_empty() {
                return Err(Error::invalid_input(format!(
                    "after {step:?} a full collapse would still drop {missed:?}"
                )));
            }
            s.sets().check()?;
        }
        Ok(())
    }

    /// The number of cases (`STRATA_PROPTEST_CASES` raises it).
    fn cases() -> u32 {
        crate::proptest_cases(48)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        #[test]
        fn collapse_by_candidates_drops_what_a_full_scan_would(
            steps in proptest::collection::vec(step(), 1..60)
        ) {
            let outcome = run(&steps);
            prop_assert!(outcome.is_ok(), "{outcome:?}");
        }
    }

    /// An explicit history: tool calls of old turns are dropped once they age out, after a
    /// load too, while a pinned one stays.
    #[test]
    fn old_turns_age_out_after_a_load() -> Result<()> {
        run(&[
            Step::Turn(0),
            Step::Record,
            Step::Record,
            Step::Pin(1),
            Step::CommitAndLoad,
            Step::Turn(0),
            Step::Turn(0),
            Step::Turn(0),
            Step::Record,
            Step::Activate(0),
            Step::Turn(0),
        ])
    }
}
