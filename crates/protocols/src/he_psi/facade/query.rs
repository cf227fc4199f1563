//! Client queries: one query over a channel, a query of a server address
//! that retries a busy server, a client that keeps its parameters and keys
//! across queries, and the query as a sans-IO party. The policy: a client
//! may pad its query with random dummies so the server learns only the
//! padded size (dummies never appear in the results), and a database whose
//! keys are encoded otherwise than ours is refused before the query.

use std::time::{Duration, Instant};

use psikit_transport::Stepper;
use rand::RngCore;

use crate::common::connect::{block_on, with_busy_retry, ServerAddr};
use crate::common::{same_key_format, Match, NoProgress, Progress};
use crate::common::{Channel, Limits};
use crate::error::Error;
use crate::he_psi::client::driver::{HeClient, QueryOutcome};

/// Bytes of a padding dummy: no real key equals one except with negligible
/// probability.
const DUMMY_BYTES: usize = 32;

/// One client session: parameters, keys, and a query, with its traffic.
pub struct Session {
    /// Matches by index into the caller's items (never a padding dummy).
    pub matches: Vec<Match>,
    pub outcome: QueryOutcome,
    /// Items sent, padding included.
    pub queried: usize,
    /// Time to fetch the parameters and make keys.
    pub setup: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// log2 of the probability that the query reported any false match.
    pub fpp_log2: f64,
    /// Longest label the database holds (0: unlabeled).
    pub max_label_bytes: usize,
    /// The label columns' names the server published (empty: unknown).
    pub label_columns: Vec<String>,
}

/// How a client queries.
#[derive(Clone, Debug, Default)]
pub struct QueryOptions {
    /// Pad the query with random dummies to this many items, so the server
    /// learns the padded size instead of ours.
    pub pad_to: Option<usize>,
    /// How our keys are encoded (`psikit_io::KeySpec::key_format`): a
    /// database whose keys are encoded otherwise is refused before the
    /// query, since no key could match. Empty: no check.
    pub key_format: String,
}

/// Fetches the parameters, makes fresh keys and queries `keys` (see
/// [`QueryOptions`]); `progress` is told both as stages.
pub async fn query(
    ch: &mut Channel,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    let t = Instant::now();
    progress.stage("parameters and keys", None);
    let client = HeClient::connect(ch).await?;
    query_with(ch, &client, keys, options, t.elapsed(), progress).await
}

/// Queries `keys` with `client`'s parameters and keys (refusing a database
/// whose keys are encoded otherwise than ours); `setup` is the time it
/// took to make them.
async fn query_with(
    ch: &mut Channel,
    client: &HeClient,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    setup: Duration,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    same_key_format(client.key_format(), &options.key_format, "this client")?;
    let queried = padded(keys, options.pad_to)?;
    progress.stage("query", None);
    let mut outcome = client.query(ch, &queried).await?;
    // A dummy can only match by a false positive; it is no item of ours.
    outcome.matches.retain(|m| m.index < keys.len());
    Ok(Session {
        matches: std::mem::take(&mut outcome.matches),
        outcome,
        queried: queried.len(),
        setup,
        bytes_sent: ch.bytes_sent(),
        bytes_received: ch.bytes_received(),
        fpp_log2: client.fpp_log2(queried.len() as u64),
        max_label_bytes: client.max_label_bytes(),
        label_columns: client.label_columns().to_vec(),
    })
}

/// A client of one HE server that keeps the database's parameters and its
/// own keys across queries, so that each query after the first skips the
/// parameter round trip and key generation (and re-sends only its
/// queries). When the server's database changes parameters or key, the
/// server refuses the query as stale: the client fetches them again and
/// retries once. A busy server is retried with backoff ([`with_busy_retry`]).
pub struct Client {
    server: ServerAddr,
    keys: Option<HeClient>,
}

impl Client {
    /// A client of `server`; nothing is fetched before the first query.
    pub fn new(server: ServerAddr) -> Self {
        Self { server, keys: None }
    }

    /// The server's address.
    pub fn server(&self) -> &ServerAddr {
        &self.server
    }

