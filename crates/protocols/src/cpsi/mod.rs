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
//! to `ℓ_c` bits between steps 2 and 3 (on by default; `Epc::Off`
//! compares the tags themselves).
//!
//! # Roles
//! The **receiver** holds the cuckoo table; the **sender** the simple
//! table. The receiver learns the aggregate (both parties with
//! [`CpsiConfig::reveal`] chooses: the receiver, the sender or both),
//! except for the union, which the sender learns: the receiver's items
//! outside the intersection. Both may bring up to [`MAX_VALUE_COLUMNS`]
//! columns of 64-bit values per item for sums; the sender's values travel
//! through the OPPRF, as its tags do (Remark 2; PSTY19 §6).
//!
//! # Security model and leakage
//! Semi-honest security (both parties follow the protocol), 128-bit
//! computational and 40-bit statistical:
//! * silent OT and VOLE under dual LPN with regular noise, at the rule
//!   `psikit_ot::silent::params` enforces for each noise: the OPPRF's VOLE
//!   has field noise and takes `t ≥ -128 / log2(1 - δ)` trees (848 at
//!   `δ = 0.1`), the triples' correlated OT binary noise and `t ≥ -128 /
//!   log2(1 - 2δ)` (400) (Boyle et al., CCS 2019; RRT23 for the code);
//! * fixed-key AES as a random permutation (Guo et al., S&P 2020), and
//!   BFV at the HomomorphicEncryption.org 128-bit bound;
//! * tags of `ℓ = 40 + ⌈log2 M⌉` bits; EPC's noise flooding within `2^-40`
//!   over the whole run; the OKVS and the cuckoo table fail with
//!   probability below `2^-40`, which ends the run with an error and no
//!   output (the table: three distinct locations, a proven bound for sets
//!   under 8,192 items and PSTY19's `1.27·N` from there, [`hashing::bins`]).
//!
//! Each party learns the other's set size, whether the other brings
//! values, and the output of the application, nothing else:
//! * shares: uniformly random bits (and value shares) on each side;
//! * cardinality: `|X ∩ Y|`;
//! * sum: `|X ∩ Y|` and the sum over the intersection of each value
//!   column either party gave (mod 2^64); with a minimum intersection
//!   `k` ([`CpsiConfig::min_intersection`]), both parties first learn
//!   whether `|X ∩ Y| ≥ k`, and nothing more when it is not;
//! * threshold: one bit, whether `|X ∩ Y| ≥ t`;
//! * union: the sender learns the receiver's items outside the
//!   intersection, hence `X ∪ Y` and `|X ∩ Y|`, and the length of the
//!   receiver's longest item (to which the items are padded); the
//!   receiver learns nothing. The items come one encrypted slot per bin,
//!   and the sender can tell which slots do not open (the intersection's);
//!   since it knows which of its own items hash to which bins, slots in
//!   bin order would give it most of `X ∩ Y`. So the bins are first
//!   shuffled by a uniformly random permutation only the receiver knows:
//!   Permute+Share of the sender's membership shares on an oblivious
//!   switching network (module `osn`; Mohassel and Sadeghian, Eurocrypt
//!   2013; as in the set operations of Garimella, Mohassel, Rosulek,
//!   Sadeghian and Singh, CRYPTO 2021, and the shuffle-based union of
//!   Jia, Sun, Liu, Zhang and Chen, USENIX Security 2022), the receiver
//!   permuting its shares and items alike. The sender then sees the
//!   outcomes in an order independent of the bins. It can still tell a
//!   slot that opens empty (an empty bin) from one that does not open;
//!   after the shuffle that only counts the empty bins, `M - |Y|`, which
//!   it knows from the set sizes. The shuffle costs one forward random OT
//!   and 4 bits of traffic per switch of an arbitrary-size Waksman
//!   network, `M⌈log2 M⌉ - 2^⌈log2 M⌉ + 1` switches (26 M at 2^20
//!   items).
//!
//! A party to which the result is not revealed learns nothing from the
//! run (except, for sums with a minimum intersection, whether it was
//! reached).
//!
//! These hold per run. Across runs, outputs combine: a party that runs a
//! cardinality or sum twice with sets differing in one item learns that
//! item's membership (differencing), and a minimum intersection does not
//! stop it (two runs above the minimum differ by one). Deployments that
//! answer repeated queries must limit them, as `psikit serve`'s
//! `--query-budget` does for the unbalanced protocols.
//!
//! An opened result that no run on the two set sizes can give (a count
//! above the smaller set, a union bringing more items than the provider
//! has) is refused with an error: semi-honest security gives no
//! integrity, but a fault must not print as a result.

