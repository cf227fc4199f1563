//! Circuit PSI: both parties get XOR shares of "this bin's item is in the
//! intersection", and compute an aggregate on them (cardinality, sums,
//! a threshold test, the union) without learning the intersection.
//!
//! The framework of Pinkas, Schneider, Tkachenko and Yanai (Eurocrypt
//! 2019) with the equality-preserving compression of Han, Moon and Son
//! (their §3.1 and Fig. 7):
//!
//! 1. **Hashing** (`hashing`): the receiver puts its set in a cuckoo
//!    table of `M = 1.27·N` bins under `d = 3` hash functions, the sender
//!    each of its items in all its bins.
//! 2. **Bin tagging** (`opprf`): the sender draws a random `ℓ`-bit tag
//!    `v_i` per bin and programs an OPPRF so that each of its items in bin
//!    `i` maps to `v_i`; the receiver evaluates it at its item of each bin
//!    (a dummy in empty bins) and gets `v*_i`, equal to `v_i` exactly when
//!    its item is one of the sender's (else equal with probability
//!    `2^-ℓ`, `ℓ = 40 + ⌈log2 M⌉`). The OPPRF is Rindal-Schoppmann's: the
//!    VOLE-based OPRF of [`crate::vole_psi`] (on values of
//!    `40 + ⌈log2 3N_S⌉` bits, as VOLE-PSI's low-communication mode) plus
//!    an OKVS hint.
//! 3. **Equality-preserving compression** (`epc`, [`Epc`]; on by
//!    default): BFV turns `v_i`, `v*_i` into `r_i`, `r*_i` of `ℓ_c = 16-22`
//!    bits, equal exactly when the tags are.
//! 4. **Equality share generation**: CGS's leaves (`leaves`), one random
//!    1-out-of-16 OT per 4-bit block, and a tree of the same OTs as
//!    four-input AND gates over the blocks. On silent OT (`rot`) each OT
//!    is one small VOLE of 4 bits, at every tag length; on IKNP four
//!    random OTs, and the long tags (EPC off) take GMW bit by bit on
//!    Beaver triples (`gmw`, the paper's IKNP-GMW); with
//!    [`OtKind::Kk13`], the CGS equality on KK13
//!    1-out-of-16 OTs (`cgs`, the paper's KK-CGS).
//!
//! Then the application (`apps`, paper §3.3). `epc` is the paper's
//! equality-preserving compression (§4), which shortens the tags from `ℓ`
//! to `ℓ_c` bits between steps 2 and 3 (on by default; `Epc::Off`
//! compares the tags themselves).
//!
//! # Roles
//! The **receiver** holds the cuckoo table; the **sender** the simple
//! table. Front ends name them by command (`receive`, `send`) and take a
//! user's choices as [`Choices`], whose [`Choices::resolve`] gives the
//! role and the [`CpsiConfig`] (the union's learner takes the sender's
//! role). The receiver learns the aggregate (both parties with
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
//!   under 8,192 items and PSTY19's `1.27·N` from there, `hashing::bins`).
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
//!   it knows from the set sizes. The shuffle costs a quarter of a forward
//!   random 1-out-of-16 OT and 19 bits of traffic per switch of an
//!   arbitrary-size Waksman network, `M⌈log2 M⌉ - 2^⌈log2 M⌉ + 1`
//!   switches (26 M at 2^20 items).
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
//!
//! # Files
//! * `vocabulary.rs`: what a user chooses ([`AppKind`], [`OtKind`],
//!   [`Epc`], [`Reveal`], [`Side`]), each parsed and printed in the
//!   command line's words, and the terms the hellos compare ([`Agreed`]);
//! * `choices.rs`: the one policy from a front end's [`Choices`] to a
//!   role and a [`CpsiConfig`] (`config.rs`, with the protocol's own
//!   check of a configuration against its input);
//! * `steps.rs`: the steps both roles run alike (hellos, the comparison,
//!   the aggregates); `sender.rs`, `receiver.rs`: each role's run;
//! * `outcome.rs`: what a run gives a party;
//! * `facade.rs`: runs over a peer, a channel or as a stepper;
//! * the building blocks: `hashing`, `opprf`, `rot` (random OTs both
//!   ways), `gmw`, `cgs`, `leaves`, `bits`, `epc/`, `apps`, `osn`,
//!   `pads`, `product`, `rng`; the wire: [`messages`].

mod apps;
mod bits;
mod cgs;
mod choices;
mod config;
pub mod epc;
pub mod facade;
mod gmw;
mod hashing;
mod leaves;
pub mod messages;
mod opprf;
mod osn;
mod outcome;
mod pads;
mod product;
mod receiver;
mod rng;
mod rot;
mod sender;
mod small;
mod steps;
mod vocabulary;

pub use bits::Bits;
pub use choices::{ChoiceError, Choices, Spelling};
pub(crate) use config::UnionItems;
pub use config::{CpsiConfig, Input};
pub use outcome::{Outcome, Output, Phases, Shares, Step, Sums};
pub use vocabulary::{
    Agreed, App, AppKind, Epc, OtKind, ParseError, Reveal, Role, Side, MAX_VALUE_COLUMNS,
};

#[cfg(test)]
mod tests;
