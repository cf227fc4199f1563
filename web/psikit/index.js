// psikit's filter-protocol client for web pages.
//
// Everything the protocol computes (reading and normalising the contacts
// as the CLI does, the RFC 9497 OPRF, the filter, its deltas and their
// digests) runs in psikit's Rust client, compiled to WebAssembly
// (./pkg, built by scripts/build-web.sh). This file only carries the
// client's bytes over a WebSocket to `psikit serve --ws-listen` and keeps
// the filter in IndexedDB (./store.js) so a returning visitor downloads
// only what changed.

import init, { Client, Items, selfTest } from "./pkg/psikit_wasm.js";
import { FilterStore } from "./store.js";

export { Items, FilterStore, selfTest };

/** Largest WebSocket message sent. psikit's frames delimit themselves,
 * so a request may be split anyhow; this keeps each message far below
 * any server's limit. */
const MESSAGE_BYTES = 1 << 20;

let loaded = null;

/** Loads the WebAssembly module once and runs its OPRF self-test (RFC
 * 9497's vectors) before anything trusts it; `moduleUrl` defaults to the
 * file next to the glue (`pkg/psikit_wasm_bg.wasm`). */
export function load(moduleUrl) {
  loaded ??= init(moduleUrl === undefined ? undefined : { module_or_path: moduleUrl }).then(() =>
    selfTest(),
  );
  return loaded;
}

/** An error for people: what went wrong, in one line. */
export class PsikitError extends Error {
  constructor(message) {
    super(message);
    this.name = "PsikitError";
  }
}

/**
 * Asks the filter server at `url` (`ws://` or `wss://`) which of `items`
 * it holds. Syncs the filter first (a full download on a first visit, a
 * delta or nothing afterwards), then sends the items blinded: the server
 * learns only how many there are.
 *
 * @param {string} url
 * @param {Items} items
 * @param {{store?: FilterStore|null, maxFilterMib?: number,
 *          onProgress?: (p: {sent: number, received: number,
 *                            downloaded: number, downloadTotal: number}) => void}} options
 */
export async function check(url, items, options = {}) {
  await load();
  const { store = null, maxFilterMib = 512, onProgress = () => {} } = options;
  const saved = store ? await store.get(url) : undefined;
  const client = new Client(saved, maxFilterMib);
  try {
    const query = client.query(items);
    const traffic = await exchange(url, query, onProgress);
    let result;
    try {
      result = query.result();
    } catch (e) {
      throw new PsikitError(`${url}: ${e.message}`);
    } finally {
      query.free();
    }
    if (store && result.filterChanged) {
      await store.put(url, client.saved());
    }
    const answer = {
      matches: result.matches(),
      syncKind: result.syncKind,
      epoch: result.epoch,
      filterBytes: result.filterBytes,
      bytesSent: traffic.sent,
      bytesReceived: traffic.received,
      discarded: client.discarded ?? null,
      blindMs: result.blindMs,
      finalizeMs: result.finalizeMs,
      roundTripMs: result.roundTripMs,
    };
    result.free();
    return answer;
  } finally {
    client.free();
  }
}

/** Runs `query` over one WebSocket to `url`: resolves with the bytes sent
 * and received once the client is done (its result may still be an
 * error the server sent), rejects when the server cannot be reached or
 * hangs up mid-query. */
function exchange(url, query, onProgress) {
  return new Promise((resolve, reject) => {
    let ws;
    try {
      ws = new WebSocket(url);
    } catch (e) {
      reject(new PsikitError(`not a WebSocket address: ${url}`));
      return;
    }
    ws.binaryType = "arraybuffer";
    const traffic = { sent: 0, received: 0 };
    let opened = false;
    let finished = false;
    const finish = (error) => {
      if (finished) return;
      finished = true;
      ws.close();
      if (error) reject(error);
      else resolve(traffic);
    };
    const step = () => {
      let done;
      try {
        done = query.advance();
      } catch (e) {
        finish(new PsikitError(e.message));
        return;
      }
      const out = query.takeOutgoing();
      for (let at = 0; at < out.length && !finished; at += MESSAGE_BYTES) {
        const part = out.subarray(at, at + MESSAGE_BYTES);
        ws.send(part);
        traffic.sent += part.length;
      }
      if (done) finish();
    };
    ws.onopen = () => {
      opened = true;
      step();
    };
    ws.onmessage = (event) => {
      const bytes = new Uint8Array(event.data);
      traffic.received += bytes.length;
      query.push(bytes);
      step();
      onProgress({ ...traffic, downloaded: query.downloaded, downloadTotal: query.downloadTotal });
    };
    ws.onclose = () => {
      if (finished) return;
      if (!opened) {
        finish(new PsikitError(`cannot reach the server at ${url} (refused, down, or this page's origin is not allowed)`));
        return;
      }
      // The server may have said why before closing: let the client read it.
      query.peerClosed();
      step();
      finish(new PsikitError(`the server at ${url} closed the connection mid-query`));
    };
  });
}
