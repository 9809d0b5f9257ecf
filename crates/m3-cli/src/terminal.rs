//! Text from servers and stores, made safe to print on a terminal.
//!
//! A server chooses a round's message, property names, titles, defaults and URL, and a
//! store hands back whatever was written into it. Printed raw, an ESC sequence could erase
//! or rewrite a line (`\x1b[2K\r` followed by another URL), set the window title (OSC), ring
//! the bell, or a bidi override could reverse what follows. So every such piece goes through
//! [`escape`] before it is composed into a line, and every line m3 writes for people goes
//! through [`escape_output`] before it reaches stdout, stderr or the form: the first makes
//! each control character visible (`\x1b`, `\r`, `\n`, `\u{202e}`), the second is the same
//! rule that keeps only m3's own line breaks and colour codes (a second guard for a piece
//! that missed the first). JSON output needs neither: serde writes controls as `\u001b`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The colour sequences m3 writes itself (status words; see `Output::status`): the only
/// escape sequences [`escape_output`] lets through.
pub(crate) const OWN_COLOURS: [&str; 4] = ["\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"];

/// `text` with every control character shown as text: C0 controls, DEL and C1 controls
/// (`\x1b`, `\x07`, `\x7f`, `\u{9b}`, with `\n`, `\r`, `\t` by their usual names), the bidi
/// embeddings, overrides, isolates and marks (`\u{202e}`, ...) and the Unicode line and
/// paragraph separators. Anything else, including a backslash, is kept as it is.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_visible(&mut out, c);
    }
    Cow::Owned(out)
}

/// A whole block of m3's own output: like [`escape`], but line breaks (`\n`) and the colour
/// codes of [`OWN_COLOURS`] are kept.
pub(crate) fn escape_output(text: &str) -> Cow<'_, str> {
    let risky = |c: char| c != '\n' && needs_escape(c);
    if !text.chars().any(risky) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(colour) = OWN_COLOURS.iter().find(|colour| rest.starts_with(**colour)) {
            out.push_str(colour);
            rest = &rest[colour.len()..];
            continue;
        }
        if c == '\n' {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// `host: HOST` for a URL-mode request: the host the URL really leads to (after any
/// userinfo, in the ASCII form the `url` crate gives), and its Unicode form when that
/// differs (`host: xn--80ak6aa92e.com (Unicode: аррӏе.com)`), so a look-alike or a host
/// hidden behind `user@` is plain. A URL that does not parse says so.
pub(crate) fn url_host_line(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return "host: none (not a valid URL)".to_owned();
    };
    let Some(host) = parsed.host_str() else {
        return format!("host: none ({} URL)", escape(parsed.scheme()));
    };
    let (unicode, decoded) = idna::domain_to_unicode(host);
    if decoded.is_ok() && unicode.as_str() != host {
        format!("host: {} (Unicode: {})", escape(host), escape(&unicode))
    } else {
        format!("host: {}", escape(host))
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_bidi_or_separator(c)
}

/// Bidi marks, embeddings, overrides and isolates; the line and paragraph separators.
fn is_bidi_or_separator(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}'
    )
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // C0 and DEL: `\x1b`.
        '\0'..='\u{1f}' | '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        // C1 and the bidi/separator characters: `\u{9b}`, `\u{202e}`.
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "Enter the delivery address: 1 Main Street, Pune ✓ \\x1b";
        assert!(matches!(escape(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(escape_output(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn c0_controls_del_and_c1_controls_are_shown() {
        assert_eq!(escape("a\x1b[2Kb"), "a\\x1b[2Kb");
        assert_eq!(escape("\r\n\t"), "\\r\\n\\t");
        assert_eq!(
            escape("bell\x07 nul\0 del\x7f"),
            "bell\\x07 nul\\x00 del\\x7f"
        );
        assert_eq!(escape("csi\u{9b}31m nel\u{85}"), "csi\\u{9b}31m nel\\u{85}");
        // OSC 8 hyperlink and OSC 0 window title.
        assert_eq!(
            escape("\x1b]8;;https://evil.example\x1b\\x\x1b]8;;\x1b\\"),
            "\\x1b]8;;https://evil.example\\x1b\\x\\x1b]8;;\\x1b\\"
        );
        assert_eq!(escape("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
    }

    #[test]
    fn bidi_controls_and_separators_are_shown() {
        assert_eq!(escape("pay\u{202e}lmth.exe"), "pay\\u{202e}lmth.exe");
        assert_eq!(
            escape("\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{061c}"),
            "\\u{2066}\\u{2067}\\u{2068}\\u{2069}\\u{200e}\\u{200f}\\u{61c}"
        );
        assert_eq!(escape("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}");
    }

    #[test]
    fn the_spoofed_url_of_the_issue_shows_both_urls() {
        let url = "https://evil.example/steal\x1b[2K\rhttps://accounts.example/login";
        assert_eq!(
            escape(url),
            "https://evil.example/steal\\x1b[2K\\rhttps://accounts.example/login"
        );
        assert_eq!(url_host_line(url), "host: evil.example");
    }

    #[test]
    fn output_keeps_line_breaks_and_only_m3_s_own_colours() {
        let text = "status \x1b[32mcompleted\x1b[0m\nnext\x1b[8mhidden\x1b[0m\r";
        assert_eq!(
            escape_output(text),
            "status \x1b[32mcompleted\x1b[0m\nnext\\x1b[8mhidden\x1b[0m\\r"
        );
    }

    #[test]
    fn escaping_twice_changes_nothing_more() {
        let once = escape("x\x1b]0;t\x07\u{202e}").into_owned();
        assert_eq!(escape(&once), once);
        assert_eq!(escape_output(&once), once);
    }

    #[test]
    fn url_hosts_are_explicit() {
        assert_eq!(
            url_host_line("https://accounts.example@evil.example/login"),
            "host: evil.example"
        );
        assert_eq!(
            url_host_line("https://xn--80ak6aa92e.com/"),
            "host: xn--80ak6aa92e.com (Unicode: \u{0430}\u{0440}\u{0440}\u{04cf}\u{0435}.com)"
        );
        // The url crate gives the ASCII form of a Unicode host.
        assert_eq!(
            url_host_line("https://\u{0430}\u{0440}\u{0440}\u{04cf}\u{0435}.com/"),
            "host: xn--80ak6aa92e.com (Unicode: \u{0430}\u{0440}\u{0440}\u{04cf}\u{0435}.com)"
        );
        assert_eq!(url_host_line("https://127.0.0.1:8/x"), "host: 127.0.0.1");
        assert_eq!(url_host_line("not a url"), "host: none (not a valid URL)");
        assert_eq!(
            url_host_line("mailto:a@b.example"),
            "host: none (mailto URL)"
        );
    }
}
