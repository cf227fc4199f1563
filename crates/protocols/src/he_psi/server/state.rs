//! The HE server's state directory: its own OPRF key and the sender
//! database, or, for one shard of a sharded database, the shard's part of
//! it and no key (`shard/manifest.rs`).
//!
//! * `oprf.key`: the secret OPRF key, mode 0600, refused if others can read
//!   it. The HE database never shares its key with the filter protocol: the
//!   filter publishes (hashes of) OPRF outputs, which would give filter
//!   clients the item values of this database.
//! * `shard.json` in a shard's directory instead of the key.
//! * `he.db`: the database (`db_file.rs`), replaced atomically.

use std::path::{Path, PathBuf};

use psikit_primitives::oprf::{Output, ServerKey};
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};

use crate::common::oprf_stage;
use crate::error::Error;
use crate::he_psi::params::PsiParams;
use crate::he_psi::server::db_file;
use crate::he_psi::server::sender::Sender;
use crate::he_psi::server::sender_db::{DbEntry, DbMemory, SenderDb, UpdateStats};
use crate::he_psi::server::shard_info::{ShardInfo, SHARD_FILE};
use crate::keyfile;

/// The OPRF key's file in a database's (or a sharded one's router's)
/// directory.
pub const KEY_FILE: &str = "oprf.key";
const DB_FILE: &str = "he.db";

/// The state directory's files: the key is written before the database.
pub(crate) const LAYOUT: crate::common::state_dir::Layout = crate::common::state_dir::Layout {
    main: DB_FILE,
    before: &[KEY_FILE],
};

/// One row to insert: the item's key bytes and its label.
pub struct Row {
    pub key: Vec<u8>,
    pub label: Vec<u8>,
}

/// An OPRF key (or, for a shard, its description) and a sender database
/// ready for queries.
pub struct HeState {
    holder: Holder,
    sender: Sender,
    db_id: [u8; 32],
}

/// What a state holds besides its database.
enum Holder {
    /// A whole database: it evaluates the OPRF itself.
    Key(ServerKey),
    /// One shard: the router evaluates the OPRF.
    Shard(ShardInfo),
}

/// Path of the database file in a state directory (watched for reloads).
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}

impl HeState {
    /// A new, empty database with a fresh OPRF key; nothing is written
    /// until [`HeState::save`].
    pub fn create(params: PsiParams, max_label_bytes: usize, cache: bool) -> Result<Self, Error> {
        let key = ServerKey::generate(&mut OsRng);
        let db = SenderDb::new(params, max_label_bytes)?;
        Self::assemble(key, db, cache)
    }

    /// The router of a sharded database: its OPRF key (read from `dir`)
    /// and an empty database with the shards' parameters, which gives the
    /// database id and the query's shape.
    pub fn load_router(
        dir: &Path,
        params: PsiParams,
        max_label_bytes: usize,
    ) -> Result<Self, Error> {
        let key = oprf_stage::load_key(&dir.join(KEY_FILE))?;
        Self::assemble(key, SenderDb::new(params, max_label_bytes)?, false)
    }

    /// An empty shard of the database `db_id` with these parameters.
    pub fn create_shard(
        params: PsiParams,
        max_label_bytes: usize,
        info: ShardInfo,
    ) -> Result<Self, Error> {
        let db = SenderDb::new(params, max_label_bytes)?;
        Self::assemble_shard(info, db, false)
    }

    /// Loads a state directory: a whole database, or a shard when the
    /// directory has a `shard.json` and no key. With `cache`, every
    /// plaintext is encoded up front (faster queries, more memory).
    pub fn load(dir: &Path, cache: bool) -> Result<Self, Error> {
        let key_path = dir.join(KEY_FILE);
        if !key_path.exists() && dir.join(SHARD_FILE).exists() {
            let info = ShardInfo::load(dir)?;
            return Self::assemble_shard(info, db_file::load(&db_path(dir))?, cache);
        }
        let key_bytes = keyfile::read_secret(&key_path)?;
        let key = ServerKey::from_bytes(&key_bytes)?;
        let db = db_file::load(&db_path(dir))?;
        Self::assemble(key, db, cache)
    }

    fn assemble(key: ServerKey, db: SenderDb, cache: bool) -> Result<Self, Error> {
        let db_id = database_id(&key, db.params(), db.shape().max_label_bytes);
        let sender = Sender::new(db, cache)?;
        Ok(Self {
            holder: Holder::Key(key),
            sender,
            db_id,
        })
    }

    fn assemble_shard(info: ShardInfo, db: SenderDb, cache: bool) -> Result<Self, Error> {
        let db_id = info.db_id()?;
        let sender = Sender::new(db, cache)?;
        Ok(Self {
            holder: Holder::Shard(info),
            sender,
            db_id,
        })
    }

