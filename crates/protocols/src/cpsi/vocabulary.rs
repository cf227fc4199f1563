//! Circuit PSI's vocabulary: what a user chooses (the application, the
//! OT extension, the compression, who learns, which command this party
//! runs) and the terms both parties agree on in their hellos ([`Agreed`]).
//!
//! Each choice parses and prints itself ([`FromStr`], [`Display`]) in the
//! words the command line accepts (`psikit cpsi <app> receive|send --ot
//! silent --epc auto --reveal-to receiver`), which are also the Python
//! bindings' strings, so the front ends share one spelling and a refusal
//! can name a setting as the user wrote it.

use std::fmt::{self, Display};
use std::str::FromStr;

use super::epc;
use crate::error::Error;

/// Most value columns a party brings to a sum.
pub const MAX_VALUE_COLUMNS: usize = 16;

/// A word that is none of a choice's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The setting, as the command line names it (`--ot`, `application`).
    pub setting: &'static str,
    /// The words it takes, and a description of any other form (EPC's
    /// bits).
    pub words: Vec<&'static str>,
    pub other: Option<&'static str>,
    /// What was given.
    pub got: String,
}

impl ParseError {
    /// The accepted forms, `quoted` or not: `auto, off or 16 to 31 bits`.
    pub fn expected(&self, quoted: bool) -> String {
        let mut forms: Vec<String> = self
            .words
            .iter()
            .map(|w| match quoted {
                true => format!("\"{w}\""),
                false => w.to_string(),
            })
            .collect();
        forms.extend(self.other.map(str::to_string));
        match forms.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => forms.concat(),
        }
    }
}

impl Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}, not {:?}", self.expected(false), self.got)
    }
}

impl std::error::Error for ParseError {}

/// `FromStr` and `Display` of a choice spelled by the words of its
/// variants (`ALL`, each `word()`), for the setting `$setting`.
macro_rules! words {
    ($t:ty, $setting:literal) => {
        impl FromStr for $t {
            type Err = ParseError;

            fn from_str(s: &str) -> Result<Self, ParseError> {
                <$t>::ALL
                    .into_iter()
                    .find(|v| v.word() == s)
                    .ok_or_else(|| ParseError {
                        setting: $setting,
                        words: <$t>::ALL.iter().map(|v| v.word()).collect(),
                        other: None,
                        got: s.to_string(),
                    })
            }
        }

        impl Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.word())
            }
        }
    };
}

/// The command a party runs, `psikit cpsi <app> receive|send`: `receive`
/// holds the cuckoo table and learns by default, except that the union's
/// learner takes the protocol's sender role ([`super::Choices`] maps
/// commands onto [`Role`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Send,
    Receive,
}

impl Side {
    pub const ALL: [Side; 2] = [Side::Send, Side::Receive];

    /// Its word: `send` or `receive`.
    pub fn word(self) -> &'static str {
        match self {
            Side::Send => "send",
            Side::Receive => "receive",
        }
    }
}

words!(Side, "role");

/// The application named apart from its threshold, as a user picks it
/// (`psikit cpsi <app>`, Python's `application=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppKind {
    Cardinality,
    Sum,
    Threshold,
    Union,
    Shares,
}

impl AppKind {
    pub const ALL: [AppKind; 5] = [
        AppKind::Cardinality,
        AppKind::Sum,
        AppKind::Threshold,
        AppKind::Union,
        AppKind::Shares,
    ];

    /// Its word on the command line and in reports.
    pub fn word(self) -> &'static str {
        match self {
            AppKind::Cardinality => "cardinality",
            AppKind::Sum => "sum",
            AppKind::Threshold => "threshold",
            AppKind::Union => "union",
            AppKind::Shares => "shares",
        }
    }
}

words!(AppKind, "application");

/// What the parties compute on the membership shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// The shares themselves, for the parties' own computation.
    Shares,
    /// `|X ∩ Y|`.
    Cardinality,
    /// `|X ∩ Y|` and the sums of each party's values over the intersection.
    Sum,
    /// Whether `|X ∩ Y| ≥ t`.
    Threshold(u64),
    /// The receiver's items outside the intersection, to the sender.
    Union,
}

