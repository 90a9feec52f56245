//! The markdown comment as HTML, for the run page. The markdown holds text from pull requests
//! (paths, names, YAML): escaped for markdown already, it is treated as hostile here all the
//! same. Raw HTML never passes through: the few tags the comment itself writes (collapsible
//! sections, bold, code) are written anew from an allow-list, without attributes; everything
//! else shows as text. Links go only to http(s) or relative addresses.

use pulldown_cmark::{Alignment, CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The tags the comment's template writes as raw HTML (templates/plan.md.j2), with no attributes.
const ALLOWED_TAGS: [&str; 4] = ["details", "summary", "b", "code"];
/// `</summary>`, the longest of them.
const MAX_TAG_LEN: usize = 10;

/// The comment's markdown as safe HTML: tables, strikethrough, collapsible sections, diff lines
/// marked `diff-add`, `diff-del`, `diff-hunk` or `diff-file`.
pub fn markdown_to_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut events = Vec::new();
    let mut open_tags: Vec<&'static str> = Vec::new();
    // For each link or image open: whether it was kept (an unsafe one shows as its text).
    let mut links: Vec<bool> = Vec::new();
    // The text of the diff block being read, coloured when it ends.
    let mut diff: Option<String> = None;
    let mut table = Table::default();
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => allowed_html(&raw, &mut open_tags, &mut events),
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(lang))) if lang.as_ref() == "diff" => {
                diff = Some(String::new());
                events.push(Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(lang))));
            }
            Event::Text(text) if diff.is_some() => diff.get_or_insert_default().push_str(&text),
            Event::End(TagEnd::CodeBlock) if diff.is_some() => {
                coloured_diff(&diff.take().unwrap_or_default(), &mut events);
                events.push(Event::End(TagEnd::CodeBlock));
            }
            Event::Start(Tag::Link { link_type, dest_url, title, id })
            | Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
                let keep = safe_url(&dest_url);
                links.push(keep);
                if keep {
                    // An image becomes a link to it: the page loads nothing from elsewhere.
                    let link_type = if link_type == LinkType::Email { LinkType::Inline } else { link_type };
                    events.push(Event::Start(Tag::Link { link_type, dest_url, title, id }));
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if links.pop().unwrap_or(false) {
                    events.push(Event::End(TagEnd::Link));
                }
            }
            Event::Start(Tag::Table(alignments)) => {
                table = Table { alignments, ..Table::default() };
                events.push(Event::Html(CowStr::from("<table>")));
            }
            Event::Start(Tag::TableHead) => {
                (table.head, table.cell) = (true, 0);
                events.push(Event::Html(CowStr::from("<thead><tr>")));
            }
            Event::End(TagEnd::TableHead) => {
                table.head = false;
                events.push(Event::Html(CowStr::from("</tr></thead><tbody>\n")));
            }
            Event::Start(Tag::TableRow) => {
                table.cell = 0;
                events.push(Event::Html(CowStr::from("<tr>")));
            }
            Event::End(TagEnd::TableRow) => events.push(Event::Html(CowStr::from("</tr>\n"))),
            Event::Start(Tag::TableCell) => events.push(Event::Html(CowStr::from(table.open_cell()))),
            Event::End(TagEnd::TableCell) => {
                events.push(Event::Html(CowStr::from(if table.head { "</th>" } else { "</td>" })));
                table.cell += 1;
            }
            Event::End(TagEnd::Table) => events.push(Event::Html(CowStr::from("</tbody></table>\n"))),
            // Parsed only with options this page does not enable; dropped should one ever appear.
            Event::InlineMath(text) | Event::DisplayMath(text) | Event::FootnoteReference(text) => {
                events.push(Event::Text(text))
            }
            other => events.push(other),
        }
    }
    for tag in open_tags.into_iter().rev() {
        events.push(Event::Html(CowStr::from(format!("</{tag}>"))));
    }
    let mut html = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html
}

/// The table being written. Its cells are aligned by class, not by pulldown-cmark's `style`
/// attributes, which the page's Content-Security-Policy refuses.
#[derive(Default)]
struct Table {
    alignments: Vec<Alignment>,
    head: bool,
    cell: usize,
}

