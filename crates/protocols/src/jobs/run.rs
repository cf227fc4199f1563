//! One party's run of a job: the input read once, the hello, the buckets
//! split, then bucket after bucket over one connection (the next one
//! loaded while the current one runs), each committed to the journal, and
//! at the end the matched rows written from the input. A dropped link is
//! retried for `retry_for`, each new connection starting with the hello
//! and the two journals, so only buckets committed on both sides are
//! skipped. A side that ran every bucket and lost the link in the final
//! exchange waits only [`LINGER`] for its peer (which comes back at once if
//! it still needs a bucket), then ends with the end unconfirmed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use psikit_io::write_selected_parts;
use psikit_transport::{Channel, TransportError};
use rand::RngCore;

use super::journal::{InputSummary, JobDir, OwnTerms, PART_SHIFT};
#[cfg(feature = "cpsi")]
use super::kind::JobKind;
use super::kind::JobProtocol;
use super::lanes::{run_lanes, BucketRunner, Ran};
use super::link::{is_link_failure, Link};
use super::options::{JobInput, JobOptions, JobOutcome, JobTimes};
use super::prepare::{input_digest, split, spool_input};
use super::terms::{
    agree, exchange_hellos, Agreed, Committed, JobDone, JobHello, Which, MAX_LANES, PROTOCOL_ID,
};
use crate::balanced::Role;
use crate::common::connect::Peer;
use crate::common::files::AtomicFile;
use crate::common::two_party::{abort, refused_by_peer};
use crate::common::{advance, Progress};
use crate::error::Error;

/// How long a side holding every bucket waits for its peer after the link
/// dropped before the peer's end was heard. If the peer still lacks a
/// bucket it retries at once (it too saw the drop); if it does not come
/// back it had every bucket, or its operator reruns both with `--resume`.
/// No acknowledgement can close this gap (the last message of any
/// exchange may be the one lost), so the wait is bounded instead.
const LINGER: Duration = Duration::from_secs(30);

/// One party's job against `peer`. A listening party calls `listening`
/// with its address before it first waits; `progress` is told the stages
/// (reading, splitting, buckets).
pub async fn run(
    peer: &Peer,
    role: Role,
    input: &JobInput,
    opts: &JobOptions,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<JobOutcome, Error> {
    let file = file_result(opts);
    let writes = |f: FileResult| f == FileResult::Shares || role == Role::Sender;
    if file.is_some_and(writes) && opts.output.is_none() {
        return Err(Error::Config(
            "circuit PSI's shares and union as a job are written to a file: name an output".into(),
        ));
    }
    if input.spec.value_columns.len() != usize::from(opts.protocol.kind().value_columns()) {
        return Err(Error::Misuse("a job input's value columns are the job's"));
    }
    let dir = open_dir(opts)?;
    let t = Instant::now();
    let summary = tokio::task::block_in_place(|| read_input(&dir, input, opts, progress))?;
    let mut job = Job::new(&dir, role, &summary, opts, progress)?;
    job.times.read = t.elapsed();
    let link = Link::new(peer, opts.idle_timeout, listening).await?;
    let ended = job.sessions(&link).await?;
    let parts = [(input.path.clone(), summary.rows_read)];
    job.finish(ended, &summary, &input.spec, &parts)
}

/// Opens a job's directory, refusing one that holds a job already unless
/// the job resumes.
pub(super) fn open_dir(opts: &JobOptions) -> Result<JobDir, Error> {
    opts.protocol.check()?;
    let dir = JobDir::open(&opts.job_dir)?;
    if dir.is_started() && !opts.resume {
        return Err(Error::Job(format!(
            "{} holds a job already: pass --resume to continue it, or choose another --job-dir",
            opts.job_dir.display()
        )));
    }
    Ok(dir)
}

/// [`run`], blocking.
pub fn run_blocking(
    peer: &Peer,
    role: Role,
    input: &JobInput,
    opts: &JobOptions,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<JobOutcome, Error> {
    crate::common::connect::block_on(run(peer, role, input, opts, listening, progress))?
}

/// Whether this side learns matched rows.
fn learns(role: Role, opts: &JobOptions) -> bool {
    match &opts.protocol {
        JobProtocol::Balanced(s) => role == Role::Receiver || s.reveal,
        #[cfg(feature = "cpsi")]
        JobProtocol::Circuit { .. } => false,
    }
}

/// What a circuit PSI job leaves in a file instead of opening a result:
/// both sides' shares, or the union (at its learner, the sender).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cpsi"), allow(dead_code))]
pub(super) enum FileResult {
    Shares,
    Union,
}

pub(super) fn file_result(opts: &JobOptions) -> Option<FileResult> {
    match &opts.protocol {
        JobProtocol::Balanced(_) => None,
        #[cfg(feature = "cpsi")]
        JobProtocol::Circuit { config, .. } => match config.app {
            crate::cpsi::App::Shares => Some(FileResult::Shares),
            crate::cpsi::App::Union => Some(FileResult::Union),
            _ => None,
        },
    }
}

/// A resumed command must state the terms the job began with.
pub(super) fn check_terms(stored: &OwnTerms, now: &OwnTerms) -> Result<(), Error> {
    if stored == now {
        return Ok(());
    }
    let describe = |t: &OwnTerms| {
        format!(
            "{}, keys \"{}\", as {}",
            t.kind.describe(),
            t.key_format,
            role_word(t.role)
        )
    };
    Err(Error::Job(format!(
        "the job directory holds a job of {}; this command asks for {}: resume with the same \
         options",
        describe(stored),
        describe(now)
    )))
}

fn role_word(role: Role) -> &'static str {
    match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    }
}

