//! A party's choices as a front end takes them from its user (the CLI's
//! `psikit cpsi <app> receive|send` and flags, the Python bindings'
//! arguments, the benchmark's runs), and the one policy that turns them
//! into a protocol role and a [`CpsiConfig`]: which option goes with which
//! application, who learns, and which command takes which role.

use std::fmt::{self, Display};

use super::config::CpsiConfig;
use super::vocabulary::{
    App, AppKind, Epc, OtKind, ParseError, Reveal, Role, Side, MAX_VALUE_COLUMNS,
};

/// How a front end names its settings in a refusal: the command line's
/// flags (`--value-columns`) or the Python bindings' keywords
/// (`value_columns`, the flag without dashes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    Flags,
    Keywords,
}

impl Spelling {
    /// `setting` (a flag such as `--min-intersection`, or a word such as
    /// `application`) as this front end names it.
    pub fn name(self, setting: &str) -> String {
        match self {
            Spelling::Flags => setting.to_string(),
            Spelling::Keywords => setting.trim_start_matches("--").replace('-', "_"),
        }
    }

    /// `setting` given `value`: `--threshold T`, `threshold=T`.
    fn setting(self, setting: &str, value: &str) -> String {
        match self {
            Spelling::Flags => format!("{setting} {value}"),
            Spelling::Keywords => format!("{}={value}", self.name(setting)),
        }
    }

    /// A word given as a value: `sender`, or `"sender"` in Python.
    fn word(self, word: &str) -> String {
        match self {
            Spelling::Flags => word.to_string(),
            Spelling::Keywords => format!("\"{word}\""),
        }
    }

    /// A word the vocabulary refused, naming its setting: `ot must be
    /// "silent", "iknp" or "kk13", got "fast"`.
    pub fn refusal(self, e: &ParseError) -> ChoiceError {
        ChoiceError(format!(
            "{} must be {}, got {:?}",
            self.name(e.setting),
            e.expected(self == Spelling::Keywords),
            e.got
        ))
    }
}

/// A choice that does not fit the others, worded in the front end's
/// names for its settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChoiceError(pub String);

impl Display for ChoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChoiceError {}

/// What a user chose for one party, in the command line's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choices {
    /// The command this party runs (`receive` or `send`).
    pub side: Side,
    pub app: AppKind,
    /// `--threshold`: the threshold application's, and only its.
    pub threshold: Option<u64>,
    /// `--reveal-to`, naming commands: `receiver` is the `receive` party.
    pub reveal_to: Reveal,
    pub ot: OtKind,
    pub epc: Epc,
    /// How many `--value-columns` this party gives.
    pub value_columns: usize,
    /// `--min-intersection` (0: none).
    pub min_intersection: u64,
    pub inner_product: bool,
    /// `--product-bits`, read only with `--inner-product`.
    pub product_bits: u32,
    /// `--max-peer-items`.
    pub max_peer_items: u64,
    /// This party's key encoding (`psikit_io::KeySpec::key_format`), or
    /// empty to skip the check.
    pub key_format: String,
}

impl Choices {
    /// The command line's defaults for `side` running `app`.
    pub fn new(side: Side, app: AppKind) -> Self {
        Self {
            side,
            app,
            threshold: None,
            reveal_to: Reveal::Receiver,
            ot: OtKind::Silent,
            epc: Epc::Auto,
            value_columns: 0,
            min_intersection: 0,
            inner_product: false,
            product_bits: 32,
            max_peer_items: 1 << 24,
            key_format: String::new(),
        }
    }

