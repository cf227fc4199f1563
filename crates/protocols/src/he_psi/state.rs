//! The HE server's state directory: its own OPRF key and the sender
//! database.
//!
//! * `oprf.key`: the secret OPRF key, mode 0600, refused if others can read
//!   it. The HE database never shares its key with the filter protocol: the
//!   filter publishes (hashes of) OPRF outputs, which would give filter
//!   clients the item values of this database.
//! * `he.db`: the database ([`super::db_file`]), replaced atomically.

use std::path::{Path, PathBuf};

use psikit_primitives::oprf::{Output, ServerKey};
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};

use super::db_file;
use super::params::PsiParams;
use super::sender::Sender;
use super::sender_db::{DbEntry, SenderDb, UpdateStats};
use crate::{keyfile, Error};

const KEY_FILE: &str = "oprf.key";
const DB_FILE: &str = "he.db";

/// The state directory's files: the key is written before the database.
pub(crate) const LAYOUT: crate::common::state_dir::Layout = crate::common::state_dir::Layout {
    main: DB_FILE,
    before: &[KEY_FILE],
};
/// Items per OPRF batch: enough to keep both cores busy between progress
/// reports (the OPRF's chunks are at most 256 items), few enough that a
/// cancelled build stops within a fraction of a second.
const OPRF_BATCH: usize = 1 << 13;

/// One row to insert: the item's key bytes and its label.
pub struct Row {
    pub key: Vec<u8>,
    pub label: Vec<u8>,
}

/// An OPRF key and a sender database ready for queries.
pub struct HeState {
    key: ServerKey,
    sender: Sender,
    db_id: [u8; 32],
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

    /// Loads a state directory. With `cache`, every plaintext is encoded
    /// up front (faster queries, more memory).
    pub fn load(dir: &Path, cache: bool) -> Result<Self, Error> {
        let key_bytes = keyfile::read_secret(&dir.join(KEY_FILE))?;
        let key = ServerKey::from_bytes(&key_bytes)?;
        let db = db_file::load(&db_path(dir))?;
        Self::assemble(key, db, cache)
    }

    fn assemble(key: ServerKey, db: SenderDb, cache: bool) -> Result<Self, Error> {
        let db_id = database_id(&key, &db);
        let sender = Sender::new(db, cache)?;
        Ok(Self { key, sender, db_id })
    }

    /// Writes the key (if the directory has none; a different key there is
    /// an error) and the database.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let key_path = dir.join(KEY_FILE);
        if key_path.exists() {
            // A database is useless under another key: every OPRF output
            // would differ. Refuse rather than pair them.
            let existing = keyfile::read_secret(&key_path)?;
            if existing.as_slice() != self.key.to_bytes().as_slice() {
                return Err(Error::StateFile(format!(
                    "{} holds the OPRF key of another database; use an empty directory",
                    dir.display()
                )));
            }
        } else {
            keyfile::write_secret(&key_path, &self.key.to_bytes())?;
        }
        db_file::save(self.sender.db(), &db_path(dir))
    }

    pub fn key(&self) -> &ServerKey {
        &self.key
    }

    pub fn sender(&self) -> &Sender {
        &self.sender
    }

    pub fn db(&self) -> &SenderDb {
        self.sender.db()
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

    /// Removes the items with these keys.
    /// Records how the database's keys are encoded
    /// (`psikit_io::KeySpec::key_format`); clients are told it.
    pub fn set_key_format(&mut self, format: String) -> Result<(), Error> {
        self.sender.update(|db| {
            db.set_key_format(format);
            Ok(())
        })
    }

    pub fn remove(&mut self, keys: &[Vec<u8>]) -> Result<UpdateStats, Error> {
        let outputs = self.evaluate(keys.iter().map(Vec::as_slice), &mut |_| Ok(()))?;
        self.sender.update(|db| Ok(db.remove(&outputs)))
    }

    /// The OPRF outputs of `keys`, in batches over both cores; `progress`
    /// is called with the number done after each batch, and an error it
    /// returns (a cancelled job) ends the evaluation.
    pub fn evaluate<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        progress: &mut dyn FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<Output>, Error> {
        let keys: Vec<&[u8]> = keys.collect();
        let mut outputs = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(OPRF_BATCH) {
            outputs.extend(self.key.evaluate_batch(chunk)?);
            progress(outputs.len())?;
        }
        Ok(outputs)
    }
}

/// SHA-256 over a domain tag, the parameters, the label length and a hash
/// of the OPRF key (one-way, so the id reveals nothing about the key).
fn database_id(key: &ServerKey, db: &SenderDb) -> [u8; 32] {
    let key_hash = Sha256::new()
        .chain_update(b"psikit he oprf key")
        .chain_update(key.to_bytes())
        .finalize();
    Sha256::new()
        .chain_update(b"psikit he database v1")
        .chain_update(db.params().to_apsi_json().as_bytes())
        .chain_update((db.shape().max_label_bytes as u64).to_le_bytes())
        .chain_update(key_hash)
        .finalize()
        .into()
}