/// The first pass, or on resume the check that the input is the one the
/// job began with.
fn read_input(
    dir: &JobDir,
    input: &JobInput,
    opts: &JobOptions,
    progress: &dyn Progress,
) -> Result<InputSummary, Error> {
    match dir.input()? {
        // The summary is written after the key file, so it means a whole one.
        Some(summary) => {
            progress.stage("checking the input", None);
            if input_digest(&input.path)? != summary.digest {
                return Err(Error::Job(format!(
                    "{} changed since the job began (its digest differs): rerun without --resume \
                     in a new --job-dir",
                    input.path.display()
                )));
            }
            Ok(summary)
        }
        // The union's keys are its result: both sides keep them.
        None => {
            let keyed = file_result(opts) == Some(FileResult::Union);
            spool_input(&input.path, &input.spec, keyed, dir, progress)
        }
    }
}

/// The state of a job across its connections.
pub(super) struct Job<'a> {
    dir: &'a JobDir,
    role: Role,
    /// This side's longest encoded key (the union's slot width).
    longest_key: u64,
    opts: &'a JobOptions,
    hello: JobHello,
    agreed: Option<Agreed>,
    /// A cluster job's driver: a session ends once both sides agreed on
    /// the buckets still to run, which workers run (`cluster.rs`).
    pub(super) cluster: bool,
    buckets_run: u64,
    bytes: (u64, u64),
    bucket_bytes: Vec<(u64, u64)>,
    /// Whether the current connection got as far as both journals.
    exchanged: bool,
    /// Whether every bucket is committed here (the peer may still lack
    /// one until its end is heard).
    complete: bool,
    /// Circuit PSI's result, once opened.
    #[cfg(feature = "cpsi")]
    circuit: Option<crate::cpsi::Output>,
    pub(super) times: JobTimes,
    progress: &'a dyn Progress,
}

