//! What the two parties of a job agree on before any bucket runs, and the
//! job's own messages (protocol id `JOB`): the hello that states each
//! side's terms, the buckets each side has committed, the start of each
//! bucket and the end of the job.
//!
//! A new job's id is the hash of both parties' random nonces, so neither
//! chooses it alone and it is fixed only after both inputs are (it keys
//! the bucket hash, see `capacity.rs`). A resumed job states its id; the
//! two sides must state the same one. Every difference is refused on both
//! sides, in the flags' terms.

use psikit_io::MAX_KEY_FORMAT;
use psikit_transport::{ids, Channel, DecodeError, Message, Reader, TransportError, Writer};
use sha2::{Digest, Sha256};

use super::capacity::{shape, Shape, MAX_BUCKETS};
use super::kind::{kind_refusal, JobKind};
use crate::balanced::{Protocol, Role};
use crate::common::messages::wire_messages;
use crate::common::two_party::{job_refusal, key_refusal, Refusal};
use crate::error::Error;

pub const PROTOCOL_ID: u8 = ids::JOB;

/// A job's id: 128 bits, shown as hex.
pub type JobId = [u8; 16];

/// Which job a party comes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// A new job.
    New,
    /// The job this side's job directory holds; `confirmed` once the peer
    /// showed it stored the job too (its journal arrived). A side commits
    /// buckets only once confirmed, so an unconfirmed job has nothing to
    /// lose: if the peer crashed before storing it and now starts anew,
    /// both start a new job.
    Resume { job_id: JobId, confirmed: bool },
}

/// A party's first message of a job (kind 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobHello {
    pub role: Role,
    pub which: Which,
    /// This side's share of a new job's id (sent always, so that an
    /// unconfirmed job can be replaced by a new one in the same hello).
    pub nonce: [u8; 16],
    /// The protocol and its terms.
    pub kind: JobKind,
    /// `psikit_io::KeySpec::key_format` (never data).
    pub key_format: String,
    /// Rows of this side's input that hold a key (public: they size the
    /// buckets' padding).
    pub rows: u64,
    /// The most items this side runs in one bucket (from its memory
    /// budget); the job uses the smaller of the two.
    pub max_bucket_items: u64,
    /// How many buckets this side runs at once, each over a connection of
    /// its own (1..=[`MAX_LANES`]); a connection uses the smaller of the
    /// two. Not a term of the job: a resumed job may change it.
    pub lanes: u8,
}

/// The most buckets a side runs at once.
pub const MAX_LANES: u8 = 16;

impl Message for JobHello {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(match self.role {
            Role::Sender => 0,
            Role::Receiver => 1,
        });
        match self.which {
            Which::New => w.u8(0),
            Which::Resume { job_id, confirmed } => w.u8(1 + u8::from(confirmed)).bytes(&job_id),
        };
        w.bytes(&self.nonce);
        self.kind.write(w);
        w.string(&self.key_format)
            .u64(self.rows)
            .u64(self.max_bucket_items)
            .u8(self.lanes);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let role = match r.u8("role")? {
            0 => Role::Sender,
            1 => Role::Receiver,
            other => return Err(DecodeError::invalid("role", other)),
        };
        let which = match r.u8("job")? {
            0 => Which::New,
            tag @ (1 | 2) => Which::Resume {
                job_id: r.array("job id")?,
                confirmed: tag == 2,
            },
            other => return Err(DecodeError::invalid("job", other)),
        };
        Ok(Self {
            role,
            which,
            nonce: r.array("nonce")?,
            kind: JobKind::read(r)?,
            key_format: r.string(MAX_KEY_FORMAT, "key format")?,
            rows: r.u64("rows")?,
            max_bucket_items: match r.u64("bucket limit")? {
                0 => return Err(DecodeError::invalid("bucket limit", 0)),
                n => n,
            },
            lanes: match r.u8("lanes")? {
                n @ 1..=MAX_LANES => n,
                n => return Err(DecodeError::invalid("lanes", n)),
            },
        })
    }
}

/// The buckets a party has committed (kind 2): one bit per bucket, bucket
/// `b` in bit `b % 8` of byte `b / 8`; exactly as many bytes as the job's
/// bucket count needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub bits: Vec<u8>,
}

