//! Client side of the HE protocol over a [`Channel`]: fetch the
//! parameters, run the OPRF on the items, then query (in rounds when cuckoo
//! leftovers need another table) and read matches and labels.

use std::time::{Duration, Instant};

use psikit_primitives::oprf::{self, Output};
use psikit_transport::{Channel, Frame};
use rand::rngs::OsRng;
use rayon::prelude::*;

use crate::common::Match;
use crate::error::Error;
use crate::he_psi::client::receiver::{QueryState, Receiver};
use crate::he_psi::common::answer::{check_done, decode_package, next_answer, Answer};
use crate::he_psi::common::messages::{
    OprfRequest, OprfResponse, ParamsRequest, ParamsResponse, QueryCt, QueryHeader,
};
use crate::he_psi::params::PsiParams;

/// A client connected to one database: its parameters and fresh keys.
pub struct HeClient {
    receiver: Receiver,
    db_id: [u8; 32],
    max_query_items: u32,
    bundle_counts: Vec<u32>,
    key_format: String,
    label_columns: Vec<String>,
}

/// Time per phase of a query. `oprf + encrypt + decrypt + waiting` is
/// the query's whole time on the client; `server` is the server's own
/// evaluation, which the client spends waiting or, with results arriving
/// while it decrypts earlier ones, decrypting.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueryTimes {
    /// Blinding, the OPRF round trip and finalization.
    pub oprf: Duration,
    /// Cuckoo hashing and encrypting the source powers.
    pub encrypt: Duration,
    /// The server's evaluation, as its done messages state it.
    pub server: Duration,
    /// Decoding and decrypting results and labels: the work itself (on
    /// the rayon pool, from its first package's start to its last's end),
    /// not waits for the pool.
    pub decrypt: Duration,
    /// The rest: sending the query, waiting for results (the server's
    /// evaluation and the network), and waiting for a busy pool.
    pub waiting: Duration,
}

/// The outcome of [`HeClient::query`].
pub struct QueryOutcome {
    /// Matching items by their index in the input, with labels.
    pub matches: Vec<Match>,
    /// Query rounds (more than one when the cuckoo table overflowed or the
    /// input was larger than one table).
    pub rounds: usize,
    pub times: QueryTimes,
}

impl HeClient {
    /// Fetches the parameters and makes fresh keys for them.
    ///
    /// The keys are made on the calling task (tens of milliseconds), not
    /// on a blocking thread: the client also runs as a sans-IO
    /// [`psikit_transport::Stepper`], where no runtime exists to hand the
    /// work to, and a client task has nothing else to do meanwhile.
    pub async fn connect(ch: &mut Channel) -> Result<Self, Error> {
        ch.send_msg(&ParamsRequest).await?;
        let resp = ch.recv_msg::<ParamsResponse>(()).await?;
        let params = PsiParams::from_apsi_json(&resp.params_json)?;
        let receiver = Receiver::new(params, resp.max_label_bytes as usize)?;
        Ok(Self {
            receiver,
            db_id: resp.db_id,
            max_query_items: resp.max_query_items,
            bundle_counts: resp.bundle_counts,
            key_format: resp.key_format,
            label_columns: resp.label_columns,
        })
    }

    /// How the database's keys are encoded; empty if the server did not say.
    pub fn key_format(&self) -> &str {
        &self.key_format
    }

    /// The database's label columns' names; empty if the server did not
    /// say.
    pub fn label_columns(&self) -> &[String] {
        &self.label_columns
    }

    pub fn params(&self) -> &PsiParams {
        self.receiver.params()
    }

    /// Longest label the database holds (0: unlabeled).
    pub fn max_label_bytes(&self) -> usize {
        self.receiver.shape().max_label_bytes
    }

    /// log2 of the probability that a query of `items` items reports any
    /// false match, from the parameters and the bundle counts.
    pub fn fpp_log2(&self, items: u64) -> f64 {
        let most = self.bundle_counts.iter().copied().max().unwrap_or(0);
        self.params().log2_fpp_query(items, u64::from(most))
    }

    /// Finds which of `items` the server holds, with their labels.
    pub async fn query(&self, ch: &mut Channel, items: &[Vec<u8>]) -> Result<QueryOutcome, Error> {
        let mut times = QueryTimes::default();
        let start = Instant::now();
        let outcome = self.query_timed(ch, items, &mut times).await;
        let own = times.oprf + times.encrypt + times.decrypt;
        times.waiting = start.elapsed().saturating_sub(own);
        let (matches, rounds) = outcome?;
        Ok(QueryOutcome {
            matches,
            rounds,
            times,
        })
    }