    /// Queries `keys` over a new connection (see [`query`]); `setup` in the
    /// session is zero when the kept parameters and keys were used. A
    /// stale answer (the database changed its parameters or key) drops the
    /// kept keys and asks once more.
    pub async fn query(
        &mut self,
        keys: &[Vec<u8>],
        options: &QueryOptions,
        progress: &dyn Progress,
    ) -> Result<Session, Error> {
        let result = self.query_retrying(keys, options, progress).await;
        if !result.as_ref().is_err_and(Error::is_stale) {
            return result;
        }
        self.keys = None;
        self.query_retrying(keys, options, progress).await
    }

    /// One query, repeated while the server is busy ([`with_busy_retry`]).
    async fn query_retrying(
        &mut self,
        keys: &[Vec<u8>],
        options: &QueryOptions,
        progress: &dyn Progress,
    ) -> Result<Session, Error> {
        let server = self.server.clone();
        let mut state = (self, keys, options, progress);
        with_busy_retry(
            &server,
            &mut state,
            |(client, keys, options, progress), ch| {
                Box::pin(client.query_on(ch, keys, options, *progress))
            },
        )
        .await
    }

    /// One query on `ch`, with the kept keys or new ones.
    async fn query_on(
        &mut self,
        ch: &mut Channel,
        keys: &[Vec<u8>],
        options: &QueryOptions,
        progress: &dyn Progress,
    ) -> Result<Session, Error> {
        let (client, setup) = match self.keys.take() {
            Some(client) => (client, Duration::ZERO),
            None => {
                progress.stage("parameters and keys", None);
                let t = Instant::now();
                (HeClient::connect(ch).await?, t.elapsed())
            }
        };
        let result = query_with(ch, &client, keys, options, setup, progress).await;
        self.keys = Some(client);
        result
    }
}

/// [`query`] over a new connection to `server`, retrying a busy server
/// with backoff ([`with_busy_retry`]; a query changes nothing at the
/// server, so repeating it is safe). The one async entry for a query of an
/// address: [`query_blocking`] wraps it, and front ends with a runtime of
/// their own (Python's bindings) await it.
pub async fn query_server(
    server: &ServerAddr,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    let mut state = (keys, options, progress);
    with_busy_retry(server, &mut state, |(keys, options, progress), ch| {
        Box::pin(query(ch, keys, options, *progress))
    })
    .await
}

/// [`query_server`], blocking.
pub fn query_blocking(
    server: &ServerAddr,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    block_on(query_server(server, keys, options, progress))?
}

/// [`query`] as a sans-IO party: the caller carries its bytes to the
/// server (for instance to `Router::respond` on the other side of a
/// transport of its own) and pushes the answers back. Each request it
/// writes is whole before it waits, so every answer can come from a fresh
/// connection.
pub fn query_stepper(
    keys: Vec<Vec<u8>>,
    options: QueryOptions,
    limits: Limits,
) -> Stepper<Result<Session, Error>> {
    Stepper::new(limits, move |mut ch| async move {
        query(&mut ch, &keys, &options, &NoProgress).await
    })
}

/// The keys followed by random dummies up to `pad_to` items.
fn padded(keys: &[Vec<u8>], pad_to: Option<usize>) -> Result<Vec<Vec<u8>>, Error> {
    let Some(target) = pad_to else {
        return Ok(keys.to_vec());
    };
    if keys.len() > target {
        return Err(Error::Config(format!(
            "the input has {} distinct items, more than --pad-to {target}",
            keys.len()
        )));
    }
    let mut out = keys.to_vec();
    out.resize_with(target, || {
        let mut dummy = vec![0u8; DUMMY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut dummy);
        dummy
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_adds_distinct_dummies() {
        let keys = vec![b"a".to_vec(), b"b".to_vec()];
        assert_eq!(padded(&keys, None).expect("same"), keys);
        let out = padded(&keys, Some(5)).expect("padded");
        assert_eq!((out.len(), &out[..2]), (5, &keys[..]));
        assert!(out[2..].iter().all(|d| d.len() == 32 && !keys.contains(d)));
        assert_ne!(out[2], out[3]);
        assert!(padded(&keys, Some(1)).is_err());
    }
}
