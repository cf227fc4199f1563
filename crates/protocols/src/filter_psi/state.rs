//! The server's long-lived state: OPRF key, the set of tags, the filter and
//! the recent change history that deltas are cut from.
//!
//! On disk a state directory holds two files:
//! * `oprf.key`: the secret OPRF key, created with mode 0600 and refused if
//!   others can read it;
//! * `filter.state`: everything else, versioned, replaced atomically
//!   (write to a temporary file, fsync, rename) so a running server never
//!   reads a half-written state;
//! * `filter.state.1`, `.2`, ...: the updates since `filter.state` was
//!   written, one change file each ([`crate::common::changelog`]): an
//!   update of 1% of a large set writes its own tags and slots, not the
//!   whole state again. A save writes `filter.state` whole instead when
//!   the changes would pass a quarter of it, after a rebuild, or when the
//!   key format changed.

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};

use psikit_io::{Item, KeyReader};
use psikit_primitives::oprf::ServerKey;
use psikit_structures::{CuckooFilter, CuckooFilterParams, FilterError};
use psikit_transport::{Reader, Writer};
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::config::FilterConfig;
use super::messages::FilterVersion;
use super::tag::{tag_from_output, Tag};
use crate::common::changelog::{self, trailing_digest, ChangeLog};
use crate::error::Error;
use crate::keyfile;
use sorted::{
    partition_by_membership, read_tags, replace_fitting, sort_unique, sorted_difference, write_tags,
};

const STATE_FILE: &str = "filter.state";
const KEY_FILE: &str = "oprf.key";

/// The state directory's files: the key is written before the state file.
pub(crate) const LAYOUT: crate::common::state_dir::Layout = crate::common::state_dir::Layout {
    main: STATE_FILE,
    before: &[KEY_FILE],
};
const STATE_MAGIC: &[u8; 8] = b"PSIKFLT\0";
/// Version 5 may be followed by change files (an older build would ignore
/// them, so it refuses this version); its layout is version 4's. Version
/// 4 holds the digest of the OPRF key it was built under
/// (`keyfile::digest`), checked on load; version 3 has none (still read,
/// unchecked). Versions 2 and up end with a SHA-256 digest of everything
/// before it; version 1 (no digest) is still read.
pub(crate) const STATE_VERSION: u8 = 5;
/// Version 5's layout, without change files.
const UNLOGGED_VERSION: u8 = 4;
/// Digested, with the key format, without the key's digest.
const UNBOUND_VERSION: u8 = 3;
/// Digested, without the key format (read as unknown).
const UNFORMATTED_VERSION: u8 = 2;
const UNDIGESTED_VERSION: u8 = 1;

/// Rows read from CSV per OPRF batch: large enough to keep both cores busy
/// (the OPRF's chunks are at most 256 items), small enough that memory
/// stays bounded by the tags, not the file, and that a cancelled set-up
/// stops within a fraction of a second (each batch is a progress report).
const SETUP_BATCH: usize = 1 << 13;

/// What an update did.
#[derive(Debug, Clone, Default)]
pub struct UpdateReport {
    pub added: u64,
    pub already_present: u64,
    pub removed: u64,
    pub not_found: u64,
    pub changed_slots: u64,
    /// Whether the update rebuilt the filter (clients will fetch it whole).
    pub rebuilt: bool,
    pub epoch: u64,
}

/// Computes the filter tags of a batch of items (both cores, via rayon).
pub fn tags_for_items(key: &ServerKey, items: &[Item]) -> Result<Vec<Tag>, Error> {
    let inputs: Vec<&[u8]> = items.iter().map(|i| i.key.as_slice()).collect();
    let outputs = key.evaluate_batch(&inputs)?;
    Ok(outputs.iter().map(tag_from_output).collect())
}

/// Streams a CSV through the OPRF; `progress` is called with the number of
/// rows read so far after every batch, and an error it returns (a
/// cancelled job) ends the stream.
pub fn tags_from_reader<R: std::io::Read>(
    key: &ServerKey,
    reader: &mut KeyReader<R>,
    progress: &mut dyn FnMut(u64) -> Result<(), Error>,
) -> Result<Vec<Tag>, Error> {
    let mut tags = Vec::new();
    let mut batch = Vec::with_capacity(SETUP_BATCH);
    loop {
        batch.clear();
        if reader.next_batch(SETUP_BATCH, &mut batch)? == 0 {
            break;
        }
        tags.extend(tags_for_items(key, &batch)?);
        progress(reader.stats().rows_read)?;
    }
    Ok(tags)
}

