//! Client side of the filter protocol: keeps a cached copy of the server's
//! filter current, and runs queries against it.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use psikit_primitives::oprf;
use psikit_structures::CuckooFilter;
use psikit_transport::{Channel, Reader, Writer};

use super::messages::{
    DeltaBody, FilterVersion, QueryRequest, QueryResponse, SyncHeader, SyncMode, SyncRequest,
    KIND_SYNC_BODY,
};
use super::state::filter_digest;
use super::{tag_from_output, PROTOCOL_ID};
use crate::{Error, Violation};

const CACHE_MAGIC: &[u8; 8] = b"PSIKCCH\0";
const CACHE_VERSION: u8 = 1;

/// How a sync brought the cache up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    UpToDate,
    Full,
    Delta,
}

/// What a sync did.
#[derive(Debug, Clone)]
pub struct SyncOutcome {
    pub kind: SyncKind,
    pub epoch: u64,
    /// Bytes of filter data (full or delta body) received.
    pub body_bytes: u64,
}

/// What a query found and what it cost.
#[derive(Debug, Clone, Default)]
pub struct QueryOutcome {
    /// `matches[i]` says whether item `i` is (up to false positives) in the
    /// server's set.
    pub matches: Vec<bool>,
    pub blind_time: Duration,
    /// Wall time from sending the first request to the last response.
    pub round_trip_time: Duration,
    pub finalize_time: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// The client's copy of the server's filter.
pub struct ClientCache {
    version: FilterVersion,
    digest: [u8; 32],
    max_query_items: u32,
    filter: CuckooFilter,
}

impl ClientCache {
    pub fn epoch(&self) -> u64 {
        self.version.epoch
    }

    pub fn filter(&self) -> &CuckooFilter {
        &self.filter
    }

    /// Brings `cache` up to date (creating it if `None`). A delta that does
    /// not reproduce the server's digest is discarded and the full filter is
    /// fetched instead. `max_filter_bytes` bounds what the server may make
    /// the client download and hold.
    pub async fn sync(
        cache: &mut Option<ClientCache>,
        ch: &mut Channel,
        max_filter_bytes: u64,
    ) -> Result<SyncOutcome, Error> {
        match Self::sync_once(cache, ch, max_filter_bytes).await {
            Err(Error::DigestMismatch) if cache.is_some() => {
                *cache = None;
                Self::sync_once(cache, ch, max_filter_bytes).await
            }
            other => other,
        }
    }

    async fn sync_once(
        cache: &mut Option<ClientCache>,
        ch: &mut Channel,
        max_filter_bytes: u64,
    ) -> Result<SyncOutcome, Error> {
        let have = cache.as_ref().map(|c| c.version);
        ch.send_msg(&SyncRequest { have }).await?;
        let header = ch.recv_msg::<SyncHeader>(()).await?;
        let mut outcome = SyncOutcome {
            kind: SyncKind::UpToDate,
            epoch: header.version.epoch,
            body_bytes: 0,
        };
        match header.mode {
            SyncMode::UpToDate => {
                let c = cache
                    .as_mut()
                    .filter(|c| c.version == header.version)
                    .ok_or_else(|| {
                        Violation::Settings("server says up to date for another filter".into())
                    })?;
                c.max_query_items = header.max_query_items;
            }
            SyncMode::Full => {
                let body = ch
                    .recv_chunked(PROTOCOL_ID, KIND_SYNC_BODY, max_filter_bytes)
                    .await?;
                outcome.kind = SyncKind::Full;
                outcome.body_bytes = body.len() as u64;
                if filter_digest(&body) != header.digest {
                    return Err(Error::DigestMismatch);
                }
                let filter = CuckooFilter::from_bytes(&body, body.len())?;
                *cache = Some(ClientCache {
                    version: header.version,
                    digest: header.digest,
                    max_query_items: header.max_query_items,
                    filter,
                });
            }
            SyncMode::Delta => {
                let body = ch
                    .recv_chunked(PROTOCOL_ID, KIND_SYNC_BODY, max_filter_bytes)
                    .await?;
                outcome.kind = SyncKind::Delta;
                outcome.body_bytes = body.len() as u64;
                let c = cache
                    .as_mut()
                    .filter(|c| {
                        c.version.filter_id == header.version.filter_id
                            && c.version.epoch == header.from_epoch
                    })
                    .ok_or_else(|| {
                        Violation::Settings("server sent a delta for another filter".into())
                    })?;
                c.apply_delta(&body, &header)?;
            }
        }
        Ok(outcome)
    }