impl Message for Committed {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 2;
    /// The job's bucket count.
    type Bounds<'a> = u64;

    fn write(&self, w: &mut Writer) {
        w.count(self.bits.len()).bytes(&self.bits);
    }

    fn read(r: &mut Reader<'_>, buckets: u64) -> Result<Self, DecodeError> {
        let want = buckets.min(MAX_BUCKETS).div_ceil(8);
        let len = r.count(want, 1, "committed buckets")?;
        if len as u64 != want {
            return Err(DecodeError::invalid("committed buckets", len));
        }
        let bits = r.bytes(len, "committed buckets")?.to_vec();
        if !buckets.is_multiple_of(8) && bits.last().is_some_and(|b| b >> (buckets % 8) != 0) {
            return Err(DecodeError::invalid(
                "committed buckets",
                "bits past the last bucket",
            ));
        }
        Ok(Self { bits })
    }
}

/// The bucket both parties run next (kind 3); a guard against two sides
/// that disagree on the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketStart {
    pub bucket: u64,
}

impl Message for BucketStart {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 3;
    /// The job's bucket count.
    type Bounds<'a> = u64;

    fn write(&self, w: &mut Writer) {
        w.u64(self.bucket);
    }

    fn read(r: &mut Reader<'_>, buckets: u64) -> Result<Self, DecodeError> {
        match r.u64("bucket")? {
            b if b < buckets => Ok(Self { bucket: b }),
            b => Err(DecodeError::invalid("bucket", b)),
        }
    }
}

/// Every bucket is committed on this side (kind 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobDone;

impl Message for JobDone {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 4;
    type Bounds<'a> = ();

    fn write(&self, _: &mut Writer) {}

    fn read(_: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self)
    }
}

/// Opens lane `lane` of a connection's lanes (kind 5): the connecting
/// side sends it on the first connection (lane 0), then first on each
/// other one it dials, all under one fresh token, so the listening side
/// takes only this connection's lanes (not a late dial of an earlier one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub token: [u8; 16],
    pub lane: u8,
}

impl Message for Lane {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 5;
    /// The connection's lane count.
    type Bounds<'a> = u8;

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.token).u8(self.lane);
    }

    fn read(r: &mut Reader<'_>, lanes: u8) -> Result<Self, DecodeError> {
        let token = r.array("lane token")?;
        match r.u8("lane")? {
            lane if lane < lanes => Ok(Self { token, lane }),
            lane => Err(DecodeError::invalid("lane", lane)),
        }
    }
}

/// The first message of every connection to a cluster job's listening
/// party (kind 6, `cluster.rs`): the job's control connection
/// (`bucket: None`), which states a fresh token, or bucket `b`'s
/// connection under the current control connection's token, which the
/// listening party's relay hands to one of its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterOpen {
    pub token: [u8; 16],
    pub bucket: Option<u64>,
}

impl Message for ClusterOpen {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 6;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.token);
        write_bucket(w, self.bucket);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let token = r.array("token")?;
        let bucket = read_bucket(r, "connection", MAX_BUCKETS)?;
        Ok(Self { token, bucket })
    }
}

/// The listening party's answer to a control connection (kind 7): how
/// many workers serve its buckets, which bounds how many buckets the
/// connecting party runs at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterReady {
    pub workers: u32,
}

impl Message for ClusterReady {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 7;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u32(self.workers);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        match r.u32("workers")? {
            0 => Err(DecodeError::invalid("workers", 0)),
            n => Ok(Self { workers: n }),
        }
    }
}

/// A listening party's worker offering itself to its own relay (kind 8),
/// with the ticket its driver gave it; inside one party's cluster only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attach {
    pub ticket: [u8; 16],
}

impl Message for Attach {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 8;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.ticket);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            ticket: r.array("ticket")?,
        })
    }
}

/// A cluster job's listening worker committed the bucket its connection
/// carried (kind 9); only then does the connecting side commit it, so a
/// control connection right after its bucket tasks finds both journals
/// holding every bucket that ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketCommitted {
    pub bucket: u64,
}