impl App {
    /// The application of `kind` with `threshold` (`None` except for the
    /// threshold application, which needs one).
    pub fn new(kind: AppKind, threshold: Option<u64>) -> Option<Self> {
        Some(match (kind, threshold) {
            (AppKind::Threshold, Some(t)) => App::Threshold(t),
            (AppKind::Threshold, None) | (_, Some(_)) => return None,
            (AppKind::Cardinality, None) => App::Cardinality,
            (AppKind::Sum, None) => App::Sum,
            (AppKind::Union, None) => App::Union,
            (AppKind::Shares, None) => App::Shares,
        })
    }

    /// Its kind, without the threshold.
    pub fn kind(self) -> AppKind {
        match self {
            App::Shares => AppKind::Shares,
            App::Cardinality => AppKind::Cardinality,
            App::Sum => AppKind::Sum,
            App::Threshold(_) => AppKind::Threshold,
            App::Union => AppKind::Union,
        }
    }

    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            App::Shares => 0,
            App::Cardinality => 1,
            App::Sum => 2,
            App::Threshold(_) => 3,
            App::Union => 4,
        }
    }

    /// The threshold (0 for the others).
    pub fn threshold(self) -> u64 {
        match self {
            App::Threshold(t) => t,
            _ => 0,
        }
    }

    /// The application with wire `code` and `threshold`.
    pub fn from_code(code: u8, threshold: u64) -> Option<Self> {
        Some(match (code, threshold) {
            (0, 0) => App::Shares,
            (1, 0) => App::Cardinality,
            (2, 0) => App::Sum,
            (3, t) => App::Threshold(t),
            (4, 0) => App::Union,
            _ => return None,
        })
    }

    /// The name used on the command line and in reports (its kind's word).
    pub fn name(self) -> &'static str {
        self.kind().word()
    }

    /// The role of the party that learns the result by default: the
    /// receiver, except for the union, which the sender learns (the
    /// receiver provides its items outside the intersection).
    pub fn learner(self) -> Role {
        match self {
            App::Union => Role::Sender,
            _ => Role::Receiver,
        }
    }
}

/// Which OT extension makes the random OTs of the equality share
/// generation (paper Table 2: IKNP-GMW, Silent-GMW and KK-CGS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtKind {
    /// IKNP: fastest to compute, 128 bits of traffic per OT.
    Iknp,
    /// Silent OT (dual LPN): about one bit of traffic per OT, more work.
    Silent,
    /// KK13 1-out-of-16 OTs and the CGS equality (module `cgs`); the
    /// applications' 1-out-of-2 OTs come from IKNP.
    Kk13,
}

impl OtKind {
    /// In the command line's order (its default first).
    pub const ALL: [OtKind; 3] = [OtKind::Silent, OtKind::Iknp, OtKind::Kk13];

    /// Its word on the command line and in reports.
    pub fn word(self) -> &'static str {
        match self {
            OtKind::Iknp => "iknp",
            OtKind::Silent => "silent",
            OtKind::Kk13 => "kk13",
        }
    }

    /// When to pick it, in a line (the command line's help).
    pub fn about(self) -> &'static str {
        match self {
            OtKind::Silent => "Silent OT: little traffic (best below about 1 Gbit/s)",
            OtKind::Iknp => "IKNP: less computation, far more traffic (fast links)",
            OtKind::Kk13 => {
                "KK13 1-out-of-16 OTs and the CGS equality (the paper's KK-CGS): traffic \
                 between the two, the slowest here"
            }
        }
    }
}

words!(OtKind, "--ot");

/// Equality-preserving compression (module `epc`) of the tags before the
/// equality test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epc {
    /// Compare the `ℓ`-bit tags directly.
    Off,
    /// Compress to the smallest output length the run's parameters allow
    /// (16 bits where the ring of 4096 suffices, else 17), or compare
    /// directly when none does: the flooding of a run is `σ + c` bits for
    /// `2^c ≥ M` reply coefficients, and past 68 bits no modulus within
    /// the 128-bit HE standard holds it (a job's buckets add `log2 B` to
    /// `σ`, so jobs beyond about 2^28 bins in all compare directly).
    Auto,
    /// Compress to values mod a prime of this many bits (16 to 31).
    Bits(u32),
}

impl Epc {
    /// Its code on the wire: 0 off, 1 automatic, else the bits.
    pub fn code(self) -> u8 {
        match self {
            Epc::Off => 0,
            Epc::Auto => 1,
            Epc::Bits(b) => b as u8,
        }
    }