    /// This party's protocol role and configuration, or the first choice
    /// that does not fit, named as `spelling` names settings. The union
    /// is learned by the protocol's sender, so its learner (the command
    /// `--reveal-to` names) takes that role; every other application
    /// keeps `receive` as the cuckoo side.
    pub fn resolve(&self, spelling: Spelling) -> Result<(Role, CpsiConfig), ChoiceError> {
        let refuse = |why: String| Err(ChoiceError(why));
        let flag = |setting: &str| spelling.name(setting);
        let Some(app) = App::new(self.app, self.threshold) else {
            return match self.app {
                AppKind::Threshold => refuse(format!(
                    "the threshold application needs {}",
                    spelling.setting("--threshold", "T")
                )),
                _ => refuse(format!(
                    "{} belongs to the threshold application",
                    flag("--threshold")
                )),
            };
        };
        let receive = self.side == Side::Receive;
        let (role, reveal) = match (app, self.reveal_to) {
            (App::Union, Reveal::Both) => {
                return refuse(format!(
                    "the union is learned by one party: {} or {}",
                    spelling.setting("--reveal-to", &spelling.word("receiver")),
                    spelling.word("sender")
                ))
            }
            (App::Union, to) => {
                let learner = receive == (to == Reveal::Receiver);
                let role = if learner {
                    Role::Sender
                } else {
                    Role::Receiver
                };
                (role, Reveal::Sender)
            }
            (_, to) => {
                let role = if receive {
                    Role::Receiver
                } else {
                    Role::Sender
                };
                (role, to)
            }
        };
        // The sum takes values at both parties; the shares carry the
        // sender's.
        match app {
            _ if self.value_columns == 0 || app == App::Sum => {}
            App::Shares if self.side == Side::Send => {}
            App::Shares => {
                return refuse(
                    "in the shares application only the send party's value columns are shared"
                        .into(),
                )
            }
            _ => {
                return refuse(format!(
                    "{} belongs to the sum and shares applications",
                    flag("--value-columns")
                ))
            }
        }
        if self.value_columns > MAX_VALUE_COLUMNS {
            return refuse(format!(
                "{}: at most {MAX_VALUE_COLUMNS}, not {}",
                flag("--value-columns"),
                self.value_columns
            ));
        }
        for (set, setting) in [
            (self.min_intersection > 0, "--min-intersection"),
            (self.inner_product, "--inner-product"),
        ] {
            if set && app != App::Sum {
                return refuse(format!("{} belongs to the sum application", flag(setting)));
            }
        }
        let product_bits = match u8::try_from(self.product_bits) {
            _ if !self.inner_product => 0,
            Ok(bits @ 1..=64) => bits,
            _ => {
                return refuse(format!(
                    "{} must be 1 to 64, got {}",
                    flag("--product-bits"),
                    self.product_bits
                ))
            }
        };
        if self.inner_product && self.value_columns == 0 {
            return refuse(format!(
                "the inner product needs a value column at each party ({})",
                flag("--value-columns")
            ));
        }
        let mut config = CpsiConfig::new(app);
        config.ot = self.ot;
        config.epc = self.epc;
        config.reveal = reveal;
        config.min_intersection = self.min_intersection;
        config.product_bits = product_bits;
        config.max_set_size = self.max_peer_items;
        config.key_format = self.key_format.clone();
        Ok((role, config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(c: &Choices, spelling: Spelling) -> String {
        c.resolve(spelling).expect_err("refused").to_string()
    }

    #[test]
    fn the_union_s_learner_takes_the_sender_role() {
        for (side, to, role) in [
            (Side::Receive, Reveal::Receiver, Role::Sender),
            (Side::Send, Reveal::Receiver, Role::Receiver),
            (Side::Receive, Reveal::Sender, Role::Receiver),
            (Side::Send, Reveal::Sender, Role::Sender),
        ] {
            let c = Choices {
                reveal_to: to,
                ..Choices::new(side, AppKind::Union)
            };
            let (r, cfg) = c.resolve(Spelling::Flags).expect("a union");
            assert_eq!((r, cfg.reveal), (role, Reveal::Sender), "{side} {to}");
        }
        let c = Choices {
            reveal_to: Reveal::Both,
            ..Choices::new(Side::Send, AppKind::Sum)
        };
        let (role, cfg) = c.resolve(Spelling::Flags).expect("a sum");
        assert_eq!((role, cfg.reveal), (Role::Sender, Reveal::Both));
    }

    #[test]
    fn choices_that_do_not_fit_are_refused_in_the_front_end_s_words() {
        let base = |app| Choices::new(Side::Receive, app);
        let cases = [
            (
                base(AppKind::Threshold),
                "the threshold application needs --threshold T",
                "the threshold application needs threshold=T",
            ),
            (
                Choices {
                    threshold: Some(3),
                    ..base(AppKind::Cardinality)
                },
                "--threshold belongs to the threshold application",
                "threshold belongs to the threshold application",
            ),
            (
                Choices {
                    reveal_to: Reveal::Both,
                    ..base(AppKind::Union)
                },
                "the union is learned by one party: --reveal-to receiver or sender",
                "the union is learned by one party: reveal_to=\"receiver\" or \"sender\"",
            ),
            (
                Choices {
                    value_columns: 1,
                    ..base(AppKind::Cardinality)
                },
                "--value-columns belongs to the sum and shares applications",
                "value_columns belongs to the sum and shares applications",
            ),
            (
                Choices {
                    value_columns: 1,
                    ..base(AppKind::Shares)
                },
                "only the send party's value columns",
                "only the send party's value columns",
            ),
            (
                Choices {
                    min_intersection: 2,
                    ..base(AppKind::Cardinality)
                },
                "--min-intersection belongs to the sum application",
                "min_intersection belongs to the sum application",
            ),
            (
                Choices {
                    inner_product: true,
                    ..base(AppKind::Threshold)
                },
                "the threshold application needs --threshold T",
                "the threshold application needs threshold=T",
            ),
            (
                Choices {
                    inner_product: true,
                    ..base(AppKind::Union)
                },
                "--inner-product belongs to the sum application",
                "inner_product belongs to the sum application",
            ),
            (
                Choices {
                    inner_product: true,
                    value_columns: 1,
                    product_bits: 65,
                    ..base(AppKind::Sum)
                },
                "--product-bits must be 1 to 64, got 65",
                "product_bits must be 1 to 64, got 65",
            ),
            (
                Choices {
                    inner_product: true,
                    ..base(AppKind::Sum)
                },
                "needs a value column at each party (--value-columns)",
                "needs a value column at each party (value_columns)",
            ),
            (
                Choices {
                    value_columns: 17,
                    ..base(AppKind::Sum)
                },
                "--value-columns: at most 16, not 17",
                "value_columns: at most 16, not 17",
            ),
        ];
        for (c, flags, keywords) in cases {
            assert!(refusal(&c, Spelling::Flags).contains(flags), "{flags}");
            assert!(
                refusal(&c, Spelling::Keywords).contains(keywords),
                "{keywords}"
            );
        }
    }

    #[test]
    fn what_fits_becomes_the_configuration() {
        let c = Choices {
            ot: OtKind::Kk13,
            epc: Epc::Bits(20),
            value_columns: 2,
            min_intersection: 4,
            inner_product: true,
            product_bits: 40,
            max_peer_items: 99,
            key_format: "k".into(),
            ..Choices::new(Side::Send, AppKind::Sum)
        };
        let (role, cfg) = c.resolve(Spelling::Flags).expect("a sum");
        assert_eq!(role, Role::Sender);
        assert_eq!(
            (cfg.app, cfg.ot, cfg.epc),
            (App::Sum, OtKind::Kk13, Epc::Bits(20))
        );
        assert_eq!((cfg.min_intersection, cfg.product_bits), (4, 40));
        assert_eq!((cfg.max_set_size, cfg.key_format.as_str()), (99, "k"));
        // Product bits are read only with the inner product.
        let c = Choices {
            product_bits: 0,
            ..Choices::new(Side::Send, AppKind::Sum)
        };
        assert_eq!(
            c.resolve(Spelling::Keywords).expect("a sum").1.product_bits,
            0
        );
        let c = Choices {
            value_columns: 3,
            ..Choices::new(Side::Send, AppKind::Shares)
        };
        assert!(c.resolve(Spelling::Flags).is_ok());
        let e = Spelling::Keywords.refusal(&"fast".parse::<OtKind>().unwrap_err());
        assert_eq!(e.0, r#"ot must be "silent", "iknp" or "kk13", got "fast""#);
    }
}