    /// Writes the key (if the directory has none; a different key there is
    /// an error), or a shard's description, and the database.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let key = match &self.holder {
            Holder::Key(key) => key,
            Holder::Shard(info) => {
                // Before the database, whose change a server watches: a
                // reload then finds the new epoch.
                info.save(dir)?;
                return db_file::save(self.sender.db(), &db_path(dir));
            }
        };
        keyfile::write_or_match(&dir.join(KEY_FILE), &key.to_bytes())?;
        db_file::save(self.sender.db(), &db_path(dir))
    }

    /// Saves the OPRF key alone into `dir`, which must hold none: a new
    /// sharded database's router (its manifest comes once the shards are
    /// built).
    pub fn save_key(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        keyfile::write_secret(&dir.join(KEY_FILE), &self.key()?.to_bytes())
    }

    /// The OPRF key; a shard has none (its router evaluates the OPRF).
    pub fn key(&self) -> Result<&ServerKey, Error> {
        match &self.holder {
            Holder::Key(key) => Ok(key),
            Holder::Shard(info) => Err(Error::Config(format!(
                "this database is shard {} of {}: it holds no OPRF key; items go through the \
                 shards' router",
                info.index, info.shards
            ))),
        }
    }

    /// The shard's description, for a shard.
    pub fn shard(&self) -> Option<&ShardInfo> {
        match &self.holder {
            Holder::Key(_) => None,
            Holder::Shard(info) => Some(info),
        }
    }

    /// The database made ready for queries (the service answers with it).
    pub(crate) fn sender(&self) -> &Sender {
        &self.sender
    }

    pub(crate) fn db(&self) -> &SenderDb {
        self.sender.db()
    }

    /// Distinct items the database holds.
    pub fn items(&self) -> usize {
        self.db().len()
    }

    /// The label columns' names (empty if not recorded).
    pub fn label_columns(&self) -> &[String] {
        self.db().label_columns()
    }

    /// The longest label the database takes (0: unlabeled), fixed when it
    /// was built.
    pub fn max_label_bytes(&self) -> usize {
        self.db().shape().max_label_bytes
    }

    /// The database's parameters.
    pub fn params(&self) -> &PsiParams {
        self.db().params()
    }

    /// Bin bundles per bundle index (every client is told them).
    pub fn bundle_counts(&self) -> Vec<usize> {
        self.db().bundle_counts()
    }

    /// Memory the database holds: its arrays and the plaintext cache.
    pub fn memory(&self) -> DbMemory {
        self.db().memory()
    }

    /// Public identifier of this database's parameters and OPRF key: a
    /// client's query names it, so a query prepared for another database
    /// (or before a key change) is refused instead of silently matching
    /// nothing.
    pub fn db_id(&self) -> [u8; 32] {
        self.db_id
    }

    /// Inserts rows, or gives present items their new label. `progress` is
    /// called with the rows evaluated so far; an error it returns ends the
    /// insertion before the database changes.
    pub fn insert(
        &mut self,
        rows: &[Row],
        progress: &mut dyn FnMut(usize) -> Result<(), Error>,
    ) -> Result<UpdateStats, Error> {
        let outputs = self.evaluate(rows.iter().map(|r| r.key.as_slice()), progress)?;
        let labels: Vec<&[u8]> = rows.iter().map(|r| r.label.as_slice()).collect();
        self.insert_evaluated(&outputs, &labels)
    }

    /// [`HeState::insert`] for items whose OPRF outputs under this state's
    /// key ([`HeState::evaluate`]) are already known.
    pub fn insert_evaluated(
        &mut self,
        outputs: &[Output],
        labels: &[&[u8]],
    ) -> Result<UpdateStats, Error> {
        let entries: Vec<DbEntry> = outputs
            .iter()
            .zip(labels)
            .map(|(o, l)| DbEntry { oprf: *o, label: l })
            .collect();
        self.sender.update(|db| db.insert_or_assign(&entries))
    }

    /// Records how the database's keys are encoded
    /// (`psikit_io::KeySpec::key_format`) and its label columns' names
    /// (`psikit_io::KeySpec::label_names`); clients are told both.
    pub fn set_schema(&mut self, format: String, labels: Vec<String>) -> Result<(), Error> {
        self.sender.update(|db| {
            db.set_key_format(format);
            db.set_label_columns(labels);
            Ok(())
        })
    }

    /// Removes the items with these keys.
    pub fn remove(&mut self, keys: &[Vec<u8>]) -> Result<UpdateStats, Error> {
        let outputs = self.evaluate(keys.iter().map(Vec::as_slice), &mut |_| Ok(()))?;
        self.remove_evaluated(&outputs)
    }

    /// [`HeState::remove`] for items whose OPRF outputs are already known.
    pub fn remove_evaluated(&mut self, outputs: &[Output]) -> Result<UpdateStats, Error> {
        self.sender.update(|db| Ok(db.remove(outputs)))
    }

    /// Moves a shard to `epoch` (saved with it): the router then asks for
    /// the update by that number.
    pub fn set_shard_epoch(&mut self, epoch: u64) -> Result<(), Error> {
        match &mut self.holder {
            Holder::Shard(info) => {
                info.epoch = epoch;
                Ok(())
            }
            Holder::Key(_) => Err(Error::Misuse("an epoch is a shard's")),
        }
    }

    /// The OPRF outputs of `keys` (see [`oprf_stage::evaluate`]).
    pub fn evaluate<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        progress: &mut dyn FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<Output>, Error> {
        let keys: Vec<&[u8]> = keys.collect();
        oprf_stage::evaluate(self.key()?, &keys, progress)
    }
}

/// SHA-256 over a domain tag, the parameters, the label length and a hash
/// of the OPRF key (one-way, so the id reveals nothing about the key). The
/// shards of a database share it: they share all three.
pub(crate) fn database_id(key: &ServerKey, params: &PsiParams, max_label_bytes: usize) -> [u8; 32] {
    let key_hash = Sha256::new()
        .chain_update(b"psikit he oprf key")
        .chain_update(key.to_bytes())
        .finalize();
    Sha256::new()
        .chain_update(b"psikit he database v1")
        .chain_update(params.to_apsi_json().as_bytes())
        .chain_update((max_label_bytes as u64).to_le_bytes())
        .chain_update(key_hash)
        .finalize()
        .into()
}
