//! Circuit PSI: both parties get XOR shares of "this bin's item is in the
//! intersection", and compute an aggregate on them (cardinality, sums,
//! a threshold test, the union) without learning the intersection.
//!
//! The framework of Pinkas, Schneider, Tkachenko and Yanai (Eurocrypt
//! 2019) with the equality-preserving compression of Han, Moon and Son
//! (their §3.1 and Fig. 7):
//!
//! 1. **Hashing** ([`hashing`]): the receiver puts its set in a cuckoo
//!    table of `M = 1.27·N` bins under `d = 3` hash functions, the sender
//!    each of its items in all its bins.
//! 2. **Bin tagging** ([`opprf`]): the sender draws a random `ℓ`-bit tag
//!    `v_i` per bin and programs an OPPRF so that each of its items in bin
//!    `i` maps to `v_i`; the receiver evaluates it at its item of each bin
//!    (a dummy in empty bins) and gets `v*_i`, equal to `v_i` exactly when
//!    its item is one of the sender's (else equal with probability
//!    `2^-ℓ`, `ℓ = 40 + ⌈log2 M⌉`). The OPPRF is Rindal-Schoppmann's: the
//!    VOLE-based OPRF of [`crate::vole_psi`] plus an OKVS hint.
//! 3. **Equality-preserving compression** ([`epc`], [`Epc`]; on by
//!    default): BFV turns `v_i`, `v*_i` into `r_i`, `r*_i` of `ℓ_c = 16-22`
//!    bits, equal exactly when the tags are.
//! 4. **Equality share generation** ([`gmw`]): GMW evaluates the equality
//!    of the compared values with one AND gate per bit but one, on Beaver
//!    triples from random OTs made by IKNP or silent OT ([`rot`], the
//!    paper's IKNP-GMW and Silent-GMW); or, with [`OtKind::Kk13`], the
//!    CGS equality ([`cgs`], the paper's KK-CGS): one KK13 1-out-of-16 OT
//!    per 4-bit block and an AND tree over the blocks.
//!
//! Then the application ([`apps`], paper §3.3). [`epc`] is the paper's
//! equality-preserving compression (§4), which shortens the tags from `ℓ`
//! to `ℓ_c` bits between steps 2 and 3; it is built and tested on its own
//! and not yet used by the steps above.
//!
//! # Roles
//! The **receiver** holds the cuckoo table; the **sender** the simple
//! table. The receiver learns the aggregate (both parties with
//! [`CpsiConfig::both_learn`]), except for the union, which the sender
//! learns: the receiver's items outside the intersection. Both may bring
//! one 64-bit value per item for sums; the sender's values travel through
//! the OPPRF, as its tags do (Remark 2; PSTY19 §6).
//!
//! # Security model and leakage
//! Semi-honest security (both parties follow the protocol), 128-bit
//! computational (silent OT and VOLE under dual LPN at the parameters
//! `psikit_ot::silent::params` enforces; fixed-key AES as a random
//! permutation; BFV at the HomomorphicEncryption.org 128-bit bound) and
//! 40-bit statistical (tags of `ℓ = 40 + ⌈log2 M⌉` bits; EPC's noise
//! flooding within `2^-40` over the whole run; the cuckoo table and the
//! OKVS fail with probability below `2^-40`, which ends the run with an
//! error and no output).
//!
//! Each party learns the other's set size, whether the other brings
//! values, and the output of the application, nothing else:
//! * shares: uniformly random bits (and value shares) on each side;
//! * cardinality: `|X ∩ Y|`;
//! * sum: `|X ∩ Y|` and the sum over the intersection of each party's
//!   values that were given (mod 2^64);
//! * threshold: one bit, whether `|X ∩ Y| ≥ t`;
//! * union: the sender learns the receiver's items outside the
//!   intersection, hence `X ∪ Y` and `|X ∩ Y|`; it also learns the length
//!   of the receiver's longest item, to which the items are padded.
//!
//! With `both_learn`, the other party learns the same result.