impl Table {
    fn open_cell(&self) -> String {
        let element = if self.head { "th" } else { "td" };
        match self.alignments.get(self.cell) {
            Some(Alignment::Left) => format!("<{element} class=\"left\">"),
            Some(Alignment::Center) => format!("<{element} class=\"center\">"),
            Some(Alignment::Right) => format!("<{element} class=\"right\">"),
            _ => format!("<{element}>"),
        }
    }
}

/// Raw HTML from the markdown: allowed tags without attributes are written anew (closing tags
/// only for what is open), comments dropped, anything else becomes text.
fn allowed_html<'a>(raw: &str, open: &mut Vec<&'static str>, out: &mut Vec<Event<'a>>) {
    let mut text = String::new();
    let mut rest = raw;
    while let Some(at) = rest.find('<') {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(end) = rest.strip_prefix("<!--").and_then(|r| r.find("-->")) {
            rest = &rest[4 + end + 3..];
            continue;
        }
        // An allowed tag is short: look no further for its `>` (a long line of `<` stays linear).
        let end = rest.bytes().take(MAX_TAG_LEN).position(|b| b == b'>');
        let tag = end.map(|end| &rest[1..end]).and_then(|inner| {
            let (closing, name) = inner.strip_prefix('/').map_or((false, inner), |name| (true, name));
            let name = ALLOWED_TAGS.into_iter().find(|tag| tag.eq_ignore_ascii_case(name))?;
            Some((closing, name, inner.len() + 2))
        });
        match tag {
            Some((false, name, len)) => {
                flush_text(&mut text, out);
                open.push(name);
                out.push(Event::Html(CowStr::from(format!("<{name}>"))));
                rest = &rest[len..];
            }
            Some((true, name, len)) => {
                // Only the innermost open tag closes: a stray closing tag cannot end the page's own.
                if open.last() == Some(&name) {
                    flush_text(&mut text, out);
                    open.pop();
                    out.push(Event::Html(CowStr::from(format!("</{name}>"))));
                }
                rest = &rest[len..];
            }
            None => {
                text.push('<');
                rest = &rest[1..];
            }
        }
    }
    text.push_str(rest);
    flush_text(&mut text, out);
}

/// Text between tags in raw HTML: character references (`&lt;`, how the comment escapes text
/// there) are kept as such; every other `&`, `<`, `>` and quote is escaped.
fn flush_text<'a>(text: &mut String, out: &mut Vec<Event<'a>>) {
    if text.is_empty() {
        return;
    }
    let mut html = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        match c {
            '&' if is_character_reference(&text[i..]) => html.push('&'),
            '&' => html.push_str("&amp;"),
            '<' => html.push_str("&lt;"),
            '>' => html.push_str("&gt;"),
            '"' => html.push_str("&quot;"),
            '\'' => html.push_str("&#39;"),
            c => html.push(c),
        }
    }
    text.clear();
    out.push(Event::Html(CowStr::from(html)));
}

/// `&name;`, `&#123;` or `&#x1F;` at the start of `text`.
fn is_character_reference(text: &str) -> bool {
    let body = &text[1..];
    let Some(end) = body.find(';').filter(|&end| end > 0 && end <= 32) else { return false };
    let name = &body[..end];
    if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
        !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
    } else if let Some(decimal) = name.strip_prefix('#') {
        !decimal.is_empty() && decimal.chars().all(|c| c.is_ascii_digit())
    } else {
        name.chars().all(|c| c.is_ascii_alphanumeric())
    }
}

/// A diff's lines, each in a span whose class says what it is; the text is escaped as text.
fn coloured_diff<'a>(diff: &str, out: &mut Vec<Event<'a>>) {
    for line in diff.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "diff-file"
        } else if line.starts_with('+') {
            "diff-add"
        } else if line.starts_with('-') {
            "diff-del"
        } else if line.starts_with("@@") {
            "diff-hunk"
        } else {
            out.push(Event::Text(CowStr::from(line.to_string())));
            continue;
        };
        let (content, newline) = line.strip_suffix('\n').map_or((line, ""), |l| (l, "\n"));
        out.push(Event::Html(CowStr::from(format!("<span class=\"{class}\">"))));
        out.push(Event::Text(CowStr::from(content.to_string())));
        out.push(Event::Html(CowStr::from("</span>")));
        if !newline.is_empty() {
            out.push(Event::Text(CowStr::from(newline)));
        }
    }
}

