//! Normalisation of key fields before they become set items.
//!
//! Two parties only find a common item if they produce *identical bytes* for
//! it, so cosmetic differences ("Alice@Example.com " vs "alice@example.com")
//! must be removed first. [`Normalize`] is the set of transformations applied
//! to every key field; both parties must use the same one.

use std::borrow::Cow;
use std::fmt;

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use crate::error::{Error, Result};

/// Which transformations to apply to each key field.
///
/// Whatever options are enabled, they always run in this fixed order:
///
/// 1. `lower` — Unicode lowercase (`str::to_lowercase`, the default Unicode
///    lowercase mapping; this is not full case folding, so `ß` stays `ß`).
/// 2. `nfc` — Unicode Normalization Form C, so that a precomposed `é`
///    (U+00E9) and `e` + combining acute (U+0065 U+0301) are equal.
/// 3. `collapse` — every run of whitespace inside the value becomes a single
///    ASCII space.
/// 4. `trim` — leading and trailing whitespace is removed.
/// 5. `digits` — everything except the ASCII digits `0`–`9` is dropped
///    (for phone numbers: `+1 (555) 010-9999` → `15550109999`).
///
/// "Whitespace" is Unicode whitespace (including the no-break space common in
/// spreadsheet exports) when the value is valid UTF-8. Values that are not
/// UTF-8 are accepted only without `lower` and `nfc`; `trim` and `collapse`
/// then act on ASCII whitespace only.
///
/// The default is `trim` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Normalize {
    /// Strip leading and trailing whitespace.
    pub trim: bool,
    /// Unicode lowercase.
    pub lower: bool,
    /// Unicode NFC.
    pub nfc: bool,
    /// Collapse internal whitespace runs to one space.
    pub collapse: bool,
    /// Keep only ASCII digits.
    pub digits: bool,
}

impl Default for Normalize {
    /// `trim` only: removes the most common accidental difference while
    /// leaving the value otherwise untouched.
    fn default() -> Self {
        Normalize {
            trim: true,
            ..Normalize::NONE
        }
    }
}

impl Normalize {
    /// No normalisation at all: key bytes are used exactly as they appear.
    pub const NONE: Normalize = Normalize {
        trim: false,
        lower: false,
        nfc: false,
        collapse: false,
        digits: false,
    };

    /// Parses a comma-separated option list as given on a command line, e.g.
    /// `"trim,lower,nfc"`. Options: `trim`, `lower`, `nfc`, `collapse`,
    /// `digits`, or `none` alone. The result is exactly the listed set (the
    /// default `trim` is not implied); order in the string does not matter.
    pub fn parse(s: &str) -> Result<Normalize> {
        let mut n = Normalize::NONE;
        let mut saw_none = false;
        for raw in s.split(',') {
            let opt = raw.trim().to_ascii_lowercase();
            match opt.as_str() {
                "trim" => n.trim = true,
                "lower" => n.lower = true,
                "nfc" => n.nfc = true,
                "collapse" => n.collapse = true,
                "digits" => n.digits = true,
                "none" => saw_none = true,
                _ => return Err(Error::UnknownNormalize { option: opt }),
            }
        }
        if saw_none && n != Normalize::NONE {
            return Err(Error::UnknownNormalize {
                option: format!("{s} (`none` cannot be combined with other options)"),
            });
        }
        Ok(n)
    }

    /// Normalises `field` and appends the result to `out`.
    ///
    /// Returns `Err(option)` naming the option that needed UTF-8 when the
    /// field is not valid UTF-8 and `lower` or `nfc` is enabled; the caller
    /// turns that into an error with the row and column.
    pub fn apply_into(&self, field: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        match std::str::from_utf8(field) {
            Ok(s) => {
                self.apply_str(s, out);
                Ok(())
            }
            Err(_) if self.lower => Err("lower"),
            Err(_) if self.nfc => Err("nfc"),
            Err(_) => {
                self.apply_bytes(field, out);
                Ok(())
            }
        }
    }

    /// The Unicode path: case and composition first, then whitespace/digits.
    fn apply_str(&self, s: &str, out: &mut Vec<u8>) {
        let mut text = Cow::Borrowed(s);
        if self.lower {
            text = lowercase(text);
        }
        if self.nfc {
            text = to_nfc(text);
        }
        if self.digits {
            out.extend(text.bytes().filter(u8::is_ascii_digit));
        } else if self.collapse {
            collapse_str(&text, self.trim, out);
        } else if self.trim {
            out.extend_from_slice(text.trim().as_bytes());
        } else {
            out.extend_from_slice(text.as_bytes());
        }
    }

    /// The fallback for non-UTF-8 values: ASCII whitespace only.
    fn apply_bytes(&self, b: &[u8], out: &mut Vec<u8>) {
        if self.digits {
            out.extend(b.iter().copied().filter(u8::is_ascii_digit));
        } else if self.collapse {
            collapse_bytes(b, self.trim, out);
        } else if self.trim {
            out.extend_from_slice(b.trim_ascii());
        } else {
            out.extend_from_slice(b);
        }
    }
}

impl fmt::Display for Normalize {
    /// The canonical option list (fixed order, `none` if empty), suitable for
    /// [`Normalize::parse`] and for comparing two parties' settings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opts = [
            (self.trim, "trim"),
            (self.lower, "lower"),
            (self.nfc, "nfc"),
            (self.collapse, "collapse"),
            (self.digits, "digits"),
        ];
        let names: Vec<&str> = opts.iter().filter(|o| o.0).map(|o| o.1).collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// Lowercases, avoiding an allocation when the value is already lowercase ASCII.