impl<'a> Job<'a> {
    /// A job over `dir` whose input `summary` describes: a new one, or the
    /// one the directory holds (its terms checked against `opts`).
    pub(super) fn new(
        dir: &'a JobDir,
        role: Role,
        summary: &InputSummary,
        opts: &'a JobOptions,
        progress: &'a dyn Progress,
    ) -> Result<Self, Error> {
        let stored = dir.agreement()?;
        let own = OwnTerms {
            role,
            kind: opts.protocol.kind(),
            key_format: opts.protocol.key_format().to_owned(),
        };
        if let Some((_, terms, _)) = &stored {
            check_terms(terms, &own)?;
        }
        let mut nonce = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let hello = JobHello {
            role,
            which: match &stored {
                Some((a, _, confirmed)) => Which::Resume {
                    job_id: a.job_id,
                    confirmed: *confirmed,
                },
                None => Which::New,
            },
            nonce,
            kind: own.kind,
            key_format: own.key_format,
            rows: summary.rows,
            max_bucket_items: opts.bucket_limit(),
            lanes: opts.lanes.clamp(1, MAX_LANES),
        };
        let agreed = stored.map(|(a, _, _)| a);
        #[cfg(feature = "cpsi")]
        let circuit = dir.opened()?;
        #[cfg(feature = "cpsi")]
        let opened = circuit.is_some();
        #[cfg(not(feature = "cpsi"))]
        let opened = false;
        Ok(Job {
            dir,
            role,
            longest_key: summary.longest_key,
            opts,
            hello,
            agreed,
            cluster: false,
            buckets_run: 0,
            bytes: (0, 0),
            bucket_bytes: Vec::new(),
            exchanged: false,
            complete: holds_all(dir, agreed.as_ref(), opens_aggregates(opts), opened)?,
            #[cfg(feature = "cpsi")]
            circuit,
            times: JobTimes::default(),
            progress,
        })
    }

    /// After the last session: the spool removed, this side's output
    /// written from the input's `parts` (each a file and its data rows),
    /// and the outcome.
    pub(super) fn finish(
        mut self,
        ended: Ended,
        summary: &InputSummary,
        spec: &psikit_io::KeySpec,
        parts: &[(PathBuf, u64)],
    ) -> Result<JobOutcome, Error> {
        let (dir, role, opts) = (self.dir, self.role, self.opts);
        let agreed = self
            .agreed
            .ok_or(Error::Internal("a finished job has its terms"))?;
        dir.remove_spool(&agreed);
        let t = Instant::now();
        let (matched_rows, rows) = match learns(role, opts) {
            false => (None, None),
            true => {
                let (count, rows) =
                    tokio::task::block_in_place(|| write_output(dir, &agreed, spec, parts, opts))?;
                (Some(count), rows)
            }
        };
        #[cfg(feature = "cpsi")]
        let written = match (file_result(opts), &opts.output) {
            (Some(f), Some(path)) if f == FileResult::Shares || role == Role::Sender => {
                Some(tokio::task::block_in_place(|| {
                    let buckets = agreed.shape.buckets;
                    match f {
                        FileResult::Shares => {
                            super::shares::write(dir, buckets, path, role == Role::Receiver)
                        }
                        FileResult::Union => super::union::write(dir, buckets, path),
                    }
                })?)
            }
            _ => None,
        };
        self.times.output = t.elapsed();
        Ok(JobOutcome {
            job_id: agreed.job_id,
            shape: agreed.shape,
            input: *summary,
            buckets_run: self.buckets_run,
            matched_rows,
            rows,
            bytes_sent: self.bytes.0,
            bytes_received: self.bytes.1,
            bucket_bytes: {
                let mut b = self.bucket_bytes;
                b.sort_unstable();
                b
            },
            #[cfg(feature = "cpsi")]
            circuit: self.circuit,
            #[cfg(feature = "cpsi")]
            written,
            reconnects: ended.reconnects,
            end_confirmed: ended.confirmed,
            times: self.times,
        })
    }

