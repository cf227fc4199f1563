//! A state's updates as change files (`filter.state.N`, see
//! [`crate::common::changelog`]): what an update writes, how a load
//! replays it, and how a running server follows new ones.

use std::path::Path;

use psikit_primitives::oprf::ServerKey;
use psikit_transport::{Reader, Writer};

use super::sorted::{fits, read_tags, replace_fitting, write_tags};
use super::{in_file, state_path, ServerState, Tag};
use crate::error::Error;
use crate::filter_psi::messages::DeltaBody;

impl ServerState {
    /// A change file's body for the update that made the current epoch:
    /// its removed and added tags, and the filter slots it wrote with
    /// their new contents (as a delta to clients).
    pub(super) fn encode_change(&self, removed: &[Tag], added: &[Tag], slots: &[u64]) -> Vec<u8> {
        let delta = DeltaBody {
            slots: slots.to_vec(),
            packed: self.filter.export_slots(slots),
        }
        .encode();
        let mut w = Writer::with_capacity(16 * (removed.len() + added.len()) + delta.len() + 64);
        w.u64(self.version.epoch).bytes(&self.version.filter_id);
        write_tags(&mut w, removed);
        write_tags(&mut w, added);
        w.u64(delta.len() as u64).bytes(&delta);
        w.into_bytes()
    }

    /// Replays a change file written by [`Self::encode_change`] on the
    /// state it followed. Everything is checked before the state changes,
    /// so a change that does not fit is an error, never a corrupt filter.
    pub(crate) fn apply_change(&mut self, body: &[u8]) -> Result<(), Error> {
        let mut r = Reader::new(body);
        let epoch = r.u64("epoch")?;
        let filter_id: [u8; 16] = r.array("filter id")?;
        if filter_id != self.version.filter_id || Some(epoch) != self.version.epoch.checked_add(1) {
            return Err(Error::StateFile(format!(
                "a change for epoch {epoch} follows epoch {}",
                self.version.epoch
            )));
        }
        let removed = read_tags(&mut r, "removed tags")?;
        let added = read_tags(&mut r, "added tags")?;
        let delta_len = usize::try_from(r.u64("delta length")?)
            .map_err(|_| Error::StateFile("delta length overflows".into()))?;
        let delta = DeltaBody::decode(r.bytes(delta_len, "delta")?, self.filter.capacity_slots())?;
        r.finish()?;
        if !fits(&self.tags, &removed, &added) {
            return Err(Error::StateFile(
                "a change removes tags the state lacks or adds tags it holds".into(),
            ));
        }
        self.filter.import_slots(&delta.slots, &delta.packed)?;
        replace_fitting(&mut self.tags, &removed, &added);
        self.version.epoch = epoch;
        self.push_history(delta.slots);
        Ok(())
    }

    /// This state with the changes saved in `dir` since it was loaded from
    /// there, without reading the base again: how a server follows
    /// updates. `None` when the base was written again (or this state did
    /// not come from `dir`): then [`Self::load`] it whole.
    pub fn refreshed(&self, dir: &Path) -> Result<Option<Self>, Error> {
        let path = state_path(dir);
        let Some(log) = self.log.as_ref().filter(|l| l.base() == path) else {
            return Ok(None);
        };
        if !self.unsaved.is_empty() {
            return Ok(None);
        }
        let Some((log, changes)) = log.read_more()? else {
            return Ok(None);
        };
        let key = zeroize::Zeroizing::new(self.key.to_bytes());
        let mut next = Self {
            key: ServerKey::from_bytes(&key[..])?,
            config: self.config,
            version: self.version,
            tags: self.tags.clone(),
            filter: self.filter.clone(),
            history: self.history.clone(),
            key_format: self.key_format.clone(),
            log: Some(log),
            unsaved: Vec::new(),
            needs_base: false,
        };
        for change in changes {
            next.apply_change(&change).map_err(|e| in_file(&path, e))?;
        }
        Ok(Some(next))
    }
}