/// The server's state for the filter protocol.
pub struct ServerState {
    key: ServerKey,
    config: FilterConfig,
    version: FilterVersion,
    /// Sorted, unique tags of every item in the set. Needed to rebuild a
    /// larger filter and to refuse deleting items that are not present
    /// (which would corrupt another item's fingerprint).
    tags: Vec<Tag>,
    filter: CuckooFilter,
    /// (epoch, slots changed by the update that produced it), oldest
    /// first, covering a contiguous run of epochs ending at the current one.
    history: VecDeque<(u64, Vec<u64>)>,
    /// How the set's keys were encoded (`psikit_io::KeySpec::key_format`),
    /// sent to clients so that one encoding its keys otherwise is told;
    /// empty if unknown.
    key_format: String,
    /// The change files after the base this state was last saved as or
    /// loaded from; `None` before the first save.
    log: Option<ChangeLog>,
    /// Updates since then, each encoded as a change file's body.
    unsaved: Vec<Vec<u8>>,
    /// Whether the next save writes the base whole: a new state, a
    /// rebuilt filter or a new key format, none of which a change holds.
    needs_base: bool,
}

impl ServerState {
    /// Builds a fresh state (epoch 0, new filter id) from the set's tags.
    pub fn build(
        key: ServerKey,
        mut tags: Vec<Tag>,
        config: FilterConfig,
    ) -> Result<(Self, u64), Error> {
        config.validate()?;
        let duplicates = sort_unique(&mut tags);
        let filter = build_filter(&tags, &config)?;
        let state = Self {
            key,
            config,
            version: FilterVersion {
                filter_id: random_id(),
                epoch: 0,
            },
            tags,
            filter,
            history: VecDeque::new(),
            key_format: String::new(),
            log: None,
            unsaved: Vec::new(),
            needs_base: true,
        };
        Ok((state, duplicates))
    }

    pub fn key(&self) -> &ServerKey {
        &self.key
    }

    pub fn config(&self) -> &FilterConfig {
        &self.config
    }

    pub fn version(&self) -> FilterVersion {
        self.version
    }

    pub fn filter(&self) -> &CuckooFilter {
        &self.filter
    }

    pub fn len(&self) -> usize {
        self.tags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Applies removals, then insertions, as one new epoch. Rebuilds a
    /// larger filter (new filter id) if an insertion fails or the load
    /// passes `rebuild_load`.
    pub fn update(
        &mut self,
        mut add: Vec<Tag>,
        mut remove: Vec<Tag>,
    ) -> Result<UpdateReport, Error> {
        sort_unique(&mut add);
        sort_unique(&mut remove);
        let mut report = UpdateReport::default();
        self.filter.set_track_changes(true);

        let (present, absent) = partition_by_membership(&remove, &self.tags);
        report.removed = present.len() as u64;
        report.not_found = absent as u64;
        for tag in &present {
            self.filter.delete(tag);
        }
        // Removals come first: an item removed and added again is fresh.
        let (held, _) = partition_by_membership(&add, &self.tags);
        let already = sorted_difference(&held, &present);
        let fresh = sorted_difference(&add, &already);
        report.already_present = already.len() as u64;
        report.added = fresh.len() as u64;
        let mut needs_rebuild = false;
        for tag in &fresh {
            if let Err(FilterError::Full) = self.filter.insert(tag) {
                needs_rebuild = true;
                break;
            }
        }
        let (gone, new) = (
            sorted_difference(&present, &fresh),
            sorted_difference(&fresh, &present),
        );
        // `gone` is in the set and `new` is not, by the partitions above.
        replace_fitting(&mut self.tags, &gone, &new);
        needs_rebuild |= self.filter.load_factor() > self.config.rebuild_load;

        self.version.epoch += 1;
        report.epoch = self.version.epoch;
        if needs_rebuild {
            self.rebuild()?;
            report.rebuilt = true;
        } else {
            let changed = self.filter.take_changed_slots();
            report.changed_slots = changed.len() as u64;
            let change = self.encode_change(&gone, &new, &changed);
            self.unsaved.push(change);
            self.push_history(changed);
        }
        self.filter.set_track_changes(false);
        Ok(report)
    }

    fn push_history(&mut self, changed: Vec<u64>) {
        self.history.push_back((self.version.epoch, changed));
        while self.history.len() > self.config.history_epochs as usize {
            self.history.pop_front();
        }
    }

    /// Builds a new filter sized for the current set under a new filter id.
    fn rebuild(&mut self) -> Result<(), Error> {
        self.filter = build_filter(&self.tags, &self.config)?;
        self.version.filter_id = random_id();
        self.history.clear();
        self.unsaved.clear();
        self.needs_base = true;
        Ok(())
    }

    /// Filter slots changed since `epoch`, if the history reaches back that far
    /// for the current filter; `None` means the client needs the full
    /// filter.
    pub fn changed_since(&self, have: FilterVersion) -> Option<Vec<u64>> {
        if have.filter_id != self.version.filter_id || have.epoch > self.version.epoch {
            return None;
        }
        if have.epoch == self.version.epoch {
            return Some(Vec::new());
        }
        let oldest = self.history.front()?.0;
        if have.epoch + 1 < oldest {
            return None;
        }
        let mut slots: Vec<u64> = self
            .history
            .iter()
            .filter(|(e, _)| *e > have.epoch)
            .flat_map(|(_, b)| b.iter().copied())
            .collect();
        slots.sort_unstable();
        slots.dedup();
        Some(slots)
    }

    /// Saves the key (if the directory has none yet; another key there is
    /// an error) and the state: the updates since the last save or load
    /// as change files when they fit (see the module's documentation),
    /// else the whole state.
    pub fn save(&mut self, dir: &Path) -> Result<(), Error> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        keyfile::write_or_match(&dir.join(KEY_FILE), &self.key.to_bytes())?;
        let mut log = self.log.take();
        let saved = changelog::save(
            &mut log,
            &state_path(dir),
            &self.unsaved,
            self.needs_base,
            false,
            || self.encode(),
        );
        self.log = log;
        saved?;
        self.unsaved.clear();
        self.needs_base = false;
        Ok(())
    }

