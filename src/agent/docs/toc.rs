//! Table-of-contents selection: which sections `table_of_contents` and
//! `section_table_of_contents` show under the `maxHeaders` limit, and when a section's
//! `subsection_count` is shown.
//!
//! Uses `markdown`, `results`.
//!
//! The limit is applied as the original does:
//! 1. take whole levels, shallowest first, while the running total stays within the limit;
//!    level 1 is always taken;
//! 2. phase 1: if fewer than 3 are taken and there are at least 3 candidates, take all of the
//!    next deeper level, even past the limit;
//! 3. phase 2: while under the limit, go through the parents at the deepest taken level, largest
//!    `character_count` first, and take each one's direct children at the next level when all
//!    of them fit;
//! 4. keep the given order.

use std::collections::HashMap;

use super::markdown::{SectionInfo, parent_id};
use super::results::Section;

/// The instructions added when some shown section has hidden subsections
/// (`INSTRUCTIONS_FOR_HIDDEN_SUBSECTIONS`).
pub const HIDDEN_SUBSECTIONS_INSTRUCTIONS: &str = "To explore deeper subsections under a specific subsection that are not currently shown (the \"subsection_count\" is > 0), use the section_table_of_contents tool with the section IDs of interest.";

/// The fewest sections a table of contents should show before phase 1 adds a level.
const MINIMUM_VIABLE_HEADER_COUNT: usize = 3;

/// Selects the sections to show from `candidates` under `max_headers`, in the given order.
pub fn limit_headers<'a>(
    candidates: &[&'a SectionInfo],
    max_headers: usize,
) -> Vec<&'a SectionInfo> {
    if max_headers < 1 {
        return candidates.to_vec();
    }
    let mut levels: Vec<u8> = candidates.iter().map(|s| s.level).collect();
    levels.sort_unstable();
    levels.dedup();
    let of_level = |level: u8| {
        candidates
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.level == level)
            .map(|(i, _)| i)
    };
    let mut included = Included::new(candidates.len());

    for &level in &levels {
        let count = of_level(level).count();
        if level == 1 || included.len() + count <= max_headers {
            of_level(level).for_each(|i| included.add(i));
        } else {
            break;
        }
    }

    // Phase 1: minimum viability.
    if included.len() < MINIMUM_VIABLE_HEADER_COUNT
        && candidates.len() >= MINIMUM_VIABLE_HEADER_COUNT
    {
        let deepest = included.deepest_level(candidates);
        if let Some(&next) = levels.iter().find(|&&l| l > deepest) {
            of_level(next).for_each(|i| included.add(i));
        }
    }

    // Phase 2: greedy filling, one level deeper, whole groups of children only.
    if included.len() < max_headers {
        let deepest = included.deepest_level(candidates);
        if let Some(&next) = levels.iter().find(|&&l| l > deepest) {
            let mut groups: Vec<(usize, Vec<usize>)> = included
                .order
                .iter()
                .filter(|&&p| candidates[p].level == deepest)
                .filter_map(|&p| {
                    let children: Vec<usize> = of_level(next)
                        .filter(|&c| {
                            parent_id(&candidates[c].id) == Some(candidates[p].id.as_str())
                        })
                        .collect();
                    (!children.is_empty()).then_some((p, children))
                })
                .collect();
            // Stable, like Array.prototype.sort: equal sizes keep their order.
            groups.sort_by(|a, b| {
                candidates[b.0]
                    .character_count
                    .cmp(&candidates[a.0].character_count)
            });
            for (_, children) in groups {
                if included.len() + children.len() <= max_headers {
                    children.into_iter().for_each(|c| included.add(c));
                }
            }
        }
    }

    candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| included.contains(*i))
        .map(|(_, s)| *s)
        .collect()
}

/// Turns selected sections into result sections, showing `subsection_count` only for sections
/// some of whose direct children are not among `shown`.
pub fn with_conditional_counts(shown: &[&SectionInfo]) -> Vec<Section> {
    let mut visible_children: HashMap<&str, usize> = HashMap::new();
    for s in shown {
        if let Some(parent) = parent_id(&s.id) {
            *visible_children.entry(parent).or_default() += 1;
        }
    }
    shown
        .iter()
        .map(|s| {
            let visible = visible_children.get(s.id.as_str()).copied().unwrap_or(0);
            let hidden = s.subsection_count > 0 && visible != s.subsection_count;
            Section {
                id: s.id.clone(),
                title: s.title.clone(),
                level: s.level,
                character_count: s.character_count,
                subsection_count: hidden.then_some(s.subsection_count),
            }
        })
        .collect()
}

/// The instructions to add when some of `sections` shows a `subsection_count`.
pub fn instructions_for(sections: &[Section]) -> Option<String> {
    sections
        .iter()
        .any(|s| s.subsection_count.is_some_and(|n| n >= 1))
        .then(|| HIDDEN_SUBSECTIONS_INSTRUCTIONS.to_owned())
}

