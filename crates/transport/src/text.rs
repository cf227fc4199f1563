//! Text that came from a peer or a file, made safe to show.
//!
//! An error frame's text, a key format or a label is whatever the other
//! party (or whoever wrote the file) chose. Printed as it came, a newline
//! and ANSI escapes let a fake peer forge a success line after a failed
//! run, clear the screen or retitle the terminal. [`Shown`] is the one way
//! psikit displays such text: on one line, every control character
//! (C0, DEL, C1, and the Unicode bidirectional overrides that reorder what
//! is read) written as a visible escape, and cut to a bounded length.

use std::fmt;

/// Characters of outside text shown before it is cut (with `…`).
pub const SHOWN_CHARS: usize = 200;

/// Displays outside text escaped and bounded ([`shown`]).
#[derive(Clone, Copy, Debug)]
pub struct Shown<'a>(&'a str);

/// `text` as psikit shows outside text: `Display` it.
pub fn shown(text: &str) -> Shown<'_> {
    Shown(text)
}

/// Whether `c` must not reach a terminal as it is: control characters,
/// and the bidirectional embeddings, overrides and isolates.
fn hazardous(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.chars().enumerate() {
            if i == SHOWN_CHARS {
                return f.write_str("…");
            }
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\\' => f.write_str("\\\\")?,
                c if hazardous(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_terminal_line_stays_visible_text() {
        let forged = "x\n3000 of 3000 distinct items matched\x1b[2J\x1b[31m\r\u{202e}evil\u{9b}";
        let out = shown(forged).to_string();
        assert!(!out.chars().any(hazardous), "{out:?}");
        assert_eq!(
            out,
            "x\\n3000 of 3000 distinct items matched\\u{1b}[2J\\u{1b}[31m\\r\\u{202e}evil\\u{9b}"
        );
    }

    #[test]
    fn plain_text_is_unchanged_and_long_text_is_cut() {
        assert_eq!(shown("émile@exämple.com").to_string(), "émile@exämple.com");
        let long = "a".repeat(5000);
        let out = shown(&long).to_string();
        assert_eq!(out.chars().count(), SHOWN_CHARS + 1);
        assert!(out.ends_with('…'));
        // A backslash is escaped too, so an escape cannot be faked.
        assert_eq!(shown("\\u{1b}").to_string(), "\\\\u{1b}");
    }
}