    /// Sessions until one finishes the job (or, in a cluster job, until
    /// one agrees on the buckets still to run).
    pub(super) async fn sessions(&mut self, link: &Link) -> Result<Ended, Error> {
        let (mut reconnects, mut dropped_at): (u32, Option<Instant>) = (0, None);
        loop {
            let wait = match (dropped_at, link) {
                (Some(t), _) => Some(self.retry_for().saturating_sub(t.elapsed())),
                // Resumed holding all it came for: the peer may be gone.
                (None, _) if self.complete => Some(self.retry_for()),
                (None, Link::Connect(_) | Link::Cluster { .. }) => Some(self.opts.retry_for),
                (None, Link::Listen { .. } | Link::Relay(_)) => None,
            };
            let mut ch = match link.open(wait).await {
                Ok(ch) => ch,
                Err(e) if self.complete && is_link_failure(&e) => {
                    return Ok(Ended {
                        reconnects,
                        confirmed: false,
                        todo: Vec::new(),
                    })
                }
                Err(e) => return Err(e),
            };
            let result = self.session(link, &mut ch).await.map_err(refused_by_peer);
            self.bytes.0 += ch.bytes_sent();
            self.bytes.1 += ch.bytes_received();
            match result {
                Ok(todo) => {
                    ch.close().await;
                    return Ok(Ended {
                        reconnects,
                        confirmed: true,
                        todo,
                    });
                }
                Err(e) if is_link_failure(&e) => {
                    // The retry budget counts from the last drop after
                    // which the job moved on (journals exchanged).
                    if std::mem::take(&mut self.exchanged) {
                        dropped_at = None;
                    }
                    let since = *dropped_at.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.retry_for() {
                        return match self.complete {
                            true => Ok(Ended {
                                reconnects,
                                confirmed: false,
                                todo: Vec::new(),
                            }),
                            false => Err(e),
                        };
                    }
                    reconnects += 1;
                }
                Err(e) => {
                    if !told(&e) {
                        // Not a link failure: the peer would otherwise wait
                        // `retry_for` for a reconnection. No detail crosses
                        // (it may name local files).
                        let why = "the peer stopped the job on an error of its own (see its \
                                   output); both sides can continue it with --resume";
                        abort(&mut ch, PROTOCOL_ID, why).await;
                    }
                    ch.close().await;
                    return Err(e);
                }
            }
        }
    }

    /// How long a drop is retried: [`LINGER`] at most once this side
    /// holds every bucket.
    fn retry_for(&self) -> Duration {
        match self.complete {
            true => self.opts.retry_for.min(LINGER),
            false => self.opts.retry_for,
        }
    }

    /// One connection's part of the job; returns, in a cluster job, the
    /// buckets still to run (none once the job is done).
    async fn session(&mut self, link: &Link, ch: &mut Channel) -> Result<Vec<u64>, Error> {
        let theirs = exchange_hellos(ch, &self.hello).await?;
        let lanes = self.hello.lanes.min(theirs.lanes);
        #[cfg(feature = "cpsi")]
        let theirs_kind = theirs.kind;
        let agreed = match agree(
            &self.hello,
            &theirs,
            self.agreed.as_ref(),
            self.opts.max_peer_rows,
        ) {
            Ok(a) => a,
            Err(refusal) => return Err(refusal.tell(ch, PROTOCOL_ID).await),
        };
        if self.agreed != Some(agreed) {
            // A new job (or one replacing an unconfirmed one, see `Which`).
            self.store(&agreed, false)?;
        }
        let buckets = agreed.shape.buckets;
        let ours = self.dir.committed(buckets)?;
        ch.send_msg(&Committed { bits: ours.clone() }).await?;
        let theirs = ch.recv_msg::<Committed>(buckets).await?;
        self.exchanged = true;
        // The peer's journal shows it stored the job: from now on neither
        // side may start it anew.
        if matches!(
            self.hello.which,
            Which::Resume {
                confirmed: false,
                ..
            }
        ) {
            self.store(&agreed, true)?;
        }
        let bit = |bits: &[u8], b: u64| bits[(b / 8) as usize] >> (b % 8) & 1 == 1;
        let todo: Vec<u64> = (0..buckets)
            .filter(|&b| !(bit(&ours, b) && bit(&theirs.bits, b)))
            .collect();
        if !todo.is_empty() && !self.dir.is_split(&agreed)? {
            let t = Instant::now();
            tokio::task::block_in_place(|| split(self.dir, &agreed, self.progress))?;
            self.times.split += t.elapsed();
        }
        // A bucket committed on one side only runs again on both: this
        // side's earlier result goes first (see `JobDir::uncommit`).
        for &b in &todo {
            self.dir.uncommit(b)?;
        }
        if self.cluster && !todo.is_empty() {
            return Ok(todo);
        }
        let lanes = lanes.min(u8::try_from(todo.len()).unwrap_or(u8::MAX));
        let extra = link.open_lanes(ch, lanes, self.opts.idle_timeout).await?;
        let t = Instant::now();
        let ran = self
            .run_buckets(ch, extra, &agreed, &todo, buckets - todo.len() as u64)
            .await;
        self.times.buckets += t.elapsed();
        ran?;
        #[cfg(feature = "cpsi")]
        if let JobProtocol::Circuit { config, .. } = &self.opts.protocol {
            if file_result(self.opts).is_none() {
                let opened = self.open_circuit(ch, config, &agreed, &theirs_kind).await?;
                self.dir.set_opened(&opened)?;
                self.circuit = Some(opened);
            }
        }
        // Only now does this side hold all it came for.
        self.complete = true;
        ch.send_msg(&JobDone).await?;
        ch.recv_msg::<JobDone>(()).await?;
        Ok(Vec::new())
    }