pub mod apps;
pub mod bits;
pub mod cgs;
pub mod epc;
pub mod facade;
pub mod gmw;
pub mod hashing;
pub mod leaves;
pub mod messages;
pub mod opprf;
mod osn;
mod outcome;
pub mod product;
mod receiver;
pub mod rot;
mod sender;

pub use outcome::{Outcome, Output, Phases, Shares, Step, Sums};
pub use receiver::run_receiver;
pub use rot::OtKind;
pub use sender::run_sender;

use psikit_ot::{ExtConfig, SessionId};

use outcome::{check_opened, outcome, Meter};

use crate::{Error, Violation};

/// The run's stages as both roles tell their `Progress`: the hashing into
/// bins, the OPPRF, the comparison (EPC, triples, the equality circuit),
/// and the application on the membership shares.
const STAGE_HASHING: &str = "hashing";
const STAGE_OPPRF: &str = "OPPRF";
const STAGE_COMPARE: &str = "comparing";
const STAGE_RESULT: &str = "computing the result";

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

/// Who learns the application's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reveal {
    Receiver,
    Sender,
    Both,
}

impl Reveal {
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
        [Reveal::Receiver, Reveal::Sender, Reveal::Both]
            .into_iter()
            .find(|r| r.code() == code)
    }
}

/// Most value columns a party brings to a sum.
pub const MAX_VALUE_COLUMNS: usize = 16;

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

/// How to run circuit PSI.
#[derive(Clone, Debug)]
pub struct CpsiConfig {
    pub app: App,
    /// Which OT extension feeds the equality test (default silent).
    pub ot: OtKind,
    /// Equality-preserving compression (default automatic).
    pub epc: Epc,
    /// Who learns the result (default: the receiver; for the union, which
    /// only the sender can learn, the sender).
    pub reveal: Reveal,
    /// Sums only: reveal the sums only if the intersection has at least
    /// this many items (both parties then learn whether it has; 0: no
    /// bound). Sums over a handful of items would expose single values.
    pub min_intersection: u64,
    /// Sums only: also reveal the inner product `Σ x·y` over the
    /// intersection of the sender's first value column `x` and the
    /// receiver's first `y`, with `y < 2^product_bits` (1 to 64; 0: no
    /// inner product). It costs `product_bits` OTs and about
    /// `6.5·product_bits` bytes per bin.
    pub product_bits: u8,
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
            reveal: match app {
                App::Union => Reveal::Sender,
                _ => Reveal::Receiver,
            },
            min_intersection: 0,
            product_bits: 0,
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
            reveal: self.reveal,
            min_intersection: self.min_intersection,
            product_bits: self.product_bits,
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
/// key; repeated keys would be counted twice) and, for sums, value
/// columns of one value per key (at most [`MAX_VALUE_COLUMNS`]).
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub keys: &'a [Vec<u8>],
    pub values: &'a [Vec<u64>],
}

/// How the equality shares are made (paper §3.2, Table 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Equality {
    /// GMW bit by bit: `ℓ - 1` AND gates on triples from random OTs; the
    /// least traffic, so it compares the long tags when EPC is off.
    Gmw,
    /// CGS's 4-bit leaves as 1-out-of-16 OTs built from the same random
    /// OTs ([`leaves`]), then `⌈ℓ/4⌉ - 1` gates: fewer OTs than GMW (25
    /// instead of 32 per bin at 17 bits) for a little more traffic; used
    /// on EPC's short outputs.
    Leaves,
    /// CGS on KK13 1-out-of-16 OTs ([`cgs`], the paper's KK-CGS).
    Kk13,
}

