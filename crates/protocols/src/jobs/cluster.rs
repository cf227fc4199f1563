//! A job whose parties each spread its buckets over a cluster of their
//! own (Python's `psikit.scale.psi` and `psikit.scale.cpsi` drive it on
//! Ray; docs/scale-out.md). The protocol per bucket, the hello, the
//! journal and what a job reveals are a one-machine job's; what changes
//! is who does each pass:
//!
//! 1. **Parts.** Each file of the input is a part, whose keys a worker
//!    spools ([`spool_part`]); an input that is not files (a Ray Dataset)
//!    is copied by the workers into parts of their own
//!    (`rows/NNNNNN.csv`, CSV files with a header) first. A row's id is
//!    `part << PART_SHIFT | row`.
//! 2. **The driver** records the parts ([`ClusterJob::set_parts`]), then
//!    runs the hello and the journals over a control connection
//!    ([`ClusterJob::step`]), splitting the parts' keys into the agreed
//!    buckets. A step ends with the buckets both sides must still run,
//!    or with the job done (circuit PSI's aggregates opened once over the
//!    control connection) and this side's matched rows written from the
//!    parts into one CSV file.
//! 3. **Buckets**, in runs of a few, each run over a connection of its
//!    own: [`BucketWorker::run_remote`] in the connecting party's tasks
//!    (any number at once, up to the peer's workers),
//!    [`BucketWorker::serve`] in the listening party's workers, which its
//!    driver's relay (`relay.rs`) pairs with the peer's connections.
//!    Before each bucket the connecting side names the one after it
//!    ([`NextBucket`]), so both sides load that one while this one runs,
//!    as a one-machine job does. The listening side commits a bucket
//!    first and says so; the connecting side commits on hearing it.
//!
//! Why a connection per run of buckets rather than per worker or per
//! bucket: a run is the unit that fails and runs again (a killed worker
//! loses only its run's uncommitted buckets, rerun by another task), the
//! two parties' worker counts need not match, and the runs are short
//! enough to spread evenly over the workers (the driver cuts the buckets
//! into a few runs per worker). Per bucket, a connection would cost a
//! handshake, a task and the two loads one after the other.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use psikit_io::KeySpec;
use psikit_transport::net::{self, Listener};
use psikit_transport::{Channel, Limits, Message};
use sha2::{Digest, Sha256};

use super::journal::{InputSummary, JobDir, OwnTerms, Part, MAX_PARTS, PART_SHIFT};
use super::kind::JobProtocol;
use super::lanes::{meet, BucketRunner};
use super::link::{dial, is_link_failure, Link};
use super::options::{JobOptions, JobOutcome};
use super::prepare::{input_digest, spool_file, Bucket};
use super::relay::Relay;
use super::run::{check_terms, file_result, open_dir, Job};
use super::terms::{Agreed, Attach, BucketCommitted, ClusterOpen, JobDone, NextBucket};
use crate::balanced::Role;
use crate::common::connect::{Peer, ServerAddr};
use crate::common::{NoProgress, Progress};
use crate::error::Error;

/// Where a cluster job stands after a control connection.
#[derive(Debug)]
pub enum Step {
    /// Both sides must still run these buckets (then step again).
    Todo(Vec<u64>),
    /// The job is done.
    Done(Box<JobOutcome>),
}

/// A cluster job's driver: one per party, holding the job directory (on
/// storage its workers share) and, at the listening party, the relay.
pub struct ClusterJob {
    role: Role,
    opts: JobOptions,
    /// How the parts' CSV files are read (header, key and value columns).
    spec: KeySpec,
    dir: JobDir,
    link: Link,
    /// The split's time, from the step that split (the outcome's `times`
    /// hold the split and the output; the buckets are the workers').
    split: std::sync::Mutex<Duration>,
}