/// The direct children of each requested parent, grouped by parent in request order, each
/// section once.
pub fn direct_children<'a>(all: &'a [SectionInfo], parents: &[String]) -> Vec<&'a SectionInfo> {
    let mut out: Vec<&SectionInfo> = Vec::new();
    for parent in parents {
        for s in all {
            if parent_id(&s.id) == Some(parent.as_str()) && !out.iter().any(|o| o.id == s.id) {
                out.push(s);
            }
        }
    }
    out
}

/// An insertion-ordered set of candidate indices.
struct Included {
    member: Vec<bool>,
    order: Vec<usize>,
}

impl Included {
    fn new(n: usize) -> Self {
        Self {
            member: vec![false; n],
            order: Vec::new(),
        }
    }

    fn add(&mut self, i: usize) {
        if !self.member[i] {
            self.member[i] = true;
            self.order.push(i);
        }
    }

    fn contains(&self, i: usize) -> bool {
        self.member[i]
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    fn deepest_level(&self, candidates: &[&SectionInfo]) -> u8 {
        self.order
            .iter()
            .map(|&i| candidates[i].level)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::markdown::MarkdownDocument;
    use super::*;

    fn select(text: &str, max_depth: u8, max_headers: usize) -> Vec<Section> {
        let doc = MarkdownDocument::parse(text);
        let candidates: Vec<&SectionInfo> = doc
            .sections()
            .iter()
            .filter(|s| s.level <= max_depth)
            .collect();
        with_conditional_counts(&limit_headers(&candidates, max_headers))
    }

    fn ids(sections: &[Section]) -> Vec<&str> {
        sections.iter().map(|s| s.id.as_str()).collect()
    }

    /// One level-1 section per entry of `subs`, with `subs[i]` level-2 children, each of those
    /// with `grand` level-3 children; all level-2 sections have the same size.
    fn outline(subs: &[usize], grand: usize) -> String {
        let mut s = String::new();
        for (i, &n) in subs.iter().enumerate() {
            s.push_str(&format!("# T{i}\n"));
            for j in 0..n {
                s.push_str(&format!("## S{i}.{j}\ntext\n"));
                for k in 0..grand {
                    s.push_str(&format!("### G{i}.{j}.{k}\n"));
                }
            }
        }
        s.trim_end().to_owned()
    }

    #[test]
    fn level_one_is_kept_over_the_limit() {
        let text = (1..=30)
            .map(|i| format!("# H{i}\n## sub\n"))
            .collect::<String>();
        let shown = select(&text, 3, 10);
        assert_eq!(shown.len(), 30);
        assert!(
            shown
                .iter()
                .all(|s| s.level == 1 && s.subsection_count == Some(1))
        );
        assert!(instructions_for(&shown).is_some());
    }

    #[test]
    fn whole_levels_fit_under_the_default_limit() {
        // 3 + 20 = 23 fit in 25; the 60 level-3 headers would not, and no parent's group of 3
        // fits in the 2 spare slots.
        let text = outline(&[7, 7, 6], 3);
        let shown = select(&text, 3, 25);
        assert_eq!(shown.len(), 23);
        assert!(shown.iter().all(|s| s.level <= 2));
    }

    #[test]
    fn phase_one_adds_the_next_level_past_the_limit() {
        // One level-1 section with 40 children: the base takes 1 (< 3), phase 1 adds all 40.
        let text = outline(&[40], 0);
        let shown = select(&text, 3, 25);
        assert_eq!(shown.len(), 41);
        assert_eq!(shown[0].subsection_count, None);
        // Two level-1 sections with 20 children each.
        let shown = select(&outline(&[20, 20], 0), 3, 25);
        assert_eq!(shown.len(), 42);
        // Not when the document has fewer than 3 headers.
        assert_eq!(select("# A\n# B", 3, 25).len(), 2);
        // Not when the base already has 3.
        assert_eq!(select(&outline(&[30, 0, 0], 0), 3, 25).len(), 3);
        // No level 1 at all: the base takes nothing, phase 1 takes the shallowest level.
        let text = (1..=30).map(|i| format!("## H{i}\n")).collect::<String>();
        assert_eq!(select(&text, 3, 25).len(), 30);
    }

    #[test]
    fn phase_two_fills_by_character_count_all_or_nothing() {
        // 3 + 15 = 18 taken; 7 slots left. Level-3 groups: 3 children under each level-2.
        // Parents sorted by size: the padded ones first. Two groups of 3 fit (24), the third
        // does not (27 > 25), and no group of 1 exists, so 24.
        let text = outline(&[5, 5, 5], 3);
        let doc = MarkdownDocument::parse(&text);
        let candidates: Vec<&SectionInfo> = doc.sections().iter().collect();
        let shown = limit_headers(&candidates, 25);
        assert_eq!(shown.len(), 24);
        let level3: Vec<&str> = shown
            .iter()
            .filter(|s| s.level == 3)
            .map(|s| s.id.as_str())
            .collect();
        // All level-2 sections are the same size: the first two parents in order win.
        assert_eq!(
            level3,
            ["1/1/1", "1/1/2", "1/1/3", "1/2/1", "1/2/2", "1/2/3"]
        );
        let counts = with_conditional_counts(&shown);
        assert_eq!(
            counts
                .iter()
                .find(|s| s.id == "1/1")
                .map(|s| s.subsection_count),
            Some(None)
        );
        assert_eq!(
            counts
                .iter()
                .find(|s| s.id == "1/3")
                .map(|s| s.subsection_count),
            Some(Some(3))
        );
    }

    #[test]
    fn phase_two_prefers_larger_parents_and_skips_groups_that_do_not_fit() {
        let text = "# Root\n## Small\n### s1\n## Big\nlots of text here to make it big\nmore\nmore\n### b1\n### b2\n## Mid\nsome text\n### m1\n";
        let doc = MarkdownDocument::parse(text);
        let candidates: Vec<&SectionInfo> = doc.sections().iter().collect();
        // Base: 1 + 3 = 4. Limit 6: Big's 2 children fit (6); Mid's and Small's do not.
        let shown: Vec<&str> = limit_headers(&candidates, 6)
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(shown, ["1", "1/1", "1/2", "1/2/1", "1/2/2", "1/3"]);
        // Limit 5: Big's group does not fit, Mid's (largest remaining) does.
        let shown: Vec<&str> = limit_headers(&candidates, 5)
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(shown, ["1", "1/1", "1/2", "1/3", "1/3/1"]);
    }

    #[test]
    fn depth_limit_comes_first() {
        let text = outline(&[2], 2);
        let shown = select(&text, 2, 25);
        assert_eq!(ids(&shown), ["1", "1/1", "1/2"]);
        assert_eq!(shown[1].subsection_count, Some(2));
        assert_eq!(shown[0].subsection_count, None);
    }

    #[test]
    fn counts_are_conditional() {
        let shown = select("# Only\nno children", 3, 25);
        assert_eq!(shown[0].subsection_count, None);
        assert_eq!(instructions_for(&shown), None);
    }

    proptest::proptest! {
        #[test]
        fn selection_keeps_order_level_one_and_honest_counts(
            levels in proptest::collection::vec(1u8..=4, 0..60),
            max_headers in 1usize..30,
        ) {
            let text: String = levels
                .iter()
                .enumerate()
                .map(|(i, &l)| format!("{} H{i}\nbody {i}\n", "#".repeat(usize::from(l))))
                .collect();
            let doc = MarkdownDocument::parse(&text);
            let candidates: Vec<&SectionInfo> = doc.sections().iter().collect();
            let shown = limit_headers(&candidates, max_headers);
            // A subsequence of the candidates, in their order.
            let mut rest = candidates.iter();
            for s in &shown {
                proptest::prop_assert!(rest.any(|c| c.id == s.id));
            }
            // Every level-1 section is shown.
            let level1 = candidates.iter().filter(|c| c.level == 1).count();
            proptest::prop_assert_eq!(shown.iter().filter(|s| s.level == 1).count(), level1);
            // Within the limit, unless level 1 or phase 1 (a whole level) went past it.
            if shown.len() > max_headers {
                let deepest = shown.iter().map(|s| s.level).max().unwrap_or(0);
                let whole_levels = (1..=deepest)
                    .all(|l| shown.iter().filter(|s| s.level == l).count()
                        == candidates.iter().filter(|c| c.level == l).count());
                proptest::prop_assert!(whole_levels);
            }
            // A count is shown exactly when some direct child is hidden.
            let counted = with_conditional_counts(&shown);
            for s in &counted {
                let children = candidates.iter().filter(|c| parent_id(&c.id) == Some(s.id.as_str()));
                let hidden = children.clone().any(|c| !shown.iter().any(|x| x.id == c.id));
                proptest::prop_assert_eq!(s.subsection_count.is_some(), hidden);
                if let Some(n) = s.subsection_count {
                    proptest::prop_assert_eq!(n, children.count());
                }
            }
        }
    }

    #[test]
    fn children_are_grouped_by_requested_parent() {
        let doc = MarkdownDocument::parse("# A\n## A1\n## A2\n# B\n## B1\n### B1a");
        let ids: Vec<&str> = direct_children(doc.sections(), &["2".into(), "1".into(), "2".into()])
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(ids, ["2/1", "1/1", "1/2"]);
    }
}
