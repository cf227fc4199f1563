//! psikit's oblivious-transfer layer.
//!
//! Security target: 128-bit computational, 40-bit (or better) statistical.
//!
//! | module | protocol | security |
//! |---|---|---|
//! | [`base`] | Masny-Rindal "endemic OT" (CCS 2019, ePrint 2019/706) on ristretto255 | malicious (UC, endemic; programmable random oracle, interactive DDH) |
//! | [`ext`] | IKNP03 OT extension ("Extending oblivious transfers efficiently", CRYPTO 2003) | semi-honest |
//! | [`ext`] | KOS15 ("Actively secure OT extension with optimal overhead", CRYPTO 2015) with the corrected consistency check of the updated ePrint 2015/546 | malicious |
//! | [`kk13`] | KK13 1-out-of-N OT extension (Kolesnikov-Kumaresan, CRYPTO 2013) with a Walsh-Hadamard code, N ≤ 256 | semi-honest |
//! | [`aes_hash`] | fixed-key AES CR/TCCR hashes (Guo-Katz-Wang-Yu, IEEE S&P 2020) | ideal-permutation model |
//!
//! What the parties get from one extension ([`ext::OtExtSender::extend`],
//! [`ext::OtExtReceiver::extend`]):
//!
//! * **correlated OT** (COT): the sender holds `q_i` and the global `Δ`, so
//!   its two messages are `q_i` and `q_i ⊕ Δ`; the receiver, with its chosen
//!   bit `b_i`, holds `t_i = q_i ⊕ b_i·Δ`;
//! * **random OT** on demand: message `(i, b)` is `H(q_i ⊕ b·Δ)` and the
//!   receiver's is `H(t_i)` with the CR hash in semi-honest mode, and
//!   `H(i, ·)`, the TCCR hash tweaked by the OT's index, in malicious mode
//!   (where the receiver picks its rows; `aes_hash`). Rindal-Rosulek PSI only ever needs a few of
//!   the messages, so hashing is lazy ("hash only on demand", RR16 §4.1);
//!   bulk helpers hash everything in parallel when needed, and
//!   `extend_random` hashes everything during the extension when all
//!   messages are wanted.
//!
//! Base OTs are run once per session (128 for 1-out-of-2, 256 for KK13) and
//! the PRGs they seed serve any number of later extensions.
//!
//! ```
//! use psikit_ot::{ChoiceBits, ExtConfig, OtExtReceiver, OtExtSender, Security, SessionId};
//! use psikit_transport::{Channel, Limits};
//! use rand::rngs::OsRng;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let (mut a, mut b) = Channel::memory_pair(Limits::default());
//! let sid = SessionId::new(b"example session");
//! let alice = tokio::spawn(async move {
//!     let cfg = ExtConfig::default();
//!     let mut s = OtExtSender::setup(&mut a, &sid, Security::Malicious, cfg, &mut OsRng).await?;
//!     s.extend(&mut a, 1000).await // 1000 random OTs, as sender
//! });
//! let cfg = ExtConfig::default();
//! let mut r = OtExtReceiver::setup(&mut b, &sid, Security::Malicious, cfg, &mut OsRng).await?;
//! // Receiver-chosen, biased choice bits: 100 ones among 1000.
//! let choices = ChoiceBits::random_with_ones(1000, 100, &mut OsRng);
//! let bob = r.extend(&mut b, &choices).await?;
//! let alice = alice.await.unwrap()?;
//! // Messages are hashed only when asked for.
//! assert_eq!(bob.message(7), alice.message(7, choices.get(7)));
//! // The same OTs as correlated OT: t_i = q_i ⊕ b_i·Δ.
//! assert_eq!(bob.t()[7], alice.correlated(7)[usize::from(choices.get(7))]);
//! # Ok::<(), psikit_ot::OtError>(())
//! # }).unwrap();
//! ```
//!
//! # Wire format
//! All messages use protocol id [`PROTOCOL_ID`] (3); the kinds are in
//! [`kind`]. Payload integers are big-endian, matrix blocks are 16-byte
//! little-endian words. Every decoder checks exact sizes and answers a
//! malformed message with an error (and an error frame to the peer), never a
//! panic.
//!
//! # Threads
//! PRG expansion, transposition, the KOS check and bulk hashing run on rayon
//! across batches of OTs, on the pool in [`ext::ExtConfig`] (or rayon's
//! global pool). A one-thread pool works; the protocol is identical.

pub mod aes_hash;
pub mod base;
pub mod choice;
mod error;
pub mod ext;
pub mod gather;
pub mod gf128;
pub mod kk13;
mod matrix;
pub mod messages;
mod session;
pub mod silent;
pub mod transpose;

pub use base::{BaseReceiverOutput, BaseSenderOutput};
pub use choice::ChoiceBits;
pub use error::OtError;
pub use ext::{
    Confirm, ExtConfig, OtExtReceiver, OtExtSender, RandomReceiverOts, RandomSenderOts,
    ReceiverOts, Security, SenderOts, BASE_OTS,
};
pub use kk13::{Kk13Receiver, Kk13ReceiverOts, Kk13Sender, Kk13SenderOts};
pub use messages::{kind, PROTOCOL_ID};
pub use session::SessionId;
