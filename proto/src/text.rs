//! Text from the other side of the wire, made safe to show on a terminal.
//!
//! A plugin controls much of what its host prints: its gRPC error messages, its log lines, what
//! it prints before the handshake, its stderr, the names its server reflection lists, the
//! address it announces. A terminal *acts* on some characters instead of showing them: an
//! escape sequence can set the window title (`ESC ] 0 ;`), write the operator's clipboard
//! (OSC 52), clear the screen, move the cursor or ask the terminal to answer into its own
//! input; C1 controls (`U+009B` is CSI) do the same on terminals that accept them; a carriage
//! return or backspace overwrites what was shown; bidirectional overrides make text read
//! differently from what it is; a newline inside a one-line message forges a line of the
//! host's own.
//!
//! [`escape`] (one line) and [`escape_lines`] (newlines kept) show each such character as
//! text instead — `\x1b`, `\r`, `\n`, `\u{202e}` — and leave everything else, tabs included,
//! as it is. Their output contains no character they escape, so escaping twice changes
//! nothing: a host may escape at every layer without the layers knowing of each other.
//!
//! ```
//! use tether_proto::text;
//!
//! let title = "ok\u{1b}]0;owned\u{7}";
//! assert_eq!(text::escape(title).to_string(), r"ok\x1b]0;owned\x07");
//! assert_eq!(text::escape_lines("a\nb\rc").to_string(), "a\nb\\rc");
//! ```

use std::borrow::Cow;
use std::fmt;

/// Text shown with every character a terminal would act on escaped: made by [`escape`] or
/// [`escape_lines`], written by its `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escaped<'a> {
    text: &'a str,
    keep_newlines: bool,
}

/// `text` as one line: every control character (C0 but tab, DEL, C1), every bidirectional
/// formatting character and the line and paragraph separators are escaped, newlines included.
#[must_use]
pub fn escape(text: &str) -> Escaped<'_> {
    Escaped {
        text,
        keep_newlines: false,
    }
}

/// `text` as lines: as [`escape`], but a newline (`\n`) stays a newline.
#[must_use]
pub fn escape_lines(text: &str) -> Escaped<'_> {
    Escaped {
        text,
        keep_newlines: true,
    }
}

impl Escaped<'_> {
    /// The escaped text, borrowed when nothing needed escaping.
    #[must_use]
    pub fn to_cow(&self) -> Cow<'_, str> {
        if self.text.chars().any(|c| self.escapes(c)) {
            Cow::Owned(self.to_string())
        } else {
            Cow::Borrowed(self.text)
        }
    }

    fn escapes(&self, c: char) -> bool {
        is_acted_on(c) && !(self.keep_newlines && c == '\n')
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.text;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| self.escapes(c)) {
            f.write_str(&rest[..at])?;
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                c if u32::from(c) < 0x80 => write!(f, "\\x{:02x}", u32::from(c))?,
                c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// Whether a terminal may act on `c` instead of showing it: C0 controls but tab, DEL, C1
/// controls, the bidirectional formatting characters (embeddings, overrides, isolates and
/// marks) and the line and paragraph separators.
#[must_use]
pub fn is_acted_on(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x08'
            | '\n'..='\x1f'
            | '\x7f'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn terminal_controls_are_shown_as_text() {
        let cases = [
            ("\u{1b}]0;title\u{7}", r"\x1b]0;title\x07"),
            ("\u{1b}]52;c;aGk=\u{7}", r"\x1b]52;c;aGk=\x07"),
            ("\u{1b}[2J\u{1b}[H", r"\x1b[2J\x1b[H"),
            ("\u{9b}6n", r"\u{9b}6n"),
            (
                "a\u{202e}b\u{2066}c\u{200f}",
                r"a\u{202e}b\u{2066}c\u{200f}",
            ),
            ("over\rwrite\u{8}", r"over\rwrite\x08"),
            ("a\nb", r"a\nb"),
            ("\u{7f}\u{0}\u{2028}", r"\x7f\x00\u{2028}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape(raw).to_string(), shown, "{raw:?}");
        }
    }

    #[test]
    fn tabs_and_printable_text_of_any_script_stay_as_they_are() {
        for text in ["a\tb", "héllo wörld", "日本語", "emoji 👩‍💻", r"C:\path\x1b"] {
            assert_eq!(escape(text).to_string(), text);
            assert!(matches!(escape(text).to_cow(), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn escape_lines_keeps_newlines_and_nothing_else() {
        assert_eq!(
            escape_lines("one\ntwo\r\n\u{1b}[31mthree").to_string(),
            "one\ntwo\\r\n\\x1b[31mthree"
        );
    }

    proptest! {
        #[test]
        fn escaped_text_has_nothing_a_terminal_acts_on_and_escaping_twice_changes_nothing(
            text in "\\PC*|[\\x00-\\x{9f}\\x{200e}-\\x{206f}a-z]*",
        ) {
            let once = escape(&text).to_string();
            prop_assert!(!once.chars().any(is_acted_on), "{once:?}");
            prop_assert_eq!(escape(&once).to_string(), once.clone());
            let lines = escape_lines(&text).to_string();
            prop_assert!(!lines.chars().any(|c| c != '\n' && is_acted_on(c)));
            prop_assert_eq!(lines.lines().count(), text.lines().count());
        }
    }
}
