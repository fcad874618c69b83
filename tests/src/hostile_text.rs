//! Text a hostile plugin sends its host (issue 22, hole 7), and what a terminal must show of
//! it: shared by `hostile-plugin`, which puts it everywhere a plugin controls, and the tests
//! that read the operator's terminal.

/// Sequences a terminal acts on, with what each attempts.
pub const PAYLOADS: &[(&str, &str)] = &[
    ("window title (OSC 0)", "\u{1b}]0;tether-owned-title\u{7}"),
    ("clipboard (OSC 52)", "\u{1b}]52;c;dGV0aGVyLW93bmVk\u{7}"),
    ("clear screen and scrollback", "\u{1b}[2J\u{1b}[3J\u{1b}[H"),
    ("device status report", "\u{1b}[6n"),
    ("C1 CSI and OSC", "\u{9b}2J\u{9d}0;c1-title\u{9c}"),
    ("bidi override", "\u{202e}exe.txt\u{202c}\u{2066}"),
    ("overwrite", "\rforged\u{8}"),
    ("forged line", "\ntether: error: forged by the plugin"),
];

/// The start of the forged line of [`PAYLOADS`]: no line on the terminal may start with it.
pub const FORGED_LINE: &str = "tether: error: forged by the plugin";

/// Every payload, after `marker` (which says where the text went: `grpc-error`,
/// `hclog-message`, …) so the terminal shows which path it came through.
#[must_use]
pub fn hostile(marker: &str) -> String {
    let mut text = format!("<{marker}>");
    for (_, payload) in PAYLOADS {
        text.push_str(payload);
    }
    text
}

/// The window-title payload as the terminal must show it after `marker`, escaped:
/// `<marker>\x1b]0;tether-owned-title\x07`.
#[must_use]
pub fn shown(marker: &str) -> String {
    format!("<{marker}>\\x1b]0;tether-owned-title\\x07")
}

/// What is wrong with `screen` (everything a terminal received): each escape sequence other
/// than a colour (`ESC [ … m`, which hosts print themselves), each BEL, backspace, carriage
/// return not before a newline (the terminal adds those), C1 control or bidirectional control,
/// and each line starting with [`FORGED_LINE`]. Empty when the screen is safe.
#[must_use]
pub fn unsafe_output(screen: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let text = String::from_utf8_lossy(screen);
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let context = || {
            let from = i.saturating_sub(30);
            let to = (i + 30).min(chars.len());
            chars[from..to]
                .iter()
                .collect::<String>()
                .escape_debug()
                .to_string()
        };
        let bad = match c {
            '\u{1b}' => !is_colour(&chars[i + 1..]),
            '\r' => chars.get(i + 1) != Some(&'\n'),
            '\u{7}' | '\u{8}' | '\u{80}'..='\u{9f}' => true,
            c => tether_proto::text::is_acted_on(c) && !matches!(c, '\n' | '\t'),
        };
        if bad {
            found.push(format!("{:?} in …{}…", c, context()));
        }
    }
    for line in text.lines() {
        if line.trim_start_matches('\r').starts_with(FORGED_LINE) {
            found.push(format!("a forged line: {line:?}"));
        }
    }
    found
}

/// Whether `rest` (what follows an ESC) is a colour: `[`, digits and `;`, then `m`.
fn is_colour(rest: &[char]) -> bool {
    if rest.first() != Some(&'[') {
        return false;
    }
    let end = rest[1..]
        .iter()
        .position(|c| !(c.is_ascii_digit() || *c == ';'));
    end.is_some_and(|end| rest[1 + end] == 'm')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_payloads_are_unsafe_and_their_escaped_form_is_safe() {
        let raw = hostile("x");
        // 6 ESC, 2 BEL, 3 C1, 3 bidi, 1 CR, 1 BS and the forged line (its newline is not
        // wrong on its own).
        assert_eq!(
            unsafe_output(raw.as_bytes()).len(),
            17,
            "{:?}",
            unsafe_output(raw.as_bytes())
        );
        let escaped = tether_proto::text::escape(&raw).to_string();
        assert!(escaped.starts_with(&shown("x")), "{escaped}");
        assert_eq!(unsafe_output(escaped.as_bytes()), Vec::<String>::new());
        assert!(unsafe_output(b"\x1b[2m2026\x1b[0m \x1b[33mWARN\x1b[0m ok\r\n").is_empty());
    }
}
