//! The filter client's network driver: runs the core's sync and query
//! messages ([`super::cache`]) over a [`Channel`].

use std::time::Duration;
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
use std::time::Instant;

// A browser has no `std::time::Instant` (it panics there).
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use web_time::Instant;

use psikit_transport::Channel;

use super::cache::{ClientCache, SyncOutcome};
use super::messages::{QueryResponse, SyncHeader, SyncMode, KIND_SYNC_BODY, PROTOCOL_ID};
use super::tag::Tag;
use crate::common::Progress;
use crate::error::Error;

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
    /// Items answered from the client's tag cache, without the server.
    pub cached: u64,
}

impl ClientCache {
    /// Brings `cache` up to date (creating it if `None`). A delta that does
    /// not reproduce the server's digest is discarded and the full filter is
    /// fetched instead. `max_filter_bytes` bounds what the server may make
    /// the client download and hold. A download is a stage of `progress`
    /// counting bytes.
    pub async fn sync(
        cache: &mut Option<ClientCache>,
        ch: &mut Channel,
        max_filter_bytes: u64,
        progress: &dyn Progress,
    ) -> Result<SyncOutcome, Error> {
        match sync_once(cache, ch, max_filter_bytes, progress).await {
            Err(Error::DigestMismatch) if cache.is_some() => {
                *cache = None;
                sync_once(cache, ch, max_filter_bytes, progress).await
            }
            other => other,
        }
    }

    /// Runs the online phase for `items`: blinds each afresh, has the server
    /// evaluate them (in requests of at most the server's limit), unblinds
    /// and looks the tags up in the cached filter.
    pub async fn query(&self, ch: &mut Channel, items: &[Vec<u8>]) -> Result<QueryOutcome, Error> {
        let mut out = QueryOutcome::default();
        let tags = self.query_tags_over(ch, items, &mut out).await?;
        out.matches = self.matches(&tags);
        Ok(out)
    }

    /// The tags of `items` from the server, in requests of at most its
    /// limit; times and bytes are added to `out`.
    pub async fn query_tags_over(
        &self,
        ch: &mut Channel,
        items: &[Vec<u8>],
        out: &mut QueryOutcome,
    ) -> Result<Vec<Tag>, Error> {
        let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
        let mut tags = Vec::with_capacity(items.len());
        for chunk in items.chunks(self.max_query_items()) {
            let t = Instant::now();
            let (request, pending) = self.query_request(chunk)?;
            out.blind_time += t.elapsed();

            let t = Instant::now();
            ch.send_msg(&request).await?;
            let response = ch.recv_msg::<QueryResponse>(chunk.len()).await?;
            out.round_trip_time += t.elapsed();

            let t = Instant::now();
            tags.extend(self.query_tags(chunk, pending, &response)?);
            out.finalize_time += t.elapsed();
        }
        out.bytes_sent += ch.bytes_sent() - sent0;
        out.bytes_received += ch.bytes_received() - recv0;
        Ok(tags)
    }
}

/// One sync round trip: request, header, and the body if one follows.
async fn sync_once(
    cache: &mut Option<ClientCache>,
    ch: &mut Channel,
    max_filter_bytes: u64,
    progress: &dyn Progress,
) -> Result<SyncOutcome, Error> {
    ch.send_msg(&ClientCache::sync_request(cache.as_ref()))
        .await?;
    let header = ch.recv_msg::<SyncHeader>(()).await?;
    let stage = match header.mode {
        SyncMode::UpToDate => None,
        SyncMode::Full => Some("downloading the filter"),
        SyncMode::Delta => Some("downloading the filter's changes"),
    };
    let body = match stage {
        None => None,
        Some(stage) => {
            let mut report = |received, total| match received {
                0 => progress.stage(stage, Some(total)),
                _ => progress.advance(received),
            };
            let body = ch.recv_chunked_reporting(
                PROTOCOL_ID,
                KIND_SYNC_BODY,
                max_filter_bytes,
                &mut report,
            );
            Some(body.await?)
        }
    };
    ClientCache::apply_sync(cache, &header, body.as_deref())
}