impl ClusterJob {
    /// Opens the job's directory and its link to the peer. A listening
    /// party binds the peer's address and its relay, whose workers attach
    /// on `relay_listen` (an address of the cluster's private network), and
    /// calls `listening` with the bound address; `workers` is how many of
    /// its workers serve buckets.
    pub async fn open(
        role: Role,
        opts: JobOptions,
        spec: KeySpec,
        peer: &Peer,
        relay_listen: &str,
        workers: u32,
        listening: impl FnOnce(&str),
    ) -> Result<Self, Error> {
        if file_result(&opts).is_some() {
            return Err(Error::Config(
                "circuit PSI's shares and union run as a one-machine job (psikit cpsi \
                 --job-dir); a cluster job opens cardinality, sums or a threshold"
                    .into(),
            ));
        }
        if spec.value_columns.len() != usize::from(opts.protocol.kind().value_columns()) {
            return Err(Error::Misuse("a job input's value columns are the job's"));
        }
        let dir = open_dir(&opts)?;
        let link = match peer {
            Peer::Listen {
                addr, tls, limits, ..
            } => {
                let limits = idle_limits(*limits, opts.idle_timeout);
                let external = Listener::bind(addr, tls.as_ref(), limits).await?;
                listening(&external.local_addr()?.to_string());
                Link::Relay(Relay::start(external, relay_listen, workers, limits).await?)
            }
            Peer::Connect(server) => Link::Cluster {
                server: ServerAddr {
                    limits: idle_limits(server.limits, opts.idle_timeout),
                    ..server.clone()
                },
                token: Default::default(),
                peer_workers: Default::default(),
            },
        };
        Ok(Self {
            role,
            opts,
            spec,
            dir,
            link,
            split: Default::default(),
        })
    }

    /// The job directory.
    pub fn dir(&self) -> &Path {
        self.dir.root()
    }

    /// The input's summary, once its parts are recorded (a resumed job
    /// does not read its input again).
    pub fn input(&self) -> Result<Option<InputSummary>, Error> {
        self.dir.input()
    }

    /// Records the input's parts (each one's file and its summary from
    /// [`spool_part`], in part order): the job's row counts add up, its
    /// longest key is the longest, its digest hashes the parts' digests.
    pub fn set_parts(&self, parts: &[(PathBuf, InputSummary)]) -> Result<InputSummary, Error> {
        if parts.is_empty() || parts.len() as u64 > MAX_PARTS {
            return Err(Error::Config(format!(
                "a cluster job's input has 1 to {MAX_PARTS} parts, not {}",
                parts.len()
            )));
        }
        let mut digest = Sha256::new();
        digest.update(b"psikit cluster job parts v1");
        for (_, p) in parts {
            digest.update(p.digest);
        }
        let summaries = || parts.iter().map(|(_, p)| p);
        let summary = InputSummary {
            digest: digest.finalize().into(),
            rows_read: summaries().map(|p| p.rows_read).sum(),
            rows: summaries().map(|p| p.rows).sum(),
            longest_key: summaries().map(|p| p.longest_key).max().unwrap_or(0),
        };
        let recorded: Vec<Part> = parts
            .iter()
            .map(|(path, p)| Part {
                path: path.clone(),
                rows_read: p.rows_read,
                digest: p.digest,
            })
            .collect();
        self.dir.set_parts(&recorded)?;
        self.dir.set_input(&summary)?;
        Ok(summary)
    }

    /// On resume: every part that is a file of the input (not a worker's
    /// copy in the job directory) still has the digest the job began
    /// with, as a one-machine job checks its input.
    pub fn check_parts(&self) -> Result<(), Error> {
        for part in self.dir.parts()?.unwrap_or_default() {
            if part.path.starts_with(self.dir.root()) {
                continue;
            }
            if input_digest(&part.path)? != part.digest {
                return Err(Error::Job(format!(
                    "{} changed since the job began (its digest differs): rerun without \
                     --resume in a new --job-dir",
                    part.path.display()
                )));
            }
        }
        Ok(())
    }