/// True for http(s) addresses and relative ones. Browsers ignore tabs, newlines and leading
/// spaces in a scheme (`java\tscript:`): an address holding any whitespace or control character
/// is refused outright.
fn safe_url(url: &str) -> bool {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let scheme_end = url.find(':');
    let path_start = url.find(['/', '?', '#']);
    match (scheme_end, path_start) {
        (Some(colon), Some(slash)) if slash < colon => true,
        (Some(colon), _) => matches!(url[..colon].to_ascii_lowercase().as_str(), "http" | "https"),
        (None, _) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_from_the_markdown_is_text() {
        let html = markdown_to_html(
            "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)> there\n\n<details open><summary onclick=x>s</summary>\n\n<b >x</b>\n",
        );
        assert!(html.contains("&lt;b &gt;x"), "{html}");
        assert!(
            !html.contains("<script") && !html.contains("<img") && !html.contains("<details open"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{html}");
    }

    #[test]
    fn the_comments_own_tags_are_kept_and_balanced() {
        let html = markdown_to_html(
            "<!-- fluxplan -->\n<details><summary><b>flux-system/apps</b> &lt;x&gt; &amp; AT&T</summary>\n\n- a\n\n</details>\n</details>\n<details><summary>open",
        );
        assert!(!html.contains("<!--"), "{html}");
        assert!(
            html.contains("<details><summary><b>flux-system/apps</b> &lt;x&gt; &amp; AT&amp;T</summary>"),
            "{html}"
        );
        assert_eq!(html.matches("<details>").count(), html.matches("</details>").count(), "{html}");
        assert_eq!(html.matches("<summary>").count(), html.matches("</summary>").count(), "{html}");
    }

    #[test]
    fn only_http_and_relative_links_are_links() {
        let html = markdown_to_html(
            "[a](javascript:alert(1)) [b](JavaScript:x) [c](data:text/html,x) [d](https://example.com/x) \
             [e](/runs/1?token=t) [f](<java\tscript:x>) ![g](https://example.com/i.png) <mailto:x@example.com>",
        );
        assert!(!html.to_lowercase().contains("javascript") && !html.contains("data:"), "{html}");
        assert!(html.contains("<a href=\"https://example.com/x\">d</a>"), "{html}");
        assert!(html.contains("<a href=\"/runs/1?token=t\">e</a>"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com/i.png\">g</a>") && !html.contains("<img"),
            "{html}"
        );
        assert!(!html.contains("href=\"mailto"), "{html}");
    }

    #[test]
    fn diff_lines_are_marked() {
        let html = markdown_to_html("```diff\n--- base\n+++ head\n@@ -1 +1 @@\n-a: <1>\n+a: 2\n b\n```\n");
        assert!(html.contains("<span class=\"diff-del\">-a: &lt;1&gt;</span>\n"), "{html}");
        assert!(html.contains("<span class=\"diff-add\">+a: 2</span>\n"), "{html}");
        assert!(html.contains("<span class=\"diff-file\">--- base</span>"), "{html}");
        assert!(html.contains("<span class=\"diff-hunk\">@@ -1 +1 @@</span>"), "{html}");
        assert!(html.contains("\n b\n</code></pre>"), "{html}");
    }

    #[test]
    fn tables_render_as_tables() {
        let html = markdown_to_html("| a | b |\n|:--|--:|\n| `x` | ~~z~~ |\n");
        assert!(html.contains("<table>") && html.contains("<del>z</del>"), "{html}");
        assert!(html.contains("<th class=\"left\">a</th><th class=\"right\">b</th>"), "{html}");
        assert!(!html.contains("style="), "{html}");
    }
}