pub mod apps;
pub mod bits;
pub mod cgs;
pub mod epc;
pub mod facade;
pub mod gmw;
pub mod hashing;
pub mod messages;
pub mod opprf;
mod receiver;
pub mod rot;
mod sender;

pub use receiver::run_receiver;
pub use rot::OtKind;
pub use sender::run_sender;

use std::time::Duration;

use psikit_ot::{ExtConfig, SessionId};

use crate::Error;

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

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            App::Shares => "shares",
            App::Cardinality => "cardinality",
            App::Sum => "sum",
            App::Threshold(_) => "threshold",
            App::Union => "union",
        }
    }
}

/// Equality-preserving compression ([`epc`]) of the tags before the
/// equality test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epc {
    /// Compare the `ℓ`-bit tags directly.
    Off,
    /// Compress to the smallest output length the run's parameters allow
    /// (16 bits where the ring of 4096 suffices, else 17).
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

    /// The EPC parameters of a run with `m` bins of `ell`-bit tags, or
    /// `None` to compare the tags directly (off, or tags longer than EPC's
    /// 64 bits, which only sets beyond 2^23 items have, when automatic).
    pub fn params(self, ell: u32, m: usize) -> Result<Option<epc::EpcParams>, Error> {
        match self {
            Epc::Off => Ok(None),
            Epc::Auto if ell > epc::MAX_ELL => Ok(None),
            Epc::Auto => {
                let mut last = None;
                for bits in 16..=24 {
                    match epc::EpcParams::new(ell, bits, m) {
                        Ok(p) => return Ok(Some(p)),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| Error::Config("no EPC parameters".into())))
            }
            Epc::Bits(bits) => epc::EpcParams::new(ell, bits, m).map(Some),
        }
    }
}

/// What both parties must agree on (compared in the hellos).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    pub app: App,
    pub ot: OtKind,
    pub epc: Epc,
    /// Whether the party that does not learn by default learns too.
    pub both_learn: bool,
}

/// How to run circuit PSI.
#[derive(Clone, Debug)]
pub struct CpsiConfig {
    pub app: App,
    /// Which OT extension feeds the equality test (default silent).
    pub ot: OtKind,
    /// Equality-preserving compression (default automatic).
    pub epc: Epc,
    pub both_learn: bool,
    /// Largest peer set accepted.
    pub max_set_size: u64,
    /// Threads for the parallel parts; `None` uses rayon's global pool.
    pub threads: Option<usize>,
    /// This party's key encoding (`psikit_io::KeySpec::key_format`), or
    /// empty to skip the check.
    pub key_format: String,
}

impl CpsiConfig {
    /// A configuration for `app` with the defaults.
    pub fn new(app: App) -> Self {
        Self {
            app,
            ot: OtKind::Silent,
            epc: Epc::Auto,
            both_learn: false,
            max_set_size: 1 << 26,
            threads: None,
            key_format: String::new(),
        }
    }

    fn agreed(&self) -> Agreed {
        Agreed {
            app: self.app,
            ot: self.ot,
            epc: self.epc,
            both_learn: self.both_learn,
        }
    }

    fn ext_config(&self) -> Result<ExtConfig, Error> {
        match self.threads {
            None => Ok(ExtConfig::default()),
            Some(t) => ExtConfig::with_threads(t).map_err(|e| Error::Config(e.to_string())),
        }
    }
}

/// A party's input: distinct keys (front ends merge rows with the same
/// key; repeated keys would be counted twice) and, for sums, one value per
/// key.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub keys: &'a [Vec<u8>],
    pub values: Option<&'a [u64]>,
}

/// What a party learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Its shares, one per bin of the receiver's table.
    Shares(Shares),
    /// The intersection's size (`None` at a party that does not learn it).
    Cardinality(Option<u64>),
    Sum(Option<Sums>),
    /// Whether the intersection has at least the threshold's size.
    Threshold(Option<bool>),
    /// The receiver's items outside the intersection (at the sender).
    Union(Option<Vec<Vec<u8>>>),
}