impl Message for BucketCommitted {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 9;
    /// The job's bucket count.
    type Bounds<'a> = u64;

    fn write(&self, w: &mut Writer) {
        w.u64(self.bucket);
    }

    fn read(r: &mut Reader<'_>, buckets: u64) -> Result<Self, DecodeError> {
        match r.u64("bucket")? {
            b if b < buckets => Ok(Self { bucket: b }),
            b => Err(DecodeError::invalid("bucket", b)),
        }
    }
}

/// Sent by the connecting side before each bucket of a run over one
/// cluster connection (kind 10): the bucket after it, or `None` if it is
/// the run's last. Both sides load that bucket while this one runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextBucket {
    pub bucket: Option<u64>,
}

impl Message for NextBucket {
    const PROTOCOL: u8 = PROTOCOL_ID;
    const KIND: u8 = 10;
    /// The job's bucket count.
    type Bounds<'a> = u64;

    fn write(&self, w: &mut Writer) {
        write_bucket(w, self.bucket);
    }

    fn read(r: &mut Reader<'_>, buckets: u64) -> Result<Self, DecodeError> {
        let bucket = read_bucket(r, "next", buckets)?;
        Ok(Self { bucket })
    }
}

/// An optional bucket number: a flag byte (`tag`), then the number.
fn write_bucket(w: &mut Writer, bucket: Option<u64>) {
    match bucket {
        None => w.u8(0),
        Some(b) => w.u8(1).u64(b),
    };
}

/// [`write_bucket`]'s field, the number below `buckets`.
fn read_bucket(
    r: &mut Reader<'_>,
    tag: &'static str,
    buckets: u64,
) -> Result<Option<u64>, DecodeError> {
    match r.u8(tag)? {
        0 => Ok(None),
        1 => match r.u64("bucket")? {
            b if b < buckets => Ok(Some(b)),
            b => Err(DecodeError::invalid("bucket", b)),
        },
        other => Err(DecodeError::invalid(tag, other)),
    }
}

wire_messages! {
    messages: JobHello, Committed, BucketStart, JobDone, Lane, ClusterOpen, ClusterReady, Attach,
        BucketCommitted, NextBucket;
    others: ;
}

/// What both parties agreed: the job's id and shape, and the peer's row
/// count (stored in the job directory, compared again on resume).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    pub job_id: JobId,
    pub shape: Shape,
    pub peer_rows: u64,
}

impl Agreed {
    /// This side's padded bucket size.
    pub fn own_capacity(&self, role: Role) -> u64 {
        match role {
            Role::Sender => self.shape.sender_capacity,
            Role::Receiver => self.shape.receiver_capacity,
        }
    }

    /// The peer's padded bucket size.
    pub fn peer_capacity(&self, role: Role) -> u64 {
        match role {
            Role::Sender => self.shape.receiver_capacity,
            Role::Receiver => self.shape.sender_capacity,
        }
    }
}

/// The terms both hellos imply, or the refusal (in this side's terms and
/// the peer's) of a peer that differs. `stored` is the agreement this
/// side's job directory holds when it resumes.
pub fn agree(
    ours: &JobHello,
    theirs: &JobHello,
    stored: Option<&Agreed>,
    max_peer_rows: u64,
) -> Result<Agreed, Refusal> {
    if theirs.role == ours.role {
        let text = |role: Role| match role {
            Role::Sender => "both parties run `send`: one must `receive`".to_string(),
            Role::Receiver => "both parties run `receive`: one must `send`".to_string(),
        };
        return Err(Refusal {
            here: text(ours.role),
            there: text(ours.role),
        });
    }
    if let Some(r) = kind_refusal(&theirs.kind, &ours.kind)
        .or_else(|| key_refusal(&theirs.key_format, &ours.key_format))
    {
        return Err(r);
    }
    if theirs.rows > max_peer_rows {
        return Err(Refusal {
            here: format!(
                "the peer's input has {} rows; this side accepts at most {max_peer_rows} (--max-peer-rows)",
                theirs.rows
            ),
            there: format!("the peer accepts at most {max_peer_rows} rows; this input has {}", theirs.rows),
        });
    }
    let (sender, receiver) = match ours.role {
        Role::Sender => (ours, theirs),
        Role::Receiver => (theirs, ours),
    };
    let job_id = match (ours.which, theirs.which, stored) {
        (Which::Resume { job_id: a, .. }, Which::Resume { job_id: b, .. }, Some(s))
            if a == b && s.job_id == a =>
        {
            return resumed(s, theirs.rows);
        }
        (Which::New, Which::New, _)
        | (
            Which::Resume {
                confirmed: false, ..
            },
            Which::New,
            _,
        )
        | (
            Which::New,
            Which::Resume {
                confirmed: false, ..
            },
            _,
        ) => new_job_id(sender, receiver),
        (ours_which, theirs_which, _) => return Err(which_refusal(ours_which, theirs_which)),
    };
    let limit = ours.max_bucket_items.min(theirs.max_bucket_items);
    let shape = shape(sender.rows, receiver.rows, limit).map_err(|e| Refusal {
        here: e.to_string(),
        there: e.to_string(),
    })?;
    Ok(Agreed {
        job_id,
        shape,
        peer_rows: theirs.rows,
    })
}