fn lowercase(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(text.to_ascii_lowercase())
        } else {
            text
        }
    } else {
        Cow::Owned(text.to_lowercase())
    }
}

/// Converts to NFC, skipping the work for text that is provably NFC already
/// (all ASCII text is).
fn to_nfc(text: Cow<'_, str>) -> Cow<'_, str> {
    if text.is_ascii() || is_nfc_quick(text.chars()) == IsNormalized::Yes {
        text
    } else {
        Cow::Owned(text.nfc().collect())
    }
}

/// Collapses Unicode whitespace runs to one space; `trim` also drops the
/// leading and trailing runs instead of keeping one space for them.
fn collapse_str(s: &str, trim: bool, out: &mut Vec<u8>) {
    let mut pending_space = false;
    let mut started = false;
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && (started || !trim) {
            out.push(b' ');
        }
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        pending_space = false;
        started = true;
    }
    if pending_space && !trim {
        out.push(b' ');
    }
}

/// Byte-level [`collapse_str`] for non-UTF-8 values (ASCII whitespace only).
fn collapse_bytes(b: &[u8], trim: bool, out: &mut Vec<u8>) {
    let mut pending_space = false;
    let mut started = false;
    for &c in b {
        if c.is_ascii_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && (started || !trim) {
            out.push(b' ');
        }
        out.push(c);
        pending_space = false;
        started = true;
    }
    if pending_space && !trim {
        out.push(b' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(opts: &str, input: &str) -> String {
        let mut out = Vec::new();
        let n = Normalize::parse(opts).expect("valid options");
        n.apply_into(input.as_bytes(), &mut out).expect("utf-8");
        String::from_utf8(out).expect("utf-8 output")
    }

    #[test]
    fn default_is_trim_only() {
        let n = Normalize::default();
        assert_eq!(n.to_string(), "trim");
        let mut out = Vec::new();
        n.apply_into(b"  A  b ", &mut out).expect("ok");
        assert_eq!(out, b"A  b");
    }

    #[test]
    fn each_option() {
        assert_eq!(norm("trim", "\t a b \n"), "a b");
        assert_eq!(norm("trim", "\u{a0}x\u{3000}"), "x");
        assert_eq!(norm("none", " A "), " A ");
        assert_eq!(norm("lower", "ÉMILE@Example.COM"), "émile@example.com");
        assert_eq!(norm("collapse", "  a \t\n b  "), " a b ");
        assert_eq!(norm("collapse,trim", "  a \t\n b  "), "a b");
        assert_eq!(norm("digits", "+1 (555) 010-9999"), "15550109999");
        assert_eq!(norm("digits", "٣٤"), "", "non-ASCII digits are dropped");
        assert_eq!(norm("nfc", "e\u{301}"), "\u{e9}");
    }

    #[test]
    fn unicode_email_lower_trim() {
        assert_eq!(
            norm("trim,lower", "ÉMILE@Example.com "),
            "émile@example.com"
        );
    }

    #[test]
    fn nfc_and_nfd_forms_are_equal_after_nfc() {
        let nfc = "Zo\u{eb} Cr\u{e8}me";
        let nfd = "Zoe\u{308} Cre\u{300}me";
        assert_ne!(nfc.as_bytes(), nfd.as_bytes());
        assert_eq!(norm("nfc", nfc), norm("nfc", nfd));
        assert_eq!(norm("nfc,lower", "ZOE\u{308}"), norm("lower", "zo\u{eb}"));
    }

    #[test]
    fn parse_rejects_unknown_and_mixed_none() {
        let err = Normalize::parse("trim,lowercase").expect_err("unknown");
        let msg = err.to_string();
        assert!(msg.contains("\"lowercase\""), "{msg}");
        assert!(msg.contains("trim, lower, nfc, collapse, digits"), "{msg}");
        assert!(Normalize::parse("none,trim").is_err());
        assert!(Normalize::parse("").is_err());
        assert_eq!(
            Normalize::parse(" Trim , NFC ").expect("ok").to_string(),
            "trim,nfc"
        );
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "none",
            "trim",
            "trim,lower,nfc,collapse,digits",
            "lower,digits",
        ] {
            let n = Normalize::parse(s).expect("valid");
            assert_eq!(Normalize::parse(&n.to_string()).expect("valid"), n);
        }
    }

    #[test]
    fn invalid_utf8_needs_no_unicode_options() {
        let latin1 = b" caf\xe9 ";
        let mut out = Vec::new();
        Normalize::default()
            .apply_into(latin1, &mut out)
            .expect("trim works on bytes");
        assert_eq!(out, b"caf\xe9");
        let lower = Normalize::parse("trim,lower").expect("valid");
        assert_eq!(lower.apply_into(latin1, &mut Vec::new()), Err("lower"));
        let nfc = Normalize::parse("nfc").expect("valid");
        assert_eq!(nfc.apply_into(latin1, &mut Vec::new()), Err("nfc"));
        let mut out = Vec::new();
        Normalize::parse("collapse,trim")
            .expect("valid")
            .apply_into(b" a \xff  b ", &mut out)
            .expect("ok");
        assert_eq!(out, b"a \xff b");
    }
}