    /// The setting with wire `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Epc::Off),
            1 => Some(Epc::Auto),
            16..=31 => Some(Epc::Bits(u32::from(code))),
            _ => None,
        }
    }

    /// The EPC parameters of a run with `m` bins of `ell`-bit tags at
    /// statistical security `sigma`, or `None` to compare the tags directly
    /// (off, or, when automatic, no parameters for this run: see
    /// [`Epc::Auto`]).
    pub fn params(self, ell: u32, m: usize, sigma: u32) -> Result<Option<epc::EpcParams>, Error> {
        match self {
            Epc::Off => Ok(None),
            Epc::Auto => {
                Ok((16..=24).find_map(|bits| epc::EpcParams::new(ell, bits, m, sigma).ok()))
            }
            Epc::Bits(bits) => epc::EpcParams::new(ell, bits, m, sigma).map(Some),
        }
    }
}

impl FromStr for Epc {
    type Err = ParseError;

    /// `auto`, `off`, or the output bits (16 to 31).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "auto" => Ok(Epc::Auto),
            "off" => Ok(Epc::Off),
            bits => match bits.parse::<u32>() {
                Ok(b @ 16..=31) => Ok(Epc::Bits(b)),
                _ => Err(ParseError {
                    setting: "--epc",
                    words: vec!["auto", "off"],
                    other: Some("16 to 31 bits"),
                    got: s.to_string(),
                }),
            },
        }
    }
}

impl Display for Epc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Epc::Auto => f.write_str("auto"),
            Epc::Off => f.write_str("off"),
            Epc::Bits(b) => write!(f, "{b}"),
        }
    }
}

/// A party's role in the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds the simple table; leads every round.
    Sender,
    /// Holds the cuckoo table.
    Receiver,
}

impl Role {
    /// The other party's role.
    pub fn other(self) -> Self {
        match self {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        }
    }
}

/// Who learns the application's result. In [`super::CpsiConfig`] and on
/// the wire it names protocol roles; as a user's `--reveal-to` it names
/// the commands (`receive`, `send`), which [`super::Choices`] maps onto
/// the roles (they differ for the union only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reveal {
    Receiver,
    Sender,
    Both,
}

impl Reveal {
    pub const ALL: [Reveal; 3] = [Reveal::Receiver, Reveal::Sender, Reveal::Both];

    /// Its word: `receiver`, `sender` or `both`.
    pub fn word(self) -> &'static str {
        match self {
            Reveal::Receiver => "receiver",
            Reveal::Sender => "sender",
            Reveal::Both => "both",
        }
    }

    /// Whether `role` learns the result.
    pub fn to(self, role: Role) -> bool {
        matches!(
            (self, role),
            (Reveal::Both, _) | (Reveal::Receiver, Role::Receiver) | (Reveal::Sender, Role::Sender)
        )
    }

    /// The result revealed to `role` alone.
    pub fn only(role: Role) -> Self {
        match role {
            Role::Sender => Reveal::Sender,
            Role::Receiver => Reveal::Receiver,
        }
    }

    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            Reveal::Receiver => 0,
            Reveal::Sender => 1,
            Reveal::Both => 2,
        }
    }

    /// The setting with wire `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        Reveal::ALL.into_iter().find(|r| r.code() == code)
    }
}

words!(Reveal, "--reveal-to");

/// What both parties must agree on (compared in the hellos).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    pub app: App,
    pub ot: OtKind,
    pub epc: Epc,
    pub reveal: Reveal,
    /// Sums only: the smallest intersection whose sums are revealed (0:
    /// no bound).
    pub min_intersection: u64,
    /// Sums only: the bits of the receiver's first value column in the
    /// inner product (0: no inner product).
    pub product_bits: u8,
}