    /// Loads a state directory written by [`ServerState::save`]: the base,
    /// then its change files in order.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let key_bytes = keyfile::read_secret(&dir.join(KEY_FILE))?;
        let key = ServerKey::from_bytes(&key_bytes)?;
        let path = state_path(dir);
        let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let named = |e| in_file(&path, e);
        let logged = bytes.get(STATE_MAGIC.len()) == Some(&STATE_VERSION);
        let (digest, len) = (trailing_digest(&bytes), bytes.len() as u64);
        let mut state = Self::decode(key, &bytes).map_err(named)?;
        drop(bytes);
        if logged {
            let (log, changes) = ChangeLog::read(&path, digest, len, false)?;
            for change in changes {
                state.apply_change(&change).map_err(named)?;
            }
            state.log = Some(log);
            state.needs_base = false;
        }
        Ok(state)
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let filter = self.filter.to_bytes();
        let mut w = Writer::with_capacity(filter.len() + 16 * self.tags.len() + 256);
        w.bytes(STATE_MAGIC).u8(STATE_VERSION);
        w.bytes(&keyfile::digest(&self.key.to_bytes()));
        w.string(&self.key_format);
        let c = &self.config;
        w.u32(c.fpr_log2)
            .u32(c.bucket_size)
            .u64(c.build_load.to_bits())
            .u64(c.rebuild_load.to_bits())
            .u32(c.history_epochs);
        w.bytes(&self.version.filter_id).u64(self.version.epoch);
        w.count(self.history.len());
        for (epoch, slots) in &self.history {
            w.u64(*epoch).count(slots.len());
            for b in slots {
                w.u64(*b);
            }
        }
        write_tags(&mut w, &self.tags);
        w.u64(filter.len() as u64).bytes(&filter);
        let mut bytes = w.into_bytes();
        let digest = Sha256::digest(&bytes);
        bytes.extend_from_slice(&digest);
        bytes
    }

    /// The encoding without its digest, once the digest is checked: a
    /// flipped bit anywhere in the file is an error, never a silently
    /// different state.
    fn checked_body(bytes: &[u8]) -> Result<&[u8], Error> {
        match bytes.get(STATE_MAGIC.len()) {
            Some(&STATE_VERSION | &UNLOGGED_VERSION | &UNBOUND_VERSION | &UNFORMATTED_VERSION) => {
                let split = bytes
                    .len()
                    .checked_sub(32)
                    .ok_or_else(|| Error::StateFile("truncated".into()))?;
                let (body, digest) = bytes.split_at(split);
                if Sha256::digest(body).as_slice() != digest {
                    return Err(Error::StateFile(
                        "damaged: its digest does not match its contents".into(),
                    ));
                }
                Ok(body)
            }
            _ => Ok(bytes),
        }
    }

    pub(crate) fn decode(key: ServerKey, bytes: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new(Self::checked_body(bytes)?);
        if r.bytes(8, "magic")? != STATE_MAGIC {
            return Err(Error::StateFile("not a psikit filter state".into()));
        }
        let version = r.u8("version")?;
        let known = [
            STATE_VERSION,
            UNLOGGED_VERSION,
            UNBOUND_VERSION,
            UNFORMATTED_VERSION,
            UNDIGESTED_VERSION,
        ];
        if !known.contains(&version) {
            return Err(Error::StateFile(format!(
                "state format version {version}; this build reads version {STATE_VERSION}"
            )));
        }
        if version == STATE_VERSION || version == UNLOGGED_VERSION {
            let bound: [u8; 32] = r.array("key digest")?;
            if bound != keyfile::digest(&key.to_bytes()) {
                return Err(Error::StateFile(
                    "built under another OPRF key than the directory's oprf.key: every query \
                     would miss; set the filter up again"
                        .into(),
                ));
            }
        }
        let key_format = match version {
            STATE_VERSION | UNLOGGED_VERSION | UNBOUND_VERSION => {
                r.string(psikit_io::MAX_KEY_FORMAT, "key format")?
            }
            _ => String::new(),
        };
        let config = FilterConfig {
            fpr_log2: r.u32("fpr")?,
            bucket_size: r.u32("bucket size")?,
            build_load: f64::from_bits(r.u64("build load")?),
            rebuild_load: f64::from_bits(r.u64("rebuild load")?),
            history_epochs: r.u32("history")?,
        };
        config.validate()?;
        let version = FilterVersion {
            filter_id: r.array("filter id")?,
            epoch: r.u64("epoch")?,
        };
        let entries = r.count(u64::from(config.history_epochs), 12, "history")?;
        let mut history = VecDeque::with_capacity(entries);
        for _ in 0..entries {
            let epoch = r.u64("history epoch")?;
            let n = r.count(u64::MAX, 8, "history slots")?;
            let slots = (0..n).map(|_| r.u64("slot")).collect::<Result<_, _>>()?;
            history.push_back((epoch, slots));
        }
        let tags = read_tags(&mut r, "tags")?;
        let filter_len = usize::try_from(r.u64("filter length")?)
            .map_err(|_| Error::StateFile("filter length overflows".into()))?;
        let filter = CuckooFilter::from_bytes(r.bytes(filter_len, "filter")?, filter_len)?;
        r.finish()?;
        // Deltas are cut from the history: a slot outside the filter would
        // fail every sync that reaches back to it.
        let slots = filter.capacity_slots();
        if history
            .iter()
            .flat_map(|(_, s)| s)
            .any(|&slot| slot >= slots)
        {
            return Err(Error::StateFile(format!(
                "history names a slot outside the filter's {slots}"
            )));
        }
        Ok(Self {
            key,
            config,
            version,
            tags,
            filter,
            history,
            key_format,
            log: None,
            unsaved: Vec::new(),
            needs_base: true,
        })
    }

    /// The last update's change file body, not yet saved.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn last_change(&self) -> Option<&[u8]> {
        self.unsaved.last().map(Vec::as_slice)
    }

    /// Whether the tags are sorted and unique, as every merge needs.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn tags_in_order(&self) -> bool {
        self.tags.windows(2).all(|w| w[0] < w[1])
    }

    /// How the set's keys are encoded; empty if unknown.
    pub fn key_format(&self) -> &str {
        &self.key_format
    }

    /// Records how the set's keys are encoded.
    pub fn set_key_format(&mut self, format: String) {
        self.needs_base |= format != self.key_format;
        self.key_format = format;
    }
}