    fn apply_delta(&mut self, body: &[u8], header: &SyncHeader) -> Result<(), Error> {
        let delta = DeltaBody::decode(body, self.filter.capacity_slots())?;
        self.filter.import_slots(&delta.slots, &delta.packed)?;
        if filter_digest(&self.filter.to_bytes()) != header.digest {
            return Err(Error::DigestMismatch);
        }
        self.version = header.version;
        self.digest = header.digest;
        self.max_query_items = header.max_query_items;
        Ok(())
    }

    /// Runs the online phase for `items`: blinds each afresh, has the server
    /// evaluate them (in requests of at most the server's limit), unblinds
    /// and looks the tags up in the cached filter.
    pub async fn query(&self, ch: &mut Channel, items: &[Vec<u8>]) -> Result<QueryOutcome, Error> {
        let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
        let mut out = QueryOutcome {
            matches: Vec::with_capacity(items.len()),
            ..QueryOutcome::default()
        };
        let batch = self.max_query_items.max(1) as usize;
        for chunk in items.chunks(batch) {
            let inputs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            let t = Instant::now();
            let (blinds, blinded) = oprf::blind_batch(&inputs, &mut rand::rngs::OsRng)?;
            out.blind_time += t.elapsed();

            let t = Instant::now();
            let request = QueryRequest {
                version: self.version,
                blinded,
            };
            ch.send_msg(&request).await?;
            let response = ch.recv_msg::<QueryResponse>(chunk.len()).await?;
            out.round_trip_time += t.elapsed();

            let t = Instant::now();
            let outputs = oprf::finalize_batch(&inputs, &blinds, &response.evaluated)?;
            out.matches.extend(
                outputs
                    .iter()
                    .map(|o| self.filter.contains(&tag_from_output(o))),
            );
            out.finalize_time += t.elapsed();
        }
        out.bytes_sent = ch.bytes_sent() - sent0;
        out.bytes_received = ch.bytes_received() - recv0;
        Ok(out)
    }

    /// Saves the cache atomically to `path`.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let filter = self.filter.to_bytes();
        let mut w = Writer::with_capacity(filter.len() + 128);
        w.bytes(CACHE_MAGIC).u8(CACHE_VERSION);
        w.bytes(&self.version.filter_id)
            .u64(self.version.epoch)
            .bytes(&self.digest)
            .u32(self.max_query_items)
            .u64(filter.len() as u64)
            .bytes(&filter);
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&w.into_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        };
        write().map_err(|e| Error::io(path, e))
    }

    /// Loads a cache saved by [`ClientCache::save`], checking its digest.
    /// A missing file is `Ok(None)`: the next sync downloads the filter.
    pub fn load(path: &Path) -> Result<Option<Self>, Error> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        };
        Self::decode(&bytes).map(Some).map_err(|e| {
            Error::StateFile(format!("{}: {e}; delete it to re-download", path.display()))
        })
    }

    fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        if r.bytes(8, "magic")? != CACHE_MAGIC || r.u8("version")? != CACHE_VERSION {
            return Err(Error::StateFile(
                "not a psikit filter cache of this version".into(),
            ));
        }
        let version = FilterVersion {
            filter_id: r.array("filter id")?,
            epoch: r.u64("epoch")?,
        };
        let digest = r.array("digest")?;
        let max_query_items = r.u32("max query items")?;
        let len = usize::try_from(r.u64("filter length")?)
            .map_err(|_| Error::StateFile("filter length overflows".into()))?;
        let raw = r.bytes(len, "filter")?;
        r.finish()?;
        if filter_digest(raw) != digest {
            return Err(Error::DigestMismatch);
        }
        Ok(Self {
            version,
            digest,
            max_query_items,
            filter: CuckooFilter::from_bytes(raw, len)?,
        })
    }
}