    /// One control connection (again after a dropped link, for the
    /// job's retry time): the hello, both journals and, the first time,
    /// the split; then either the buckets still to run or, with none
    /// left, the job's end and this side's output.
    pub async fn step(&self, progress: &dyn Progress) -> Result<Step, Error> {
        let summary = self
            .dir
            .input()?
            .ok_or(Error::Misuse("a cluster job's parts are recorded first"))?;
        let mut job = Job::new(&self.dir, self.role, &summary, &self.opts, progress)?;
        job.cluster = true;
        let ended = job.sessions(&self.link).await;
        let split = {
            let mut total = self
                .split
                .lock()
                .map_err(|_| Error::Internal("a cluster job's times"))?;
            *total += job.times.split;
            *total
        };
        let ended = ended?;
        if !ended.todo.is_empty() {
            return Ok(Step::Todo(ended.todo));
        }
        job.times.split = split;
        if let Link::Relay(relay) = &self.link {
            relay.finish().await;
        }
        let parts: Vec<(PathBuf, u64)> = self
            .dir
            .parts()?
            .ok_or(Error::Job("a cluster job without its parts".into()))?
            .into_iter()
            .map(|p| (p.path, p.rows_read))
            .collect();
        let outcome = job.finish(ended, &summary, &self.spec, &parts)?;
        // The workers' copies of the input are not needed any more.
        let _ = std::fs::remove_dir_all(self.dir.root().join("rows"));
        Ok(Step::Done(Box::new(outcome)))
    }

    /// The connecting party's bucket connections: the token of the last
    /// control connection and how many workers the peer serves with.
    pub fn bucket_token(&self) -> Option<([u8; 16], u32)> {
        match &self.link {
            Link::Cluster {
                token,
                peer_workers,
                ..
            } => {
                let token = token.lock().ok().and_then(|t| *t)?;
                Some((
                    token,
                    peer_workers.load(std::sync::atomic::Ordering::SeqCst),
                ))
            }
            _ => None,
        }
    }

    /// The listening party's relay: where its workers attach, and their
    /// ticket.
    pub fn relay(&self) -> Option<(String, [u8; 16])> {
        match &self.link {
            Link::Relay(relay) => Some((relay.internal_addr().to_string(), relay.ticket())),
            _ => None,
        }
    }
}

/// A job's only timeouts count from the last byte each way.
fn idle_limits(limits: Limits, idle: Duration) -> Limits {
    Limits {
        read_timeout: idle,
        write_timeout: idle,
        ..limits
    }
}

/// A worker's part of the first pass: the rows of part `part`, the file
/// `rows` (a file of the input, or the worker's copy of its share at
/// [`part_rows_path`]), keyed into the part's key file.
pub fn spool_part(
    job_dir: &Path,
    part: u64,
    rows: &Path,
    spec: &KeySpec,
) -> Result<InputSummary, Error> {
    if part >= MAX_PARTS {
        return Err(Error::Config(format!(
            "part {part}: a cluster job has at most {MAX_PARTS} parts"
        )));
    }
    let dir = JobDir::shared(job_dir);
    let out = dir.part_spool_path(part);
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    spool_file(rows, spec, false, &out, part << PART_SHIFT, &NoProgress)
}

/// Where a worker writes its copy of part `part`'s rows (a CSV file with
/// a header), when the input is not files it can read itself.
pub fn part_rows_path(job_dir: &Path, part: u64) -> PathBuf {
    JobDir::shared(job_dir).part_rows_path(part)
}

/// What a run of buckets cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct BucketCost {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Tries beyond the first (after a dropped link).
    pub retries: u32,
}

/// A worker's view of a cluster job: the agreed job in the shared
/// directory and the protocol its buckets run.
pub struct BucketWorker {
    dir: JobDir,
    runner: BucketRunner,
    limits: Limits,
}

