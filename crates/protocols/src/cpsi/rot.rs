//! Random OTs in both directions, from silent OT or IKNP: what the
//! equality share generation and the applications consume.
//!
//! Each party is the OT sender in one direction and the receiver in the
//! other. The circuit-PSI sender ("leader") runs its sending side first in
//! every step, the receiver its receiving side first, so the two parties'
//! calls always pair up.
//!
//! Silent correlated OTs (`q`, `t = q ⊕ b·Δ`) become random OTs by the
//! correlation-robust hash of fixed-key AES: messages `H(q)`, `H(q ⊕ Δ)`,
//! the receiver's `H(t)` (GKWY20, the semi-honest IKNP hashing). IKNP's
//! random OTs come hashed already. Messages are kept whole: the triples
//! use one bit of each, the applications a word or a key.

use psikit_ot::aes_hash;
use psikit_ot::silent::{SilentReceiver, SilentSender};
use psikit_ot::{ChoiceBits, ExtConfig, OtExtReceiver, OtExtSender, Security, SessionId};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rayon::prelude::*;

use super::bits::Bits;
use crate::Error;

/// Which OT extension makes the random OTs of the equality share
/// generation (paper Table 2: IKNP-GMW and Silent-GMW).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtKind {
    /// IKNP: fastest to compute, 128 bits of traffic per OT.
    Iknp,
    /// Silent OT (dual LPN): about one bit of traffic per OT, more work.
    Silent,
}

impl OtKind {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            OtKind::Iknp => "iknp",
            OtKind::Silent => "silent",
        }
    }
}

/// Most OTs made by one extension here: keeps each step's memory at a few
/// tens of MB whatever the total, and matches one silent part.
pub const CHUNK: usize = psikit_ot::silent::params::MAX_PART;

/// The sending side of `n` random OTs: both messages.
pub struct Sent {
    pub m0: Vec<u128>,
    pub m1: Vec<u128>,
}

/// The receiving side: random choice bits and the chosen messages.
pub struct Received {
    pub choices: Bits,
    pub chosen: Vec<u128>,
}

enum Sender {
    Silent(SilentSender),
    Iknp(OtExtSender),
}

enum Receiver {
    Silent(SilentReceiver),
    Iknp(OtExtReceiver),
}

/// One party's OT extensions in both directions.
pub struct Rots {
    sender: Sender,
    receiver: Receiver,
    leader: bool,
}

impl Rots {
    /// Base OTs for both directions (semi-honest).
    pub async fn setup(
        ch: &mut Channel,
        sid: &SessionId,
        kind: OtKind,
        leader: bool,
        config: &ExtConfig,
    ) -> Result<Self, Error> {
        let (out, back) = (sid.derive("cpsi-rot-0"), sid.derive("cpsi-rot-1"));
        let (mine, theirs) = match leader {
            true => (out, back),
            false => (back, out),
        };
        let (sender, receiver) = match leader {
            true => {
                let sender = Sender::setup(ch, &mine, kind, config).await?;
                (sender, Receiver::setup(ch, &theirs, kind, config).await?)
            }
            false => {
                let receiver = Receiver::setup(ch, &theirs, kind, config).await?;
                (Sender::setup(ch, &mine, kind, config).await?, receiver)
            }
        };
        Ok(Self {
            sender,
            receiver,
            leader,
        })
    }

    /// `n` random OTs each way (`n` at most [`CHUNK`] for bounded memory):
    /// this party's sending side and its receiving side.
    pub async fn both(&mut self, ch: &mut Channel, n: usize) -> Result<(Sent, Received), Error> {
        match self.leader {
            true => {
                let sent = self.sender.run(ch, n).await?;
                Ok((sent, self.receiver.run(ch, n).await?))
            }
            false => {
                let received = self.receiver.run(ch, n).await?;
                Ok((self.sender.run(ch, n).await?, received))
            }
        }
    }

    /// `n` random OTs in one direction: the leader sends if `leader_sends`.
    pub async fn one_way(
        &mut self,
        ch: &mut Channel,
        n: usize,
        leader_sends: bool,
    ) -> Result<Either, Error> {
        match self.leader == leader_sends {
            true => Ok(Either::Sent(self.sender.run(ch, n).await?)),
            false => Ok(Either::Received(self.receiver.run(ch, n).await?)),
        }
    }
}

/// This party's side of a one-way batch.
pub enum Either {
    Sent(Sent),
    Received(Received),
}

impl Sender {
    async fn setup(
        ch: &mut Channel,
        sid: &SessionId,
        kind: OtKind,
        config: &ExtConfig,
    ) -> Result<Self, Error> {
        let security = Security::SemiHonest;
        Ok(match kind {
            OtKind::Silent => Sender::Silent(
                SilentSender::setup(ch, sid, security, config.clone(), &mut OsRng).await?,
            ),
            OtKind::Iknp => Sender::Iknp(
                OtExtSender::setup(ch, sid, security, config.clone(), &mut OsRng).await?,
            ),
        })
    }

    async fn run(&mut self, ch: &mut Channel, n: usize) -> Result<Sent, Error> {
        if n == 0 {
            return Ok(Sent {
                m0: Vec::new(),
                m1: Vec::new(),
            });
        }
        match self {
            Sender::Silent(s) => {
                let delta = s.delta();
                let q = s.cot(ch, n, &mut OsRng).await?;
                let hash = |offset: u128| {
                    let mut m: Vec<u128> = q.iter().map(|x| x ^ offset).collect();
                    m.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
                    m
                };
                Ok(Sent {
                    m0: hash(0),
                    m1: hash(delta),
                })
            }
            Sender::Iknp(s) => {
                let ots = s.extend_random(ch, n).await?;
                Ok(Sent {
                    m0: ots.messages_for(false).to_vec(),
                    m1: ots.messages_for(true).to_vec(),
                })
            }
        }
    }
}

impl Receiver {
    async fn setup(
        ch: &mut Channel,
        sid: &SessionId,
        kind: OtKind,
        config: &ExtConfig,
    ) -> Result<Self, Error> {
        let security = Security::SemiHonest;
        Ok(match kind {
            OtKind::Silent => Receiver::Silent(
                SilentReceiver::setup(ch, sid, security, config.clone(), &mut OsRng).await?,
            ),
            OtKind::Iknp => Receiver::Iknp(
                OtExtReceiver::setup(ch, sid, security, config.clone(), &mut OsRng).await?,
            ),
        })
    }

    async fn run(&mut self, ch: &mut Channel, n: usize) -> Result<Received, Error> {
        if n == 0 {
            return Ok(Received {
                choices: Bits::zeros(0),
                chosen: Vec::new(),
            });
        }
        match self {
            Receiver::Silent(r) => {
                let out = r.cot(ch, n, &mut OsRng).await?;
                let mut m: Vec<u128> = out.t.to_vec();
                m.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
                Ok(Received {
                    choices: bits_of(&out.choices),
                    chosen: m,
                })
            }
            Receiver::Iknp(r) => {
                let choices = ChoiceBits::random(n, &mut OsRng);
                let ots = r.extend_random(ch, &choices).await?;
                Ok(Received {
                    choices: bits_of(&choices),
                    chosen: ots.messages().to_vec(),
                })
            }
        }
    }
}

fn bits_of(choices: &ChoiceBits) -> Bits {
    let words = choices
        .as_bytes()
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    Bits::from_words(words, choices.len())
}