    /// Stores the agreement and states it in later hellos.
    fn store(&mut self, agreed: &Agreed, confirmed: bool) -> Result<(), Error> {
        self.dir
            .set_agreement(agreed, &OwnTerms::of(&self.hello), confirmed)?;
        self.agreed = Some(*agreed);
        self.hello.which = Which::Resume {
            job_id: agreed.job_id,
            confirmed,
        };
        Ok(())
    }

    /// The buckets `todo` over the connection's lanes, each committed as
    /// it ends.
    async fn run_buckets(
        &mut self,
        ch: &mut Channel,
        extra: Vec<Channel>,
        agreed: &Agreed,
        todo: &[u64],
        done_before: u64,
    ) -> Result<(), Error> {
        self.progress.stage("buckets", Some(agreed.shape.buckets));
        let runner = BucketRunner {
            role: self.role,
            protocol: self.opts.protocol.clone(),
            agreed: *agreed,
            longest_key: self.longest_key,
        };
        let todo = todo.iter().map(|&b| (b, self.dir.bucket_path(b))).collect();
        let (dir, progress) = (self.dir, self.progress);
        let (mut run, mut bucket_bytes) = (0u64, Vec::new());
        let finished = |ran: Ran| {
            dir.commit(ran.bucket, &ran.result)?;
            bucket_bytes.push((ran.bucket, ran.bytes));
            run += 1;
            advance(progress, done_before + run)
        };
        let ran = run_lanes(runner, ch, extra, todo, finished).await;
        self.buckets_run += run;
        self.bucket_bytes.extend(bucket_bytes);
        let (sent, received) = ran?;
        self.bytes = (self.bytes.0 + sent, self.bytes.1 + received);
        Ok(())
    }

    /// Circuit PSI's result over the whole job: this side's shares added
    /// up over every bucket, opened once (a rerun after a dropped link
    /// opens the same sums again, so it reveals nothing more).
    #[cfg(feature = "cpsi")]
    async fn open_circuit(
        &self,
        ch: &mut Channel,
        config: &crate::cpsi::CpsiConfig,
        agreed: &Agreed,
        theirs: &JobKind,
    ) -> Result<crate::cpsi::Output, Error> {
        let mut sums: Option<Vec<u64>> = None;
        for b in 0..agreed.shape.buckets {
            let shares = self.dir.result(b)?;
            let total = sums.get_or_insert_with(|| vec![0; shares.len()]);
            if shares.len() != total.len() {
                return Err(Error::Job(format!(
                    "bucket {b}'s result holds {} shares, bucket 0's {}",
                    shares.len(),
                    total.len()
                )));
            }
            for (t, x) in total.iter_mut().zip(shares) {
                *t = t.wrapping_add(x);
            }
        }
        let sums = sums.ok_or(Error::Internal("a job has a bucket"))?;
        let (ours, peer) = (self.hello.kind.value_columns(), theirs.value_columns());
        let columns = match self.role {
            Role::Sender => (usize::from(ours), usize::from(peer)),
            Role::Receiver => (usize::from(peer), usize::from(ours)),
        };
        let own_rows = self.hello.rows;
        let sizes = match self.role {
            Role::Sender => (own_rows, agreed.peer_rows),
            Role::Receiver => (agreed.peer_rows, own_rows),
        };
        let sid =
            psikit_ot::SessionId::new(&[&b"psikit job opening v1"[..], &agreed.job_id].concat());
        let bounds = (sizes.0.min(sizes.1), sizes);
        let role = self.role.into();
        crate::cpsi::facade::open_shares_on(ch, role, &sums, config, &sid, columns, bounds).await
    }
}

