//! Equality-preserving compression (EPC) of Han, Moon and Son, "Improved
//! Circuit-based PSI via Equality Preserving Compression" (§4, Figures 5-6,
//! Lemma 1, Theorem 1; parameters §6.1, Table 3).
//!
//! The sender holds tags `v ∈ Z_{2^ℓ}^M` (random bin tags of the circuit
//! PSI's OPPRF step), the receiver `v* ∈ Z_{2^ℓ}^M`. They end with
//! `r` (sender) and `r*` (receiver) in `Z_p^M`, `p` a prime of `ℓ_c` bits,
//! with `r_i = r*_i` exactly when `v_i = v*_i`: never a false equality or
//! inequality, because every noise bound below is a worst-case bound and
//! `D = Σ (v_i - v*_i)² < p`. The equality share generation then works on
//! `ℓ_c` bits instead of `ℓ`.
//!
//! Semi-honest security (Theorem 1): the receiver sees only fresh BFV
//! ciphertexts under the sender's key; the sender decrypts `D + r*` with
//! `r*` uniform, whose noise is flooded within `2^-σ` over the whole run
//! (σ = 40 for one run, more for each bucket of a job: [`EpcParams::new`];
//! the paper floods per coefficient). Leakage: the number of
//! batches, `ceil(M/n)`.
//!
//! # Protocol (Fig. 6), streaming per batch of `n` slots (the ring degree,
//! 4096 or 8192: [`DEGREES`])
//!
//! 1. [`EpcSender::new`] makes a ternary secret key and sends its public
//!    key ([`EpcPublicKey`]); [`EpcReceiver::new`] takes it.
//! 2. Per batch `k` ([`EpcParams::batch_range`]), [`EpcSender::encrypt_batch`]
//!    decomposes the batch's tags (padded with 0) into `u` base-`w` digit
//!    vectors `m_i` and `m_u = Σ_i m_i²`, and sends their `u + 1`
//!    secret-key encryptions ([`EpcSenderBatch`]). No ciphertext product is
//!    ever computed.
//! 3. [`EpcReceiver::evaluate_batch`] decomposes its tags (padded with 1)
//!    into `m*_i` and computes
//!    `ct_d = ct_u + Σ ct_i ⊙ (-2·m*_i) + (Σ_i m*_i² + r*)`, an encryption
//!    of `D + r*` since `D = Σv_i² - 2Σv_i·v*_i + Σv*_i²`; adds a fresh
//!    public-key encryption of zero whose noise is uniform in
//!    `[-B_fp, B_fp]`; switches to `q_1`, drops low bits that hold only
//!    noise, and replies ([`EpcReply`]). Its output is `r*`.
//! 4. [`EpcSender::decrypt_reply`] decrypts `r = D + r*`.
//!
//! Batches are independent: a party can stream them (bounded memory: one
//! batch is `(u + 1)` ciphertexts, about 0.56 MB at `ℓ_c = 16`), pipeline
//! them with its peer, or run them on the rayon pool
//! ([`EpcSender::encrypt_all`], [`EpcReceiver::evaluate_all`],
//! [`EpcSender::decrypt_all`]).
//!
//! # Parameters ([`EpcParams::new`]) and where each number comes from
//!
//! | quantity | rule | source |
//! |---|---|---|
//! | `n` | the smallest of [`DEGREES`] (4096, 8192) whose 128-bit modulus bound holds the run's flooding | §6.1 (4096 is the smallest ring with a depth-1 plaintext product) |
//! | `p` | the largest prime of `ℓ_c` bits with `p ≡ 1 mod 2n` (16 → 40961) | §6.1, batching condition (1) |
//! | `w`, `u` | largest `w` with `p > u·(w-1)²`, `u = ceil(ℓ / log2 w)` | §4.1 (3), §6.1 |
//! | `B_fresh` | 23: fhe's error has `\|e\| ≤ 2·11`, its `floor(Q·m/p)` encoding adds `< 1` | `psikit_he::FRESH_NOISE_BOUND` |
//! | `B*` | `B_fresh·(1 + u·n·(p-1)/2) + 1` | Lemma 1 / Theorem 1, with `δ_R = n`, multipliers lifted centered (`\|c\| ≤ (p-1)/2`); fhe's exact `floor(Q·m/p)` encoding removes Lemma 1's `δ_R·p²` term |
//! | `B_fp` | `2^(σ + c)·B*` with `2^c ≥` the run's reply coefficients, uniform in `[-B_fp, B_fp]` | Theorem 1, σ (40 for one run) over the run (the paper: per coefficient, `c = 0`) |
//! | `B_pk` | `n·22² + 22 + n·22` (public-key encryption of zero) | `psikit_he::public_key_noise_bound` |
//! | `Q = q_1·q_2` | smallest, two primes `≡ 1 mod 2n` of `ceil(b/2)`, `floor(b/2)` bits, with `4p·(ceil((B* + B_pk + B_fp)/q_2) + n + 1) ≤ q_1` | Theorem 1's `q > p·(B_fp + B* + 2p)`, made exact: the reply is decrypted mod `q_1` after an exact switch (noise `/q_2`, `+ (n+1)/2`), needs noise `< q_1/(2p)`, and keeps a factor 2 ([`MARGIN_BITS`]) |
//! | 128-bit | `log2 Q ≤ 109` at `n = 4096`, `≤ 218` at 8192 (no special prime) | HomomorphicEncryption.org table, `psikit_he::security::check_128` |
//! | dropped bits `d` | largest with `4p·(switched noise + 2^(d-1)·(n+1)) ≤ q_1` | rounding `c0, c1` adds `≤ 2^(d-1)·(1 + n)` |
//!
//! Our `Q` is about 8 bits above Table 3's `log q` (84 at `ℓ_c = 16`): the
//! paper's "empirically `log q ≈ σ + 2 log p + log n`" uses typical noise,
//! while we bound the worst case so that decryption can never fail (the
//! tests measure the evaluation noise 9 bits below `B*`: 25-32 bits against
//! bounds of 35-41). The sets derived under the paper's convention
//! (`n = 4096`, flooding per coefficient; `EpcParams::per_coefficient`,
//! kept to compare with Table 3; a run floods over all its coefficients,
//! which adds `c ≈ log2 M` bits to `Q` and at `M = 1.27·2^20` takes
//! `n = 8192`: see "Flooding, precisely"; `log2 Q` with the moduli' bit
//! sizes; `w`/`u` as in Table 3):
//!
//! | `ℓ_c` | `p` | `log2 Q` (bits of `q_1`, `q_2`) | `d` | `ℓ = 57`: `w`, `u` | `ℓ = 61`: `w`, `u` |
//! |---|---|---|---|---|---|
//! | 16 | 40961 | 92.0 (46, 46); Table 3: 84 | 15 | 65, 10 | 62, 11 |
//! | 18 | 188417 | 96.0 (48, 48); Table 3: 88 | 15 / 14 | 154, 8 | 145, 9 |
//! | 20 | 1032193 | 101.0 (51, 50); Table 3: 92 | 16 | 385, 7 | 360, 8 |
//! | 22 | 4169729 | 105.0 (53, 52); Table 3: 96 | 16 | 834, 6 | 772, 7 |
//! | 24 | 16760833 | 109.0 (55, 54) | 16 | 1672, 6 | 1672, 6 |
//!
//! At `ℓ = 61` a sender batch is 565,636 bytes at `ℓ_c = 16` (12
//! ciphertexts of 47,136) and 430,340 at `ℓ_c = 22`; a reply 31,748 and
//! 37,892 bytes.
//!
//! `ℓ_c` from 16 to 24 is accepted; 25 and more need more than 109 bits
//! and are refused, as is any `ℓ` outside 1..=127 (tags above 64 bits
//! come from sets beyond 2^23 items, or a job's buckets at σ > 40).
//!
//! # Cost
//!
//! Measured in process (`tests::epc_measure`, ignored; release build,
//! this 2-core VM under a load of 3-5 from other builds, so wall times are
//! high) at the paper's 2^20 set size, `M = 1.27·2^20` bins, `ℓ = 61`,
//! one thread per party (CPU seconds):
//!
//! | `ℓ_c` | sender encrypt | receiver evaluate | sender decrypt | S → R | R → S |
//! |---|---|---|---|---|---|
//! | 16 | 1.6 s | 1.4 s | 0.12 s | 184.4 MB | 10.3 MB |
//! | 22 | 0.7 s | 0.9 s | 0.11 s | 140.3 MB | 12.4 MB |
//!
//! The paper reports 6.4 s and 187 MB (`ℓ_c = 16`), 152.8 MB (`ℓ_c = 22`)
//! for its whole EPC. Batches run in parallel with rayon
//! (`*_all`); each party's work is linear in the batch count.
//!
//! # Wire messages (protocol [`psikit_transport::ids::CIRCUIT_PSI`])
//!
//! | kind | direction | message | size |
//! |---|---|---|---|
//! | 20 | S → R | [`EpcPublicKey`]: `ℓ`, `ℓ_c` (one byte each), seed ‖ `b` | `2 + 32 + n·log Q/8` |
//! | 21 | S → R | [`EpcSenderBatch`]: batch index (u32), `u + 1` ciphertexts, each seed ‖ `c0` | `4 + (u+1)·(32 + n·log Q/8)` |
//! | 22 | R → S | [`EpcReply`]: batch index (u32), `c0 ‖ c1` mod `q_1`, `bits(q_1) - d` bits per coefficient | `4 + 2·n·(bits(q_1) - d)/8` |
//!
//! Versioned by the frame; sizes are fixed by `(ℓ, ℓ_c)`, so decoders take
//! exactly that many bytes, check every residue against its modulus, and
//! refuse a public key made for other `(ℓ, ℓ_c)`.
//!
//! # Flooding, precisely
//!
//! Flooding `B*` by `2^40` (Theorem 1) bounds the statistical distance of
//! one reply *coefficient* by `2^-41`; over a whole run it would be up to
//! `M·2^-41` (about `2^-20` at `M = 2^20`), the paper's convention.
//! psikit floods by `2^(40 + c)` with `2^c` at least the run's reply
//! coefficients, so the whole run stays within `2^-40`. At `M = 1.27·2^20`
//! that is 61 bits of flooding, which needs about 116-bit moduli: above
//! the 109 bits the 128-bit table allows at `n = 4096`, so such runs take
//! `n = 8192`, where `ℓ_c = 16` has no prime `≡ 1 mod 16384` and the
//! smallest `ℓ_c` is 17 ([`crate::cpsi::Epc::Auto`] picks it).

mod batch;
mod digits;
pub mod driver;
mod messages;
mod params;
mod receiver;
mod sender;

#[cfg(test)]
mod tests;

#[cfg(feature = "fuzzing")]
pub(crate) use messages::{fuzz_decode, FUZZED};
pub use messages::{
    EpcPublicKey, EpcReply, EpcSenderBatch, KIND_PUBLIC_KEY, KIND_REPLY, KIND_SENDER_BATCH,
};
pub use params::{EpcParams, DEGREES, MARGIN_BITS, MAX_ELL, MIN_ELL};
pub use receiver::EpcReceiver;
pub use sender::EpcSender;