/// One party's shares: membership bits per bin, and (if the sender gave
/// values) additive shares mod 2^64 of the sender's value in bins where it
/// matched (garbage elsewhere, to be multiplied by the membership).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shares {
    pub membership: bits::Bits,
    /// At the receiver: the index of the item in each bin.
    pub item_of_bin: Option<Vec<Option<u32>>>,
    pub sender_values: Option<Vec<u64>>,
}

/// The sum application's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sums {
    pub cardinality: u64,
    /// Sum of the sender's values over the intersection, if it gave values.
    pub sender_values: Option<u64>,
    /// Sum of the receiver's values over the intersection, if it gave values.
    pub receiver_values: Option<u64>,
}

/// What a party learned and what each step cost.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub output: Output,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Time and traffic (both directions, as this party counted them) of each
/// step.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    pub hashing: Step,
    pub opprf: Step,
    /// Equality-preserving compression (zero when off).
    pub epc: Step,
    /// Base OTs and the OTs of the AND triples.
    pub triples: Step,
    /// The equality circuit's layers.
    pub equality: Step,
    pub application: Step,
    /// Bins `M`, tag bits `ℓ`, and the bits the equality test compares
    /// (`ℓ`, or EPC's `ℓ_c`).
    pub bins: usize,
    pub tag_bits: u32,
    pub compared_bits: u32,
}

/// One step's time and bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Step {
    pub time: Duration,
    pub bytes: u64,
}

/// Measures the steps of a run in order.
struct Meter {
    at: std::time::Instant,
    bytes: u64,
}

impl Meter {
    fn start(ch: &psikit_transport::Channel) -> Self {
        Self {
            at: std::time::Instant::now(),
            bytes: ch.bytes_sent() + ch.bytes_received(),
        }
    }

    /// The step since the last mark.
    fn mark(&mut self, ch: &psikit_transport::Channel) -> Step {
        let now = Self::start(ch);
        let step = Step {
            time: now.at - self.at,
            bytes: now.bytes - self.bytes,
        };
        *self = now;
        step
    }
}

/// What the equality step leaves for the application.
struct Compared {
    /// This party's membership share per bin.
    shares: bits::Bits,
    rots: rot::Rots,
    /// Triples left for the application (the threshold's adder).
    triples: gmw::Triples,
}

/// Steps 3 and 4 at either party (the sender leads): EPC of the `ell`-bit
/// tags when on, then the AND triples and the equality circuit. `silent`
/// is the OPRF's silent session, reused for the forward random OTs.
#[allow(clippy::too_many_arguments)]
async fn compare(
    ch: &mut psikit_transport::Channel,
    cfg: &CpsiConfig,
    sid: &SessionId,
    tags: Vec<u128>,
    ell: u32,
    silent: rot::Side,
    meter: &mut Meter,
    phases: &mut Phases,
) -> Result<Compared, Error> {
    let leader = matches!(silent, rot::Side::SilentSender(_));
    let m = tags.len();
    let (compared, bits) = match cfg.epc.params(ell, m)? {
        Some(params) => {
            let tags: Vec<u64> = tags.iter().map(|&t| t as u64).collect();
            let r = match leader {
                true => epc::driver::send(ch, &params, &tags).await?,
                false => epc::driver::receive(ch, &params, &tags).await?,
            };
            (r.into_iter().map(u128::from).collect(), params.ell_c())
        }
        None => (tags, ell),
    };
    phases.compared_bits = bits;
    phases.epc = meter.mark(ch);

    let ext = cfg.ext_config()?;
    let mut rots = rot::Rots::new(ch, sid, cfg.ot, leader, &ext, silent).await?;
    let needed = triples_needed(cfg.app, cfg.ot, m, bits);
    let mut triples = gmw::Triples::generate(&mut rots, ch, needed).await?;
    let shares = match cfg.ot {
        OtKind::Kk13 => {
            let mut cgs = cgs::Cgs::setup(ch, &mut rots, sid, &ext).await?;
            let mut and = cgs.triples(ch, cgs::triples_needed(m, bits)).await?;
            phases.triples = meter.mark(ch);
            cgs.equal(ch, &mut and, &compared, bits).await?
        }
        OtKind::Iknp | OtKind::Silent => {
            phases.triples = meter.mark(ch);
            gmw::equal(ch, &mut triples, &compared, bits, leader).await?
        }
    };
    phases.equality = meter.mark(ch);
    Ok(Compared {
        shares,
        rots,
        triples,
    })
}