/// Whether the journal holds all this side came for: every bucket of the
/// agreed job and, for circuit PSI's aggregates, the opened result. A side
/// stopped after that (say while writing its output) may find its peer
/// ended when it resumes, so it waits only [`LINGER`].
fn holds_all(
    dir: &JobDir,
    agreed: Option<&Agreed>,
    opens: bool,
    opened: bool,
) -> Result<bool, Error> {
    match agreed {
        Some(agreed) if opened || !opens => dir.holds_every_bucket(agreed.shape.buckets),
        _ => Ok(false),
    }
}

/// Whether the job ends by opening circuit PSI's aggregates over its
/// control connection (rather than with matched rows or a file).
fn opens_aggregates(opts: &JobOptions) -> bool {
    !matches!(opts.protocol, JobProtocol::Balanced(_)) && file_result(opts).is_none()
}

/// How the sessions ended.
pub(super) struct Ended {
    pub reconnects: u32,
    /// Whether the peer's end was heard (see [`LINGER`]).
    pub confirmed: bool,
    /// A cluster job's buckets still to run (empty once it is done).
    pub todo: Vec<u64>,
}

/// Whether the peer already knows why this side stops: it refused us or
/// we refused it (both as `Violation`s, the refusal sent), or it aborted.
/// A cancelled job (Ctrl-C) says nothing, so the peer waits for `--resume`.
fn told(e: &Error) -> bool {
    matches!(
        e,
        Error::Peer(_) | Error::Cancelled | Error::Transport(TransportError::Peer(_))
    )
}

/// The matched rows of every committed bucket, written from the input's
/// parts in order, each in file order (or only counted without an
/// output); returns how many, and with `return_rows` their row ids.
fn write_output(
    dir: &JobDir,
    agreed: &Agreed,
    spec: &psikit_io::KeySpec,
    parts: &[(PathBuf, u64)],
    opts: &JobOptions,
) -> Result<(u64, Option<Vec<u64>>), Error> {
    // One bit per row id: part `p`'s rows 0..=rows at offsets[p].
    let mut offsets = Vec::with_capacity(parts.len());
    let mut total = 0u64;
    for (_, rows) in parts {
        offsets.push(total);
        total += rows + 1;
    }
    let mut matched = vec![0u64; usize::try_from(total / 64 + 1).unwrap_or(0)];
    let index = |id: u64| -> Option<u64> {
        let (part, row) = (id >> PART_SHIFT, id & ((1 << PART_SHIFT) - 1));
        let p = usize::try_from(part).ok()?;
        (row <= parts.get(p)?.1).then(|| offsets[p] + row)
    };
    let mut count = 0u64;
    for b in 0..agreed.shape.buckets {
        for id in dir.result(b)? {
            let bit = index(id)
                .ok_or_else(|| Error::Job(format!("bucket {b} names row {id}, past the input")))?;
            matched[(bit / 64) as usize] |= 1 << (bit % 64);
            count += 1;
        }
    }
    let keep = |part: usize, row: u64| {
        let bit = offsets[part] + row;
        matched[(bit / 64) as usize] >> (bit % 64) & 1 == 1
    };
    let rows = opts.return_rows.then(|| {
        let ids = parts.iter().enumerate().flat_map(|(p, (_, rows))| {
            (0..=*rows)
                .filter(move |&r| keep(p, r))
                .map(move |r| (p as u64) << PART_SHIFT | r)
        });
        ids.collect()
    });
    let Some(path) = &opts.output else {
        return Ok((count, rows));
    };
    let mut out = AtomicFile::create(path)?;
    let paths: Vec<&Path> = parts.iter().map(|(p, _)| p.as_path()).collect();
    let (_, written) = write_selected_parts(&paths, spec, out.writer(), keep)?;
    out.commit()?;
    Ok((written, rows))
}
