//! The filter protocol's facade: what a server operator and a client do,
//! with the policy every front end (CLI, Python, benchmarks) shares.
//!
//! * Server: [`setup`] builds a state from a CSV file under a fresh OPRF
//!   key, never mixing it with an old state's key; [`update`] applies
//!   additions and removals as a new epoch. A running
//!   [`FilterService`](super::server::FilterService) opened on the directory picks the change up.
//! * Client: a [`FilterClient`] keeps its copy of the filter current
//!   (optionally in a cache file) and queries; when the server updated
//!   between the sync and the query, it syncs again and retries once.
//!   With a tag cache ([`FilterClient::with_tag_cache`]) a repeated query
//!   asks the server only for items it has not asked before.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use psikit_io::{KeyReader, KeySpec, ReadStats};
use psikit_primitives::oprf::ServerKey;
use psikit_transport::Stepper;

use super::cache::{ClientCache, SyncKind, SyncOutcome};
use super::client::QueryOutcome;
use super::config::FilterConfig;
use super::state::{tags_from_reader, ServerState, UpdateReport};
use super::tag::{tag_from_output, Tag};
use super::tag_cache::{TagCache, CANARY};
#[cfg(feature = "net")]
use crate::common::connect::{block_on, with_busy_retry, ServerAddr};
use crate::common::{
    advance, check_cancelled, oprf_stage, same_key_format, state_dir, Channel, Limits, NoProgress,
    Progress,
};
use crate::error::{Error, Violation};

/// What [`setup`] built.
pub struct SetupReport {
    pub state: ServerState,
    /// Rows read from the CSV file (and skipped for an empty key).
    pub read: ReadStats,
    /// Items dropped as duplicates of another row's key.
    pub duplicates: u64,
    /// Time of the OPRF pass over the file.
    pub oprf_time: Duration,
    /// Time to build the cuckoo filter.
    pub build_time: Duration,
}

