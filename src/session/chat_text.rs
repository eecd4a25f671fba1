//! The chat's canonical JSON and transcript, kept between commits: a commit serialises only the
//! turns added since the last one (and the last turn, which a tool call may still extend), not
//! the whole chat again.

use super::*;
use crate::hash::push_jcs_string;

/// The JSON and transcript of a chat's settled turns: every turn but the last, which no request
/// changes any more (a tool call only ever joins the last turn).
#[derive(Clone, Debug, Default)]
pub(super) struct ChatText {
    /// How many turns the texts cover.
    settled: usize,
    /// The canonical JSON of those turns, joined by commas (the inside of `turns`).
    turns: String,
    /// The inside of `toolcall_refs` for those turns.
    refs: String,
    /// Their transcript.
    transcript: String,
}

impl ChatText {
    /// The chat object of session `session_id` with `turns`, from the kept texts plus the turns
    /// since. The first `settled` turns must be those the texts were made from (turns are only
    /// ever appended; a session whose turns are replaced starts with a new `ChatText`).
    pub(super) fn object(&mut self, session_id: &str, turns: &ChatTurns) -> Result<Object> {
        let settle = turns.len().saturating_sub(1);
        if self.settled > settle {
            *self = ChatText::default();
        }
        for turn in &turns[self.settled..settle] {
            self.settle(turn);
        }
        self.settled = settle;
        let last = turns.last();
        let mut json = String::with_capacity(self.turns.len() + self.refs.len() + 256);
        json.push_str("{\"session_ref\":");
        push_jcs_string(&mut json, &format!("session:{session_id}"));
        json.push_str(",\"toolcall_refs\":[");
        json.push_str(&self.refs);
        let mut first_ref = self.refs.is_empty();
        for id in last
            .into_iter()
            .flat_map(|t| t.toolcall_refs.iter().flatten())
        {
            if !first_ref {
                json.push(',');
            }
            first_ref = false;
            push_jcs_string(&mut json, id);
        }
        json.push_str("],\"turn_count\":");
        json.push_str(&turns.len().to_string());
        json.push_str(",\"turns\":[");
        json.push_str(&self.turns);
        let mut transcript = String::with_capacity(self.transcript.len() + 64);
        transcript.push_str(&self.transcript);
        if let Some(last) = last {
            if self.settled > 0 {
                json.push(',');
                transcript.push_str("\n\n");
            }
            push_turn(&mut json, last);
            push_block(&mut transcript, last);
        }
        json.push_str("]}");
        Object::chat_with_json(session_id, std::sync::Arc::clone(turns), json, transcript)
    }

    /// Adds `turn` to the settled texts.
    fn settle(&mut self, turn: &Turn) {
        if self.settled > 0 {
            self.turns.push(',');
            self.transcript.push_str("\n\n");
        }
        push_turn(&mut self.turns, turn);
        push_block(&mut self.transcript, turn);
        for id in turn.toolcall_refs.iter().flatten() {
            if !self.refs.is_empty() {
                self.refs.push(',');
            }
            push_jcs_string(&mut self.refs, id);
        }
        self.settled += 1;
    }
}

/// The canonical JSON of one turn (keys in JCS order: content, role, toolcall_refs).
fn push_turn(out: &mut String, turn: &Turn) {
    out.push_str("{\"content\":");
    push_jcs_string(out, &turn.content);
    out.push_str(",\"role\":\"");
    out.push_str(turn.role.as_str());
    out.push('"');
    if let Some(refs) = &turn.toolcall_refs {
        out.push_str(",\"toolcall_refs\":[");
        for (i, id) in refs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_jcs_string(out, id);
        }
        out.push(']');
    }
    out.push('}');
}

/// One turn's block of the transcript (`role: content`).
fn push_block(out: &mut String, turn: &Turn) {
    out.push_str(turn.role.as_str());
    out.push_str(": ");
    out.push_str(&turn.content);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Role, content: &str, refs: Option<&[&str]>) -> Turn {
        Turn {
            role,
            content: content.into(),
            toolcall_refs: refs.map(|r| r.iter().map(|s| (*s).to_string()).collect()),
        }
    }

    /// The kept texts give the object `Object::chat` makes, turn after turn, whatever the turns
    /// hold (quotes, control characters, non-ASCII, empty ref lists), and after a reset.
    #[test]
    fn kept_chat_equals_the_chat_built_whole() -> Result<()> {
        let turns = [
            turn(Role::User, "begin \"quoted\" \\ \u{1}\tü 😀", None),
            turn(Role::Assistant, "", Some(&["toolcall:a", "toolcall:\"b\""])),
            turn(Role::Tool, "line\nline", Some(&[])),
            turn(Role::System, "x", Some(&["toolcall:c"])),
            turn(Role::User, "end", None),
        ];
        let mut kept = ChatText::default();
        for n in 0..=turns.len() {
            let mut now = turns[..n].to_vec();
            let built = kept.object("s\"1", &now.clone().into())?;
            let whole = Object::chat("s\"1", now.clone())?;
            assert_eq!(built.metadata_json(), whole.metadata_json(), "{n} turns");
            assert_eq!(built.object_hash(), whole.object_hash(), "{n} turns");
            // A tool call joining the last turn changes only what is not settled.
            if let Some(last) = now.last_mut() {
                last.toolcall_refs
                    .get_or_insert_with(Vec::new)
                    .push(format!("toolcall:late{n}"));
                let built = kept.object("s\"1", &now.clone().into())?;
                let whole = Object::chat("s\"1", now.clone())?;
                assert_eq!(
                    built.object_hash(),
                    whole.object_hash(),
                    "{n} turns, late ref"
                );
            }
        }
        // Fewer turns than settled (a session given other turns): rebuilt from the start.
        let short = turns[..1].to_vec();
        let built = kept.object("s\"1", &short.clone().into())?;
        assert_eq!(
            built.object_hash(),
            Object::chat("s\"1", short)?.object_hash()
        );
        Ok(())
    }
}