/// The stored agreement, if the peer's input still has its row count.
fn resumed(stored: &Agreed, peer_rows: u64) -> Result<Agreed, Refusal> {
    if stored.peer_rows == peer_rows {
        return Ok(*stored);
    }
    let (id, then) = (hex::encode(stored.job_id), stored.peer_rows);
    Err(Refusal {
        here: format!(
            "the peer's input now has {peer_rows} rows, {then} when job {id} began: the peer's input changed"
        ),
        there: format!(
            "this input now has {peer_rows} rows, {then} when job {id} began: it changed since"
        ),
    })
}

/// A new job's id: both nonces, the sender's first.
fn new_job_id(sender: &JobHello, receiver: &JobHello) -> JobId {
    let digest = Sha256::new()
        .chain_update(b"psikit job id v1")
        .chain_update(sender.nonce)
        .chain_update(receiver.nonce)
        .finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

fn which_refusal(ours: Which, theirs: Which) -> Refusal {
    let says = |w: Which| match w {
        Which::New => "starts a new job".to_string(),
        Which::Resume { job_id, .. } => format!("resumes job {}", hex::encode(job_id)),
    };
    let advice = "run both sides with --resume and their job directories, or both without";
    Refusal {
        here: format!(
            "the peer {}, this side {}: {advice}",
            says(theirs),
            says(ours)
        ),
        there: format!(
            "the peer {}, this side {}: {advice}",
            says(ours),
            says(theirs)
        ),
    }
}

/// Sends our hello and reads the peer's, under the job's protocol id; a
/// peer that opens a one-shot run instead is refused on both sides.
pub async fn exchange_hellos(ch: &mut Channel, ours: &JobHello) -> Result<JobHello, Error> {
    ch.send_msg(ours).await?;
    let frame = ch.recv().await?;
    let one_shot = Protocol::of_id(frame.protocol).is_some() || frame.protocol == ids::CIRCUIT_PSI;
    if frame.protocol != PROTOCOL_ID && one_shot {
        return Err(job_refusal(true).tell(ch, PROTOCOL_ID).await);
    }
    if (frame.protocol, frame.kind) != (PROTOCOL_ID, JobHello::KIND) {
        let (protocol, kind) = (frame.protocol, frame.kind);
        return Err(TransportError::Unexpected { protocol, kind }.into());
    }
    Ok(JobHello::decode(&frame.payload, ())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::two_party::Mode;

    fn hello(role: Role, which: Which) -> JobHello {
        JobHello {
            role,
            which,
            nonce: [role as u8; 16],
            kind: vole(),
            key_format: "1 column".into(),
            rows: 1000,
            max_bucket_items: 1 << 20,
            lanes: 2,
        }
    }

    fn vole() -> JobKind {
        JobKind::Balanced {
            protocol: Protocol::Vole,
            mode: Mode {
                malicious: false,
                low_comm: false,
                reveal: false,
            },
        }
    }

    #[test]
    fn both_sides_agree_on_the_same_terms() {
        let s = hello(Role::Sender, Which::New);
        let mut r = hello(Role::Receiver, Which::New);
        r.rows = 300;
        let a = agree(&s, &r, None, u64::MAX).expect("agree");
        let b = agree(&r, &s, None, u64::MAX).expect("agree");
        assert_eq!((a.job_id, a.shape), (b.job_id, b.shape));
        assert_eq!((a.peer_rows, b.peer_rows), (300, 1000));
        let frame = s.to_frame();
        assert_eq!(JobHello::decode(&frame.payload, ()).expect("decode"), s);
    }

    #[test]
    fn an_unconfirmed_job_gives_way_to_a_new_one_and_a_confirmed_one_does_not() {
        let stored = Agreed {
            job_id: [9; 16],
            shape: shape(1000, 1000, 1 << 20).expect("shape"),
            peer_rows: 1000,
        };
        let s = hello(Role::Sender, Which::New);
        let mut r = hello(
            Role::Receiver,
            Which::Resume {
                job_id: [9; 16],
                confirmed: false,
            },
        );
        let a = agree(&s, &r, None, u64::MAX).expect("new job");
        let b = agree(&r, &s, Some(&stored), u64::MAX).expect("new job");
        assert_eq!(a, b);
        assert_ne!(a.job_id, stored.job_id);
        r.which = Which::Resume {
            job_id: [9; 16],
            confirmed: true,
        };
        assert!(agree(&s, &r, None, u64::MAX).is_err());
        assert!(agree(&r, &s, Some(&stored), u64::MAX).is_err());
    }

    #[test]
    fn differences_are_refused_in_both_sides_terms() {
        let s = hello(Role::Sender, Which::New);
        let r = hello(Role::Sender, Which::New);
        assert!(agree(&s, &r, None, u64::MAX).is_err());
        let mut r = hello(
            Role::Receiver,
            Which::Resume {
                job_id: [9; 16],
                confirmed: true,
            },
        );
        let e = agree(&s, &r, None, u64::MAX).expect_err("refused");
        assert!(
            e.here.starts_with("the peer resumes job 0909"),
            "{}",
            e.here
        );
        assert!(
            e.there
                .starts_with("the peer starts a new job, this side resumes"),
            "{}",
            e.there
        );
        r.which = Which::New;
        r.kind = JobKind::Balanced {
            protocol: Protocol::Rr16,
            mode: Mode {
                malicious: false,
                low_comm: false,
                reveal: false,
            },
        };
        let e = agree(&s, &r, None, u64::MAX).expect_err("refused");
        assert_eq!(e.here, "the peer runs RR16, this side VOLE-PSI");
        #[cfg(feature = "cpsi")]
        {
            let mut cfg = crate::cpsi::CpsiConfig::new(crate::cpsi::App::Threshold(5));
            let kind = |cfg: &crate::cpsi::CpsiConfig| JobKind::Circuit {
                terms: cfg.agreed(),
                value_columns: 0,
            };
            r.kind = kind(&cfg);
            let e = agree(&s, &r, None, u64::MAX).expect_err("refused");
            assert!(
                e.here
                    .starts_with("the peer runs circuit PSI threshold --threshold 5"),
                "{}",
                e.here
            );
            let mut s = s.clone();
            s.kind = kind(&cfg);
            cfg.app = crate::cpsi::App::Threshold(6);
            r.kind = kind(&cfg);
            let e = agree(&s, &r, None, u64::MAX).expect_err("refused");
            assert_eq!(
                e.here,
                "the peer runs --threshold 6, this side --threshold 5"
            );
            let frame = r.to_frame();
            assert_eq!(JobHello::decode(&frame.payload, ()).expect("decode"), r);
        }
        r.kind = vole();
        let e = agree(&s, &r, None, 999).expect_err("refused");
        assert!(e.here.contains("1000 rows"), "{}", e.here);
        let frame = Committed {
            bits: vec![0xff, 0x01],
        }
        .to_frame();
        assert!(Committed::decode(&frame.payload, 9).is_ok());
        assert!(Committed::decode(&frame.payload, 8).is_err());
        let frame = Committed {
            bits: vec![0xff, 0x03],
        }
        .to_frame();
        assert!(Committed::decode(&frame.payload, 9).is_err());
    }
}