/// Path of the state file inside a state directory (the service watches
/// it to pick up updates).
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// SHA-256 of a serialized filter: what client and server compare after a
/// sync.
pub fn filter_digest(serialized: &[u8]) -> [u8; 32] {
    Sha256::digest(serialized).into()
}

fn random_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut id);
    id
}

/// Builds a filter for `tags` at the configured load. Cuckoo insertion can
/// fail near capacity with tiny probability; then retry slightly larger.
fn build_filter(tags: &[Tag], config: &FilterConfig) -> Result<CuckooFilter, Error> {
    let mut load = config.build_load;
    for _ in 0..8 {
        let params = CuckooFilterParams::for_capacity(
            tags.len() as u64,
            config.fpr_log2,
            config.bucket_size,
            load,
        )?;
        let mut filter = CuckooFilter::new(params, rand::rngs::OsRng.next_u64())?;
        if tags.iter().all(|t| filter.insert(t).is_ok()) {
            return Ok(filter);
        }
        load *= 0.97;
    }
    Err(Error::Config(
        "could not build the filter; lower the build load".into(),
    ))
}

/// A state file's error, naming the file.
fn in_file(path: &Path, e: Error) -> Error {
    let why = match e {
        Error::StateFile(why) => why,
        other => other.to_string(),
    };
    Error::StateFile(format!("{}: {why}", path.display()))
}

/// The files a state's base and changes are in, for a watcher.
#[cfg(feature = "net")]
pub fn state_files(dir: &Path) -> Vec<PathBuf> {
    let base = state_path(dir);
    changelog::files(&base).unwrap_or_else(|_| vec![base])
}

mod changes;
mod sorted;
#[cfg(test)]
mod tests;