impl BucketWorker {
    /// Opens the job in `job_dir` (after the driver's first step) for a
    /// worker of `role` running `protocol`, which must be the job's.
    pub fn open(
        job_dir: &Path,
        role: Role,
        protocol: JobProtocol,
        limits: Limits,
    ) -> Result<Self, Error> {
        let dir = JobDir::shared(job_dir);
        let (agreed, terms, _) = dir.agreement()?.ok_or_else(|| {
            Error::Job(format!(
                "{} holds no agreed job (is it the driver's job directory, on storage this \
                 worker reads?)",
                job_dir.display()
            ))
        })?;
        let own = OwnTerms {
            role,
            kind: protocol.kind(),
            key_format: protocol.key_format().to_owned(),
        };
        check_terms(&terms, &own)?;
        let longest_key = dir.input()?.map_or(0, |s| s.longest_key);
        Ok(Self {
            dir,
            runner: BucketRunner {
                role,
                protocol,
                agreed,
                longest_key,
            },
            limits,
        })
    }

    fn agreed(&self) -> &Agreed {
        &self.runner.agreed
    }

    /// The connecting party's task for a run of buckets: dials the
    /// peer's address with the control connection's `token` and runs the
    /// buckets one after another over that connection, each committed
    /// once the peer's worker committed it, each loading while the one
    /// before it runs. A dropped link is retried (a fresh connection, from
    /// the bucket it cut) for `retry_for`. A task run again (its worker
    /// died) skips the buckets it committed: the listening side commits
    /// first, so those are whole on both sides.
    pub async fn run_remote(
        &self,
        run: &[u64],
        server: &ServerAddr,
        token: [u8; 16],
        retry_for: Duration,
    ) -> Result<BucketCost, Error> {
        let buckets = self.agreed().shape.buckets;
        if let Some(b) = run.iter().find(|&&b| b >= buckets) {
            return Err(Error::Config(format!(
                "the job has {buckets} buckets, not {}",
                b + 1
            )));
        }
        let todo: Vec<u64> = run
            .iter()
            .copied()
            .filter(|&b| !self.dir.is_committed(b))
            .collect();
        let server = ServerAddr {
            limits: self.limits,
            ..server.clone()
        };
        let started = Instant::now();
        let mut cost = BucketCost::default();
        let (mut done, mut loading) = (0, todo.first().map(|&b| self.load(b)));
        while let Some(&b) = todo.get(done) {
            // The first bucket loads while the connection opens.
            let left = retry_for.saturating_sub(started.elapsed());
            let mut ch = dial(&server, Some(left)).await?;
            let bucket = Some(b);
            let ran = match ch.send_msg(&ClusterOpen { token, bucket }).await {
                Ok(()) => {
                    self.run_chain(&mut ch, &todo, &mut done, &mut loading)
                        .await
                }
                Err(e) => Err(e.into()),
            };
            cost.bytes_sent += ch.bytes_sent();
            cost.bytes_received += ch.bytes_received();
            match ran {
                Ok(()) => ch.close().await,
                Err(e) if is_link_failure(&e) && started.elapsed() < retry_for => cost.retries += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(cost)
    }

    /// Runs `todo[*done..]` over `ch`, counting in `done` the buckets
    /// committed; `loading` is the next bucket's load, if started.
    async fn run_chain(
        &self,
        ch: &mut Channel,
        todo: &[u64],
        done: &mut usize,
        loading: &mut Option<Loading>,
    ) -> Result<(), Error> {
        while let Some(&b) = todo.get(*done) {
            let bucket = match loading.take() {
                Some(l) if l.bucket == b => l.join().await?,
                _ => self.load(b).join().await?,
            };
            let ahead = todo.get(*done + 1).copied();
            *loading = ahead.map(|n| self.load(n));
            ch.send_msg(&NextBucket { bucket: ahead }).await?;
            self.run_one(ch, b, &bucket, false).await?;
            *done += 1;
        }
        Ok(())
    }

    /// A listening party's worker: offers itself to its driver's relay at
    /// `relay` with `ticket`, runs each run of buckets the relay hands it,
    /// until the relay says the job is done; returns the buckets it ran.
    /// A run whose link drops (the peer's task died) is left to the
    /// peer's retry; any other failure ends the worker.
    pub async fn serve(&self, relay: &str, ticket: [u8; 16]) -> Result<u64, Error> {
        // Waiting for a bucket may take as long as the job; running one
        // has the job's idle limits.
        let waiting = Limits {
            read_timeout: Duration::from_secs(365 * 24 * 3600),
            ..self.limits
        };
        let mut ran = 0;
        loop {
            let mut ch = net::connect(relay, None, waiting).await?;
            ch.send_msg(&Attach { ticket }).await?;
            let frame = ch.recv().await?;
            if frame.kind == JobDone::KIND {
                ch.close().await;
                return Ok(ran);
            }
            let open = ClusterOpen::decode(&frame.payload, ())?;
            let b = open
                .bucket
                .filter(|&b| b < self.agreed().shape.buckets)
                .ok_or(Error::Job(
                    "the relay handed over a bucket the job lacks".into(),
                ))?;
            ch.set_limits(self.limits);
            match self.serve_chain(&mut ch, b, &mut ran).await {
                Ok(()) => {}
                Err(e) if is_link_failure(&e) => {}
                Err(e) => return Err(e),
            }
            ch.close().await;
        }
    }

    /// The buckets of one connection from `first` on, each announced with
    /// the one after it, which loads while this one runs.
    async fn serve_chain(&self, ch: &mut Channel, first: u64, ran: &mut u64) -> Result<(), Error> {
        let buckets = self.agreed().shape.buckets;
        let mut loading = self.load(first);
        loop {
            let next = ch.recv_msg::<NextBucket>(buckets).await?.bucket;
            let b = loading.bucket;
            let bucket = loading.join().await?;
            let ahead = next.map(|n| self.load(n));
            self.run_one(ch, b, &bucket, true).await?;
            *ran += 1;
            match ahead {
                Some(l) => loading = l,
                None => return Ok(()),
            }
        }
    }

    /// Starts loading bucket `b` on the blocking pool.
    fn load(&self, b: u64) -> Loading {
        let (path, role) = (self.dir.bucket_path(b), self.runner.role);
        let cap = self.agreed().own_capacity(role);
        Loading {
            bucket: b,
            task: tokio::task::spawn_blocking(move || Bucket::load(&path, b, role, cap)),
        }
    }

    /// One run of bucket `b` over `ch`: its earlier result taken back,
    /// the run, then the commits in order (the listening side first).
    async fn run_one(
        &self,
        ch: &mut Channel,
        b: u64,
        bucket: &Bucket,
        listening: bool,
    ) -> Result<(), Error> {
        let buckets = self.agreed().shape.buckets;
        self.dir.uncommit(b)?;
        meet(ch, b, buckets).await?;
        let result = self.runner.run_bucket(ch, bucket).await?;
        if listening {
            self.dir.commit(b, &result)?;
            ch.send_msg(&BucketCommitted { bucket: b }).await?;
        } else {
            let done = ch.recv_msg::<BucketCommitted>(buckets).await?;
            if done.bucket != b {
                return Err(Error::Job(format!(
                    "the peer committed bucket {}, not {b}",
                    done.bucket
                )));
            }
            self.dir.commit(b, &result)?;
        }
        Ok(())
    }
}

/// A bucket being loaded (dropped unjoined, its result is discarded).
struct Loading {
    bucket: u64,
    task: tokio::task::JoinHandle<Result<Bucket, Error>>,
}

impl Loading {
    async fn join(self) -> Result<Bucket, Error> {
        self.task
            .await
            .map_err(|e| Error::task("loading a bucket", e))?
    }
}