impl Equality {
    fn of(ot: OtKind, epc: bool) -> Self {
        match (ot, epc) {
            (OtKind::Kk13, _) => Equality::Kk13,
            (_, true) => Equality::Leaves,
            (_, false) => Equality::Gmw,
        }
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
    let params = cfg.epc.params(ell, m)?;
    let equality = Equality::of(cfg.ot, params.is_some());
    let (compared, bits) = match params {
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
    let needed = triples_needed(cfg, equality, m, bits);
    let mut triples = gmw::Triples::generate(&mut rots, ch, needed).await?;
    let shares = match equality {
        Equality::Kk13 => {
            let mut cgs = cgs::Cgs::setup(ch, &mut rots, sid, &ext).await?;
            let mut and = cgs.triples(ch, cgs::triples_needed(m, bits)).await?;
            phases.triples = meter.mark(ch);
            cgs.equal(ch, &mut and, &compared, bits).await?
        }
        Equality::Leaves => {
            phases.triples = meter.mark(ch);
            leaves::equal(ch, &mut rots, &mut triples, &compared, bits, leader).await?
        }
        Equality::Gmw => {
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
/// KK13: the CGS equality makes its own), and the adder of a threshold or
/// of a sum's minimum intersection.
fn triples_needed(cfg: &CpsiConfig, equality: Equality, m: usize, ell: u32) -> usize {
    let bound = match cfg.app {
        App::Threshold(t) => Some(t),
        App::Sum if cfg.min_intersection > 0 => Some(cfg.min_intersection),
        _ => None,
    };
    let adder = bound.map_or(0, |t| {
        gmw::adder_cost(apps::threshold_bits((m as u64).max(t)))
    });
    adder
        + match equality {
            Equality::Kk13 => 0,
            Equality::Leaves => cgs::triples_needed(m, ell),
            Equality::Gmw => gmw::equality_cost(m, ell),
        }
}

/// The aggregates both roles run alike: the cardinality, the sums (on
/// this party's `weights`, [`apps::sums`]) and the threshold test.
async fn aggregate(
    ch: &mut psikit_transport::Channel,
    c: &mut Compared,
    me: Role,
    cfg: &CpsiConfig,
    weights: &[&[u64]],
    columns: (usize, usize),
) -> Result<Output, Error> {
    let Compared {
        shares,
        rots,
        triples,
    } = c;
    match cfg.app {
        App::Cardinality => {
            let count = apps::count(ch, rots, shares, me).await?;
            Ok(Output::Cardinality(
                apps::open_one(ch, count, me, cfg.reveal).await?,
            ))
        }
        App::Sum => {
            let agreed = cfg.agreed();
            apps::sums(ch, rots, triples, shares, me, weights, columns, &agreed).await
        }
        App::Threshold(t) => {
            let count = apps::count(ch, rots, shares, me).await?;
            let max = (shares.len() as u64).max(t);
            let bit = apps::at_least(ch, triples, count, t, max, me == Role::Sender).await?;
            let open = apps::open_one(ch, u64::from(bit), me, cfg.reveal).await?;
            // Each party's share is a bit as a number: the sum is 0, 1 or
            // 2, and its low bit is their XOR.
            match open {
                Some(b) if b > 2 => Err(Violation::Impossible(format!(
                    "the threshold test opened to {b}, not the sum of two bits"
                ))
                .into()),
                open => Ok(Output::Threshold(open.map(|b| b & 1 == 1))),
            }
        }
        App::Shares | App::Union => Err(Error::Internal("not an aggregate")),
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

/// Refuses a configuration or input the protocol cannot run.
fn check_config(cfg: &CpsiConfig, input: &Input<'_>) -> Result<(), Error> {
    let bad = |why: String| Err(Error::Config(why));
    if input.values.len() > MAX_VALUE_COLUMNS {
        return bad(format!(
            "at most {MAX_VALUE_COLUMNS} value columns, not {}",
            input.values.len()
        ));
    }
    if let Some(v) = input.values.iter().find(|v| v.len() != input.keys.len()) {
        return bad(format!("{} values for {} keys", v.len(), input.keys.len()));
    }
    if !input.values.is_empty() && cfg.app != App::Sum && cfg.app != App::Shares {
        return bad(format!(
            "the {} application takes no values",
            cfg.app.name()
        ));
    }
    for (what, bound) in [
        ("threshold", cfg.app.threshold()),
        ("minimum intersection", cfg.min_intersection),
    ] {
        if bound > 1 << 40 {
            return bad(format!(
                "a {what} of {bound} is above any set psikit accepts"
            ));
        }
    }
    if cfg.min_intersection > 0 && cfg.app != App::Sum {
        return bad("a minimum intersection applies to sums only".into());
    }
    if cfg.product_bits > 0 && (cfg.app != App::Sum || input.values.is_empty()) {
        return bad("an inner product needs the sum application and a value column".into());
    }
    if cfg.product_bits > 64 {
        return bad(format!("product bits: 1 to 64, not {}", cfg.product_bits));
    }
    if cfg.app == App::Union && cfg.reveal != Reveal::Sender {
        return bad(
            "the union is revealed to the sender (the party holding the simple table) alone".into(),
        );
    }
    Ok(())
}

/// Exchanges hellos and checks the peer's: same run, acceptable size, the
/// same key encoding. Returns the peer's hello.
async fn hello(
    ch: &mut psikit_transport::Channel,
    cfg: &CpsiConfig,
    input: &Input<'_>,
) -> Result<messages::Hello, Error> {
    use crate::Violation;
    check_config(cfg, input)?;
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
        value_columns: input.values.len() as u8,
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
    if cfg.product_bits > 0 && peer.value_columns == 0 {
        return Err(Error::Config(
            "the inner product needs a value column at each party; the peer gave none".into(),
        ));
    }
    Ok(peer)
}

#[cfg(test)]
mod tests;