/// GMW triples from random OTs a run uses: the equality circuit (not with
/// KK13: the CGS equality makes its own), and the threshold's adder.
fn triples_needed(app: App, ot: OtKind, m: usize, ell: u32) -> usize {
    let adder = match app {
        App::Threshold(t) => gmw::adder_cost(apps::threshold_bits((m as u64).max(t))),
        _ => 0,
    };
    let equality = match ot {
        OtKind::Kk13 => 0,
        OtKind::Iknp | OtKind::Silent => gmw::equality_cost(m, ell),
    };
    equality + adder
}

/// The run's outcome, with the traffic since `start` (bytes sent and
/// received when the run began).
fn outcome(
    ch: &psikit_transport::Channel,
    output: Output,
    phases: Phases,
    start: (u64, u64),
) -> Outcome {
    Outcome {
        output,
        phases,
        bytes_sent: ch.bytes_sent() - start.0,
        bytes_received: ch.bytes_received() - start.1,
    }
}

/// A fast CSPRNG (ChaCha, `StdRng`) seeded from the OS: per-bin
/// randomness (tags, masks) would cost a system call per value with
/// `OsRng`.
fn rng() -> Result<rand::rngs::StdRng, Error> {
    use rand::SeedableRng;
    rand::rngs::StdRng::from_rng(rand::rngs::OsRng)
        .map_err(|e| Error::task("seeding the random generator", e))
}

/// The session id of a run: both seeds and both set sizes.
fn session_id(seeds: &messages::Seeds, sender_size: u64, receiver_size: u64) -> SessionId {
    SessionId::new(
        &[
            &b"psikit circuit psi v1"[..],
            &seeds.hashing.to_le_bytes(),
            &seeds.okvs,
            &sender_size.to_be_bytes(),
            &receiver_size.to_be_bytes(),
        ]
        .concat(),
    )
}

/// Exchanges hellos and checks the peer's: same run, acceptable size, the
/// same key encoding. Returns the peer's hello.
async fn hello(
    ch: &mut psikit_transport::Channel,
    cfg: &CpsiConfig,
    input: &Input<'_>,
) -> Result<messages::Hello, Error> {
    use crate::Violation;
    if let Some(v) = input.values {
        if v.len() != input.keys.len() {
            return Err(Error::Config(format!(
                "{} values for {} keys",
                v.len(),
                input.keys.len()
            )));
        }
    }
    if let App::Threshold(t) = cfg.app {
        if t > 1 << 40 {
            return Err(Error::Config(format!(
                "a threshold of {t} is above any set psikit accepts"
            )));
        }
    }
    let longest = input.keys.iter().map(Vec::len).max().unwrap_or(0);
    let max_item_len = match cfg.app {
        App::Union => u16::try_from(longest)
            .ok()
            .filter(|&l| l <= messages::MAX_UNION_ITEM)
            .ok_or_else(|| {
                Error::Config(format!(
                    "the union carries keys of up to {} bytes, not {longest}",
                    messages::MAX_UNION_ITEM
                ))
            })?,
        _ => 0,
    };
    ch.send_msg(&messages::Hello {
        agreed: cfg.agreed(),
        set_size: input.keys.len() as u64,
        has_values: input.values.is_some(),
        max_item_len,
        key_format: cfg.key_format.clone(),
    })
    .await?;
    let peer: messages::Hello = ch.recv_msg(()).await?;
    if peer.agreed != cfg.agreed() {
        return Err(Violation::Settings(format!(
            "the peer runs {:?} but we run {:?}",
            peer.agreed,
            cfg.agreed()
        ))
        .into());
    }
    crate::common::two_party::check_peer(
        &cfg.key_format,
        &peer.key_format,
        peer.set_size,
        cfg.max_set_size,
    )?;
    Ok(peer)
}

#[cfg(test)]
mod tests;