/// Builds a new server state from the keys of `input` under a fresh OPRF
/// key and saves it in `dir`. A directory holding anything is refused
/// unless `force`; it is cleared only once the new state is built, so a
/// failed or cancelled set-up leaves the old state alone (`progress` is
/// asked whether to stop after every OPRF batch and before the filter is
/// built and saved).
pub fn setup(
    input: &Path,
    spec: &KeySpec,
    config: FilterConfig,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<SetupReport, Error> {
    let (_lock, clear) = open_new_state(&config, dir, force)?;
    let mut reader = KeyReader::open(input, spec)?;
    progress.stage("computing OPRF", None);
    check_cancelled(progress)?;
    let t = Instant::now();
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let tags = tags_from_reader(&key, &mut reader, &mut |rows| advance(progress, rows))?;
    let oprf_time = t.elapsed();
    let (state, duplicates, build_time) =
        build_and_save(key, tags, config, spec.key_format(), dir, clear, progress)?;
    Ok(SetupReport {
        state,
        read: reader.stats(),
        duplicates,
        oprf_time,
        build_time,
    })
}

/// The last stage of a set-up split into stages, whose OPRF an engine
/// spread over machines (`common::oprf_stage`; psikit's Ray pipeline):
/// the state of the rows spooled under `spool` (as one shard) under the
/// key in `key_file`, saved in `dir` as [`setup`] saves it. `rows` is what
/// the OPRF stage counted (the report's rows read). The key file is
/// removed once the state, which holds the key, is saved.
#[allow(clippy::too_many_arguments)]
pub fn setup_from_spool(
    spool: &Path,
    key_file: &Path,
    rows: u64,
    key_format: String,
    config: FilterConfig,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<SetupReport, Error> {
    let (_lock, clear) = open_new_state(&config, dir, force)?;
    let key = oprf_stage::load_key(key_file)?;
    progress.stage("reading the OPRF outputs", None);
    let t = Instant::now();
    let tags: Vec<Tag> = oprf_stage::Spool::read_shard(spool, 0, 0)?
        .iter()
        .flat_map(|batch| batch.outputs.iter().map(tag_from_output))
        .collect();
    let oprf_time = t.elapsed();
    let (state, duplicates, build_time) =
        build_and_save(key, tags, config, key_format, dir, clear, progress)?;
    std::fs::remove_file(key_file).map_err(|e| Error::io(key_file, e))?;
    Ok(SetupReport {
        state,
        read: ReadStats {
            rows_read: rows,
            rows_skipped: 0,
        },
        duplicates,
        oprf_time,
        build_time,
    })
}

/// Checks a new state's configuration and takes `dir`'s lock; whether the
/// directory holds a state to clear before saving (refused unless `force`).
fn open_new_state(
    config: &FilterConfig,
    dir: &Path,
    force: bool,
) -> Result<(state_dir::StateLock, bool), Error> {
    config.validate()?;
    let lock = state_dir::lock(dir)?;
    let clear = state_dir::check_fresh(dir, force, "psikit filter update", &super::state::LAYOUT)?;
    Ok((lock, clear))
}

/// A new state's filter built from `tags` and saved in `dir` (cleared
/// first when `clear`), with the duplicates dropped and the build's time.
fn build_and_save(
    key: ServerKey,
    tags: Vec<Tag>,
    config: FilterConfig,
    key_format: String,
    dir: &Path,
    clear: bool,
    progress: &dyn Progress,
) -> Result<(ServerState, u64, Duration), Error> {
    progress.stage("building the filter", None);
    let t = Instant::now();
    let (mut state, duplicates) = ServerState::build(key, tags, config)?;
    state.set_key_format(key_format);
    let build_time = t.elapsed();
    // The last point where stopping leaves the directory untouched.
    check_cancelled(progress)?;
    if clear {
        state_dir::clear(dir)?;
    }
    state.save(dir)?;
    Ok((state, duplicates, build_time))
}

/// Adds the keys of `add` and removes those of `remove` (CSV files read
/// with `spec`) as one new epoch, saved in `dir`. Updates of one directory
/// never interleave: a second one is refused while the first runs. A
/// cancelled update (see [`setup`]) leaves the saved state as it was.
pub fn update(
    dir: &Path,
    spec: &KeySpec,
    add: Option<&Path>,
    remove: Option<&Path>,
    progress: &dyn Progress,
) -> Result<(ServerState, UpdateReport), Error> {
    if add.is_none() && remove.is_none() {
        return Err(Error::Config(
            "nothing to do: give --add FILE and/or --remove FILE".into(),
        ));
    }
    let _lock = state_dir::lock(dir)?;
    let mut state = ServerState::load(dir)?;
    same_key_format(state.key_format(), &spec.key_format(), "this update")?;
    let tags_of = |path: Option<&Path>, stage: &str| -> Result<Vec<Tag>, Error> {
        let Some(path) = path else {
            return Ok(Vec::new());
        };
        let mut reader = KeyReader::open(path, spec)?;
        progress.stage(stage, None);
        check_cancelled(progress)?;
        tags_from_reader(state.key(), &mut reader, &mut |rows| {
            advance(progress, rows)
        })
    };
    let add = tags_of(add, "computing OPRF (additions)")?;
    let remove = tags_of(remove, "computing OPRF (removals)")?;
    let report = state.update(add, remove)?;
    check_cancelled(progress)?;
    state.save(dir)?;
    Ok((state, report))
}

/// What a [`FilterClient::query`] did: the syncs it needed, then the query.
pub struct ClientQuery {
    /// One sync, or two when the server updated before the query arrived.
    pub syncs: Vec<SyncOutcome>,
    pub outcome: QueryOutcome,
}

/// A client of the filter protocol: its copy of the server's filter,
/// optionally kept in a cache file between runs.
pub struct FilterClient {
    cache: Option<ClientCache>,
    path: Option<PathBuf>,
    max_filter_bytes: u64,
    discarded: Option<String>,
    /// How our keys are encoded, compared with the server's before a query.
    key_format: String,
    /// The tags of the last query's items, if kept ([`Self::with_tag_cache`]).
    tags: Option<TagStore>,
}

/// The tag cache, where it is saved, and why the file was set aside.
struct TagStore {
    cache: TagCache,
    path: PathBuf,
    discarded: Option<String>,
}

impl FilterClient {
    /// A client whose filter lives in `path` between runs (loaded now if
    /// the file exists). A damaged file (truncated, empty, garbage, a
    /// flipped bit) is set aside: the next sync downloads the full filter
    /// and replaces it, and [`FilterClient::discarded_cache`] says why.
    /// `max_filter_bytes` bounds what a server may make the client
    /// download and hold.
    pub fn with_cache_file(path: &Path, max_filter_bytes: u64) -> Result<Self, Error> {
        let (cache, discarded) = match ClientCache::load(path) {
            Ok(cache) => (cache, None),
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(damaged) => (None, Some(damaged.to_string())),
        };
        Ok(Self {
            cache,
            path: Some(path.to_path_buf()),
            max_filter_bytes,
            discarded,
            key_format: String::new(),
            tags: None,
        })
    }

    /// Keeps the tags of each query's items in `path` (loaded now if it
    /// exists), so the next query asks the server only for new items; see
    /// [`super::tag_cache`] for what that reveals and how a key change is
    /// noticed. A damaged file is set aside (every item is asked, the
    /// file rewritten) and [`Self::discarded_tag_cache`] says why.
    pub fn with_tag_cache(mut self, path: &Path) -> Result<Self, Error> {
        let (cache, discarded) = match TagCache::load(path) {
            Ok(cache) => (cache, None),
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(damaged) => (TagCache::default(), Some(damaged.to_string())),
        };
        self.tags = Some(TagStore {
            cache,
            path: path.to_path_buf(),
            discarded,
        });
        Ok(self)
    }

    /// Why the tag cache file could not be used, if it was damaged.
    pub fn discarded_tag_cache(&self) -> Option<&str> {
        self.tags.as_ref()?.discarded.as_deref()
    }

    /// Makes [`FilterClient::query`] refuse a server whose keys are
    /// encoded otherwise (`psikit_io::KeySpec::key_format`): no key could
    /// match, and the client says why instead of finding nothing.
    pub fn with_key_format(mut self, format: String) -> Self {
        self.key_format = format;
        self
    }

    /// Why the cache file could not be used, if it was damaged.
    pub fn discarded_cache(&self) -> Option<&str> {
        self.discarded.as_deref()
    }

    /// A client that keeps its filter in memory only.
    pub fn in_memory(max_filter_bytes: u64) -> Self {
        Self {
            cache: None,
            path: None,
            max_filter_bytes,
            discarded: None,
            key_format: String::new(),
            tags: None,
        }
    }

    /// A client whose filter its caller stores ([`Self::saved`]) where no
    /// file can be (a browser's IndexedDB), starting from `saved` if it
    /// has one. A damaged copy is set aside as a damaged cache file is.
    pub fn from_saved(saved: Option<&[u8]>, max_filter_bytes: u64) -> Self {
        let mut client = Self::in_memory(max_filter_bytes);
        match saved.map(ClientCache::decode) {
            None => {}
            Some(Ok(cache)) => client.cache = Some(cache),
            Some(Err(damaged)) => client.discarded = Some(damaged.to_string()),
        }
        client
    }

    /// The filter as [`Self::from_saved`] takes it back (integrity-checked
    /// when loaded); `None` before the first sync.
    pub fn saved(&self) -> Option<Vec<u8>> {
        self.cache.as_ref().map(ClientCache::encode)
    }

    /// Brings the filter up to date (a full download or a delta) and saves
    /// it when it changed.
    pub async fn sync(&mut self, ch: &mut Channel) -> Result<SyncOutcome, Error> {
        self.sync_reporting(ch, &NoProgress).await
    }

    /// [`Self::sync`], a download reported to `progress` (a stage counting
    /// bytes).
    async fn sync_reporting(
        &mut self,
        ch: &mut Channel,
        progress: &dyn Progress,
    ) -> Result<SyncOutcome, Error> {
        let outcome =
            ClientCache::sync(&mut self.cache, ch, self.max_filter_bytes, progress).await?;
        let cache = self
            .cache
            .as_ref()
            .ok_or(Error::Peer(Violation::Unexpected(
                "a sync that sent no filter",
            )))?;
        if let (Some(path), true) = (&self.path, outcome.kind != SyncKind::UpToDate) {
            cache.save(path)?;
        }
        Ok(outcome)
    }

    /// Syncs, then finds which of `items` the server holds. A server that
    /// updated between the two refuses the query as stale: the client
    /// syncs again and retries once. `progress` is told each sync and
    /// query as a stage.
    pub async fn query(
        &mut self,
        ch: &mut Channel,
        items: &[Vec<u8>],
        progress: &dyn Progress,
    ) -> Result<ClientQuery, Error> {
        progress.stage("sync", None);
        let mut syncs = vec![self.sync_reporting(ch, progress).await?];
        same_key_format(&syncs[0].key_format, &self.key_format, "this client")?;
        progress.stage("query", None);
        let outcome = match self.query_synced(ch, items).await {
            Err(e) if e.is_stale() => {
                progress.stage("sync", None);
                syncs.push(self.sync_reporting(ch, progress).await?);
                progress.stage("query", None);
                self.query_synced(ch, items).await?
            }
            other => other?,
        };
        Ok(ClientQuery { syncs, outcome })
    }

    /// Queries with the filter as it is, without syncing first.
    pub async fn query_synced(
        &mut self,
        ch: &mut Channel,
        items: &[Vec<u8>],
    ) -> Result<QueryOutcome, Error> {
        let cache = self
            .cache
            .as_ref()
            .ok_or(Error::Misuse("query before the first sync"))?;
        match self.tags.as_mut() {
            None => cache.query(ch, items).await,
            Some(store) => query_with_tag_cache(cache, store, ch, items).await,
        }
    }

    /// [`FilterClient::sync`] over a new connection to `server`; a busy
    /// server is retried with backoff ([`with_busy_retry`]).
    #[cfg(feature = "net")]
    pub async fn sync_at(&mut self, server: &ServerAddr) -> Result<SyncOutcome, Error> {
        with_busy_retry(server, self, |client, ch| Box::pin(client.sync(ch))).await
    }

    /// [`FilterClient::query`] over a new connection to `server`; a busy
    /// server is retried with backoff ([`with_busy_retry`]).
    #[cfg(feature = "net")]
    pub async fn query_at(
        &mut self,
        server: &ServerAddr,
        items: &[Vec<u8>],
        progress: &dyn Progress,
    ) -> Result<ClientQuery, Error> {
        let mut state = (self, items, progress);
        with_busy_retry(server, &mut state, |(client, items, progress), ch| {
            Box::pin(client.query(ch, items, *progress))
        })
        .await
    }

    /// [`FilterClient::sync_at`], blocking.
    #[cfg(feature = "net")]
    pub fn sync_blocking(&mut self, server: &ServerAddr) -> Result<SyncOutcome, Error> {
        block_on(self.sync_at(server))?
    }

    /// [`FilterClient::query_at`], blocking.
    #[cfg(feature = "net")]
    pub fn query_blocking(
        &mut self,
        server: &ServerAddr,
        items: &[Vec<u8>],
        progress: &dyn Progress,
    ) -> Result<ClientQuery, Error> {
        block_on(self.query_at(server, items, progress))?
    }
}

/// A query that asks the server only for the items missing from the tag
/// cache, plus the canary that tells whether the cached tags are still
/// the server key's; if not, the cached items are asked too. The cache
/// then holds exactly this query's items.
async fn query_with_tag_cache(
    cache: &ClientCache,
    store: &mut TagStore,
    ch: &mut Channel,
    items: &[Vec<u8>],
) -> Result<QueryOutcome, Error> {
    let hashes = TagCache::hash_all(items);
    let (known, sorted) = store.cache.lookup(&hashes);
    let mut out = QueryOutcome::default();
    let mut asked = vec![CANARY.to_vec()];
    asked.extend(missing(items, &known, |k| k.is_none()));
    let answered = cache.query_tags_over(ch, &asked, &mut out).await?;
    let (&key_id, fresh) = answered
        .split_first()
        .ok_or(Error::Misuse("the server answered no item"))?;
    let mut known = known;
    if store.cache.key_id() != Some(&key_id) {
        // Another key: every cached tag is void; ask for those items too.
        let again: Vec<Vec<u8>> = missing(items, &known, |k| k.is_some()).collect();
        let tags = cache.query_tags_over(ch, &again, &mut out).await?;
        let mut tags = tags.into_iter();
        for k in known.iter_mut().filter(|k| k.is_some()) {
            *k = tags.next();
        }
    } else {
        out.cached = known.iter().filter(|k| k.is_some()).count() as u64;
    }
    let mut fresh = fresh.iter().copied();
    let tags: Vec<Tag> = known
        .into_iter()
        .map(|k| k.or_else(|| fresh.next()))
        .collect::<Option<_>>()
        .ok_or(Error::Misuse("the server answered fewer items than asked"))?;
    store.cache.replace(key_id, &sorted, &tags);
    store.cache.save(&store.path)?;
    out.matches = cache.matches(&tags);
    Ok(out)
}

/// The items whose cached tag `pick` selects, cloned for a request.
fn missing<'a>(
    items: &'a [Vec<u8>],
    known: &'a [Option<Tag>],
    pick: impl Fn(&Option<Tag>) -> bool + 'a,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    items
        .iter()
        .zip(known)
        .filter(move |(_, k)| pick(k))
        .map(|(item, _)| item.clone())
}

/// [`FilterClient::query`] as a sans-IO party: the caller carries its
/// bytes to the server (for instance to `Router::respond` on the other side
/// of a transport of its own, or over a browser's WebSocket) and pushes
/// the answers back. Each request it writes is whole before it waits, so
/// every answer can come from a fresh connection. The client's cache file,
/// if any, is kept current as in a networked query; the client comes back
/// with the result, its filter synced ([`FilterClient::saved`]).
/// `progress` hears the query's stages and a download's bytes.
pub fn query_stepper(
    mut client: FilterClient,
    items: Vec<Vec<u8>>,
    limits: Limits,
    progress: Arc<dyn Progress + Send>,
) -> Stepper<(FilterClient, Result<ClientQuery, Error>)> {
    Stepper::new(limits, move |mut ch| async move {
        let result = client.query(&mut ch, &items, progress.as_ref()).await;
        (client, result)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use psikit_io::{Column, KeySpec};

    use super::*;
    use crate::common::NoProgress;
    use crate::filter_psi::state::tags_for_items;

    fn spec() -> KeySpec {
        KeySpec::new(vec![Column::Name("email".into())])
    }

    /// The tag the state would hold for `email`.
    fn holds(state: &ServerState, email: &str) -> bool {
        let item = psikit_io::Item {
            key: email.as_bytes().to_vec(),
            row: 1,
        };
        let tags = tags_for_items(state.key(), &[item]).expect("tag");
        state.filter().contains(&tags[0])
    }

    #[test]
    fn concurrent_updates_are_never_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, state) = (dir.path().join("server.csv"), dir.path().join("state"));
        std::fs::write(&server, "email\na@x\nb@x\n").expect("write");
        let config = FilterConfig::default();
        setup(&server, &spec(), config, &state, false, &NoProgress).expect("setup");
        for round in 0..4 {
            let barrier = Arc::new(Barrier::new(2));
            let runs: Vec<_> = (0..2)
                .map(|who| {
                    let add = dir.path().join(format!("add{round}{who}.csv"));
                    std::fs::write(&add, format!("email\nnew{round}{who}@x\n")).expect("write");
                    let (barrier, state) = (barrier.clone(), state.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        update(&state, &spec(), Some(&add), None, &NoProgress).map(|_| ())
                    })
                })
                .collect();
            let outcomes: Vec<_> = runs.into_iter().map(|r| r.join().expect("run")).collect();
            let now = ServerState::load(&state).expect("load");
            for (who, outcome) in outcomes.iter().enumerate() {
                let email = format!("new{round}{who}@x");
                match outcome {
                    Ok(()) => assert!(holds(&now, &email), "an update that succeeded was lost"),
                    Err(e) => {
                        assert!(e.to_string().contains("another psikit command"), "{e}");
                        assert!(!holds(&now, &email), "a refused update was applied");
                    }
                }
            }
        }
    }

    /// Asks the job to stop at its `at`-th question (never for
    /// `usize::MAX`) and counts the questions.
    struct StopAt {
        at: usize,
        asked: AtomicUsize,
    }

    impl StopAt {
        fn new(at: usize) -> Self {
            Self {
                at,
                asked: AtomicUsize::new(0),
            }
        }
    }

    impl Progress for StopAt {
        fn stage(&self, _: &str, _: Option<u64>) {}
        fn advance(&self, _: u64) {}
        fn cancelled(&self) -> bool {
            self.asked.fetch_add(1, Ordering::Relaxed) + 1 >= self.at
        }
    }

    #[test]
    fn a_cancelled_setup_or_update_leaves_the_directory_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, state) = (dir.path().join("server.csv"), dir.path().join("state"));
        std::fs::write(&server, "email\na@x\nb@x\n").expect("write");
        let add = dir.path().join("add.csv");
        std::fs::write(&add, "email\nc@x\n").expect("write");
        let config = FilterConfig::default();

        let err = setup(&server, &spec(), config, &state, false, &StopAt::new(1));
        assert!(matches!(err, Err(Error::Cancelled)), "not cancelled");
        assert!(
            ServerState::load(&state).is_err(),
            "a cancelled set-up saved a state"
        );

        let counted = StopAt::new(usize::MAX);
        let before = setup(&server, &spec(), config, &state, false, &counted)
            .expect("setup")
            .state
            .version();
        let questions = counted.asked.load(Ordering::Relaxed);
        assert!(questions >= 2, "asked {questions} times");
        // Stopped at each question in turn: a forced set-up keeps the old
        // state (same filter id), an update adds nothing.
        for at in 1..=questions {
            let err = setup(&server, &spec(), config, &state, true, &StopAt::new(at));
            assert!(
                matches!(err, Err(Error::Cancelled)),
                "set-up not stopped at {at}"
            );
            let err = update(&state, &spec(), Some(&add), None, &StopAt::new(at));
            assert!(
                matches!(err, Err(Error::Cancelled)),
                "update not stopped at {at}"
            );
            let now = ServerState::load(&state).expect("the old state");
            assert_eq!(now.version(), before, "stopped at {at}");
            assert!(holds(&now, "a@x") && !holds(&now, "c@x"), "stopped at {at}");
        }
    }
}
