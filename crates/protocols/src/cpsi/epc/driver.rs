//! EPC over a channel, pipelined: the sender streams its batches in
//! groups, each group encrypted in parallel; the receiver evaluates each
//! group as it arrives and replies; the sender reads a group's replies
//! after sending the next group, so both parties work at once and at most
//! one group of replies (a few hundred KB) waits in the socket.

use psikit_transport::Channel;
use rayon::prelude::*;

use super::batch::batch_index;
use super::messages::{EpcPublicKey, EpcReply, EpcSenderBatch};
use super::params::EpcParams;
use super::receiver::EpcReceiver;
use super::sender::EpcSender;
use crate::error::Error;

/// Batches per group: enough to keep every core busy.
const GROUP: usize = 8;

/// The sender's side on its `tags` (each below `2^ℓ`): returns `r`.
pub async fn send(ch: &mut Channel, params: &EpcParams, tags: &[u128]) -> Result<Vec<u32>, Error> {
    let (sender, key) = EpcSender::new(params)?;
    ch.send_msg(&key).await?;
    let m = tags.len();
    let batches: Vec<usize> = (0..params.batches(m)).collect();
    let mut out = Vec::with_capacity(m);
    let mut pending: Option<&[usize]> = None;
    for group in batches.chunks(GROUP).map(Some).chain([None]) {
        if let Some(group) = group {
            let encrypted = group
                .par_iter()
                .map(|&k| sender.encrypt_batch(batch_index(k)?, &tags[params.batch_range(k, m)]))
                .collect::<Result<Vec<EpcSenderBatch>, Error>>()?;
            for batch in &encrypted {
                ch.send_msg(batch).await?;
            }
        }
        if let Some(previous) = pending.take() {
            let mut replies = Vec::with_capacity(previous.len());
            for _ in previous {
                replies.push(ch.recv_msg::<EpcReply>(params).await?);
            }
            let parts = previous
                .par_iter()
                .zip(&replies)
                .map(|(&k, reply)| {
                    sender.decrypt_reply(batch_index(k)?, reply, params.batch_range(k, m).len())
                })
                .collect::<Result<Vec<_>, Error>>()?;
            out.extend(parts.into_iter().flatten());
        }
        pending = group;
    }
    Ok(out)
}

/// The receiver's side on its `tags`: returns `r*`.
pub async fn receive(
    ch: &mut Channel,
    params: &EpcParams,
    tags: &[u128],
) -> Result<Vec<u32>, Error> {
    let key: EpcPublicKey = ch.recv_msg(params).await?;
    let receiver = EpcReceiver::new(params, &key)?;
    let m = tags.len();
    let batches: Vec<usize> = (0..params.batches(m)).collect();
    let mut out = Vec::with_capacity(m);
    for group in batches.chunks(GROUP) {
        let mut received = Vec::with_capacity(group.len());
        for _ in group {
            received.push(ch.recv_msg::<EpcSenderBatch>(params).await?);
        }
        let evaluated = group
            .par_iter()
            .zip(&received)
            .map(|(&k, batch)| {
                receiver.evaluate_batch(batch_index(k)?, batch, &tags[params.batch_range(k, m)])
            })
            .collect::<Result<Vec<_>, Error>>()?;
        for (reply, r_star) in evaluated {
            ch.send_msg(&reply).await?;
            out.extend(r_star);
        }
    }
    Ok(out)
}
