//! Cuts a markdown report into parts under a size limit (GitHub: 65,536 characters per comment)
//! without breaking a code block or a `<details>` section: whole sections move to the next part;
//! a section too big for any part is closed and reopened as "(continued)".

/// Size of the header every part starts with, reserved up front.
const HEADER_RESERVE: usize = 120;
/// Room kept for the lines that close fences and sections at a cut.
const CLOSING_RESERVE: usize = 400;

/// GitHub's limit for one comment body.
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;

/// The first line of every part; forges find their comments by it.
pub const MARKER: &str = "<!-- fluxplan -->";

/// Splits `markdown` (which may start with the marker line) into parts of at most `limit`
/// characters, each starting with the marker and "part i of n" when there is more than one.
pub fn split(markdown: &str, limit: usize) -> Vec<String> {
    if markdown.chars().count() <= limit {
        return vec![markdown.to_string()];
    }
    let body = markdown.strip_prefix(MARKER).unwrap_or(markdown).trim_start_matches('\n');
    let budget = limit.saturating_sub(HEADER_RESERVE + CLOSING_RESERVE).max(1000);
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for unit in units(body) {
        if len(&current) + len(&unit) <= budget {
            current.push_str(&unit);
            continue;
        }
        if !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if len(&unit) <= budget {
            current = unit;
        } else {
            let mut pieces = split_unit(&unit, budget);
            current = pieces.pop().unwrap_or_default();
            parts.extend(pieces);
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            format!(
                "{MARKER}\n<!-- fluxplan-part {}/{n} -->\n_fluxplan plan, part {} of {n}_\n\n{part}",
                i + 1,
                i + 1
            )
        })
        .collect()
}

fn len(s: &str) -> usize {
    s.chars().count()
}

/// The fence a line opens or closes (```` ``` ````, ```` ```` ````...), if it is a fence line.
fn fence_of(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
    (ticks >= 3).then(|| &trimmed[..ticks])
}

/// Tracks open code fences and `<details>` sections line by line.
#[derive(Default, Clone)]
struct Structure {
    fence: Option<(String, String)>,
    details: Vec<String>,
}

impl Structure {
    fn feed(&mut self, line: &str) {
        if let Some((fence, _)) = &self.fence {
            if fence_of(line) == Some(fence.as_str()) && line.trim() == fence {
                self.fence = None;
            }
            return;
        }
        if let Some(fence) = fence_of(line) {
            self.fence = Some((fence.to_string(), line.trim_start().to_string()));
            return;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("<details") {
            self.details.push(line.to_string());
        }
        if trimmed.starts_with("</details>") {
            self.details.pop();
        }
    }

    fn balanced(&self) -> bool {
        self.fence.is_none() && self.details.is_empty()
    }

    /// Lines that close what is open, innermost first.
    fn closing(&self) -> String {
        let mut out = String::new();
        if let Some((fence, _)) = &self.fence {
            out.push_str(fence);
            out.push('\n');
        }
        for _ in &self.details {
            out.push_str("\n</details>\n");
        }
        out
    }

    /// Lines that reopen what was open, outermost first, marked as continued.
    fn reopening(&self) -> String {
        let mut out = String::new();
        for open in &self.details {
            out.push_str(&open.replacen("</summary>", " (continued)</summary>", 1));
            out.push_str("\n\n");
        }
        if let Some((_, opening)) = &self.fence {
            out.push_str(opening);
            out.push('\n');
        }
        out
    }
}

/// Top-level blocks: a run of lines ends where no fence and no section is open.
fn units(body: &str) -> Vec<String> {
    let mut units = Vec::new();
    let mut structure = Structure::default();
    let mut unit = String::new();
    for line in body.split_inclusive('\n') {
        structure.feed(line);
        unit.push_str(line);
        if structure.balanced() {
            units.push(std::mem::take(&mut unit));
        }
    }
    if !unit.is_empty() {
        units.push(unit);
    }
    units
}

/// Splits one oversized block line by line, closing and reopening fences and sections.
fn split_unit(unit: &str, budget: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut structure = Structure::default();
    let mut current = String::new();
    for line in unit.split_inclusive('\n') {
        for chunk in hard_wrap(line, budget / 2) {
            if len(&current) + len(&chunk) + len(&structure.closing()) > budget && !current.is_empty() {
                current.push_str(&structure.closing());
                pieces.push(std::mem::take(&mut current));
                current = structure.reopening();
            }
            structure.feed(&chunk);
            current.push_str(&chunk);
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// A line longer than `max` characters cut into lines of at most `max`.
fn hard_wrap(line: &str, max: usize) -> Vec<String> {
    if len(line) <= max {
        return vec![line.to_string()];
    }
    let chars: Vec<char> = line.trim_end_matches('\n').chars().collect();
    chars.chunks(max).map(|c| c.iter().collect::<String>() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(part: &str) -> bool {
        let mut s = Structure::default();
        part.lines().for_each(|l| s.feed(l));
        s.balanced()
    }

    #[test]
    fn small_reports_stay_whole() {
        assert_eq!(split("<!-- fluxplan -->\nhello\n", 100), vec!["<!-- fluxplan -->\nhello\n"]);
    }

    #[test]
    fn sections_move_whole_and_big_ones_are_continued() {
        let mut md = String::from("<!-- fluxplan -->\nintro\n\n");
        for i in 0..30 {
            md.push_str(&format!("<details><summary>section {i}</summary>\n\n```diff\n"));
            for j in 0..(if i == 7 { 400 } else { 20 }) {
                md.push_str(&format!("+ line {i}-{j} with some padding text\n"));
            }
            md.push_str("```\n\n</details>\n");
        }
        let parts = split(&md, 5000);
        assert!(parts.len() > 3);
        for (i, part) in parts.iter().enumerate() {
            assert!(part.chars().count() <= 5000, "part {i} is {} long", part.len());
            assert!(part.starts_with(MARKER), "part {i}");
            assert!(part.contains(&format!("part {} of {}", i + 1, parts.len())));
            assert!(balanced(part), "part {i} leaves a fence or section open:\n{part}");
        }
        let all = parts.join("");
        for i in 0..30 {
            assert!(all.contains(&format!("+ line {i}-0 with")), "section {i} lost");
        }
        assert!(all.contains("section 7 (continued)"));
    }
}