impl Agreed {
    /// One clause per term in which `peer` differs from this side, in the
    /// command line's words: `the peer runs --epc off, this side --epc
    /// auto`; none exactly when the terms are equal. Another application
    /// is named alone, since the other terms mean something else under it
    /// (a union's reveal setting, always the sender, is not its
    /// `--reveal-to`).
    pub fn differences(&self, peer: &Agreed) -> Vec<String> {
        let clause =
            |theirs: String, ours: String| format!("the peer runs {theirs}, this side {ours}");
        if peer.app.kind() != self.app.kind() {
            return vec![clause(peer.app.name().into(), self.app.name().into())];
        }
        let product = |bits: u8| match bits {
            0 => "no --inner-product".to_string(),
            b => format!("--inner-product --product-bits {b}"),
        };
        let mut out = Vec::new();
        let mut differ = |differs: bool, theirs: String, ours: String| {
            if differs {
                out.push(clause(theirs, ours));
            }
        };
        let (p, s) = (peer, self);
        differ(
            p.app != s.app,
            format!("--threshold {}", p.app.threshold()),
            format!("--threshold {}", s.app.threshold()),
        );
        differ(
            p.ot != s.ot,
            format!("--ot {}", p.ot),
            format!("--ot {}", s.ot),
        );
        differ(
            p.epc != s.epc,
            format!("--epc {}", p.epc),
            format!("--epc {}", s.epc),
        );
        differ(
            p.reveal != s.reveal,
            format!("--reveal-to {}", p.reveal),
            format!("--reveal-to {}", s.reveal),
        );
        differ(
            p.min_intersection != s.min_intersection,
            format!("--min-intersection {}", p.min_intersection),
            format!("--min-intersection {}", s.min_intersection),
        );
        differ(
            p.product_bits != s.product_bits,
            product(p.product_bits),
            product(s.product_bits),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: impl IntoIterator<Item = T>)
    where
        T: FromStr<Err = ParseError> + Display + PartialEq + fmt::Debug,
    {
        for v in all {
            assert_eq!(v.to_string().parse::<T>(), Ok(v));
        }
    }

    #[test]
    fn every_choice_prints_the_word_it_parses_from() {
        round_trips(Side::ALL);
        round_trips(AppKind::ALL);
        round_trips(OtKind::ALL);
        round_trips(Reveal::ALL);
        round_trips(
            [Epc::Off, Epc::Auto]
                .into_iter()
                .chain((16..=31).map(Epc::Bits)),
        );
        for kind in AppKind::ALL {
            let threshold = (kind == AppKind::Threshold).then_some(7);
            let app = App::new(kind, threshold).expect("an application");
            assert_eq!((app.kind(), app.name()), (kind, kind.word()));
            assert_eq!(App::from_code(app.code(), app.threshold()), Some(app));
        }
    }

    #[test]
    fn unknown_words_are_refused_naming_what_is_accepted() {
        let e = "fast".parse::<OtKind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"expected silent, iknp or kk13, not "fast""#
        );
        assert_eq!(e.setting, "--ot");
        for bad in ["12", "32", "Auto", ""] {
            let e = bad.parse::<Epc>().unwrap_err();
            assert_eq!(e.expected(true), r#""auto", "off" or 16 to 31 bits"#);
        }
        assert!("product".parse::<AppKind>().is_err());
        assert!("both".parse::<Side>().is_err());
    }

    #[test]
    fn hellos_that_differ_are_told_apart_in_the_flags_words() {
        let ours = Agreed {
            app: App::Sum,
            ot: OtKind::Silent,
            epc: Epc::Auto,
            reveal: Reveal::Receiver,
            min_intersection: 0,
            product_bits: 0,
        };
        assert!(ours.differences(&ours).is_empty());
        let peer = Agreed {
            epc: Epc::Off,
            ..ours
        };
        assert_eq!(
            ours.differences(&peer),
            ["the peer runs --epc off, this side --epc auto"]
        );
        assert_eq!(
            peer.differences(&ours),
            ["the peer runs --epc auto, this side --epc off"]
        );
        let peer = Agreed {
            ot: OtKind::Kk13,
            reveal: Reveal::Both,
            min_intersection: 5,
            product_bits: 32,
            ..ours
        };
        assert_eq!(
            ours.differences(&peer),
            [
                "the peer runs --ot kk13, this side --ot silent",
                "the peer runs --reveal-to both, this side --reveal-to receiver",
                "the peer runs --min-intersection 5, this side --min-intersection 0",
                "the peer runs --inner-product --product-bits 32, this side no --inner-product",
            ]
        );
        let threshold = |t| Agreed {
            app: App::Threshold(t),
            ..ours
        };
        assert_eq!(
            threshold(1).differences(&threshold(2)),
            ["the peer runs --threshold 2, this side --threshold 1"]
        );
        assert_eq!(
            ours.differences(&threshold(2)),
            ["the peer runs threshold, this side sum"]
        );
    }
}