    /// [`HeClient::query`], its phases' times added to `times`.
    async fn query_timed(
        &self,
        ch: &mut Channel,
        items: &[Vec<u8>],
        times: &mut QueryTimes,
    ) -> Result<(Vec<Match>, usize), Error> {
        let start = Instant::now();
        let outputs = self.oprf(ch, items).await?;
        times.oprf = start.elapsed();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        let mut matches = Vec::new();
        let mut rounds = 0;
        while !pending.is_empty() {
            let batch: Vec<Output> = pending.iter().map(|&i| outputs[i]).collect();
            let (found, leftovers) = self.round(ch, &batch, times).await?;
            rounds += 1;
            matches.extend(found.into_iter().map(|m| Match {
                index: pending[m.index],
                label: m.label,
            }));
            if leftovers.len() == pending.len() {
                return Err(Error::Internal("the cuckoo table could not place any item"));
            }
            pending = leftovers.iter().map(|&i| pending[i]).collect();
        }
        matches.sort_by_key(|m| m.index);
        Ok((matches, rounds))
    }

    /// OPRF outputs of all items, in requests of at most the server's limit.
    async fn oprf(&self, ch: &mut Channel, items: &[Vec<u8>]) -> Result<Vec<Output>, Error> {
        let mut outputs = Vec::with_capacity(items.len());
        for chunk in items.chunks(self.max_query_items.max(1) as usize) {
            let (blinds, blinded) = oprf::blind_batch(chunk, &mut OsRng)?;
            ch.send_msg(&OprfRequest { blinded }).await?;
            let resp = ch.recv_msg::<OprfResponse>(chunk.len()).await?;
            outputs.extend(oprf::finalize_batch(chunk, &blinds, &resp.evaluated)?);
        }
        Ok(outputs)
    }

    /// One query round: returns the matches (indices into `batch`) and the
    /// indices that did not fit the cuckoo table.
    async fn round(
        &self,
        ch: &mut Channel,
        batch: &[Output],
        times: &mut QueryTimes,
    ) -> Result<(Vec<Match>, Vec<usize>), Error> {
        let t = Instant::now();
        let (mut state, query) = self.receiver.query(batch, &mut OsRng)?;
        let header = QueryHeader {
            db_id: self.db_id,
            relin_key: self.receiver.relin_key().to_bytes()?,
        };
        let cts = query
            .iter()
            .flatten()
            .map(QueryCt::encode)
            .collect::<Result<Vec<_>, _>>()?;
        times.encrypt += t.elapsed();
        ch.send_msg(&header).await?;
        for ct in &cts {
            ch.send_msg(ct).await?;
        }
        self.receive(ch, &mut state, times).await?;
        let leftovers = std::mem::take(&mut state.leftovers);
        Ok((Receiver::matches(state), leftovers))
    }

    /// Reads result packages until the server's done message, decoding and
    /// decrypting them in batches on the rayon pool as they arrive.
    async fn receive(
        &self,
        ch: &mut Channel,
        state: &mut QueryState,
        times: &mut QueryTimes,
    ) -> Result<u32, Error> {
        let per_package = self.receiver.shape().polys();
        // A few packages per thread: enough to keep every thread busy,
        // few enough that decryption keeps up with the arrivals.
        let batch_len = rayon::current_num_threads() * 4;
        let mut batch: Vec<Vec<Frame>> = Vec::with_capacity(batch_len);
        let mut received = 0u32;
        loop {
            match next_answer(ch, per_package, "the answer").await? {
                Answer::Done(done) => {
                    times.decrypt += self.decrypt_batch(state, &mut batch)?;
                    check_done(done.packages, received, "result packages received")?;
                    times.server += Duration::from_micros(done.evaluation_micros);
                    return Ok(received);
                }
                Answer::Package(frames) => {
                    batch.push(frames);
                    received += 1;
                    if batch.len() == batch_len {
                        times.decrypt += self.decrypt_batch(state, &mut batch)?;
                    }
                }
            }
        }
    }

    /// Decodes and reads the packages of `batch` (emptied); returns the
    /// time the work took: from the first package's start on the pool to
    /// the last one's end, then reading them. Time the pool spent on other
    /// work first (an in-process server's evaluation) is not counted.
    fn decrypt_batch(
        &self,
        state: &mut QueryState,
        batch: &mut Vec<Vec<Frame>>,
    ) -> Result<Duration, Error> {
        let decoded = batch
            .par_drain(..)
            .map(|frames| {
                let start = Instant::now();
                let package = decode_package(&frames, self.receiver.he());
                (start, Instant::now(), package)
            })
            .collect::<Vec<_>>();
        let span = match (
            decoded.iter().map(|d| d.0).min(),
            decoded.iter().map(|d| d.1).max(),
        ) {
            (Some(first), Some(last)) => last.duration_since(first),
            _ => Duration::ZERO,
        };
        let packages = decoded
            .into_iter()
            .map(|(_, _, p)| p)
            .collect::<Result<Vec<_>, _>>()?;
        let t = Instant::now();
        self.receiver.process(state, &packages)?;
        Ok(span + t.elapsed())
    }
}
