// Types of psikit's browser client (index.js). `Items` comes from the
// WebAssembly module's generated types (pkg/psikit_wasm.d.ts).

import type { Items } from "./pkg/psikit_wasm.js";

export { Items };

/** Loads the WebAssembly module once (default: next to the glue) and
 * runs its OPRF self-test; rejects if the module computes it wrongly. */
export function load(moduleUrl?: string | URL): Promise<void>;

/** RFC 9497's vectors through the client's blind and finalize; throws if
 * they do not come out. `load` runs it. */
export function selfTest(): void;

/** An error for people: what went wrong, in one line. */
export class PsikitError extends Error {}

/** Each server's filter between visits, in IndexedDB. */
export class FilterStore {
  constructor(name?: string);
  get(server: string): Promise<Uint8Array | undefined>;
  put(server: string, bytes: Uint8Array): Promise<unknown>;
  delete(server: string): Promise<unknown>;
}

export interface CheckOptions {
  /** Where the filter is kept between visits; none: downloaded each time. */
  store?: FilterStore | null;
  /** Most MiB of filter the server may make the page download and hold. */
  maxFilterMib?: number;
  /** Called as bytes arrive (the first download can take a while):
   * all bytes sent and received, and the filter's download (bytes of
   * its total; 0 of 0 when there is nothing to download). */
  onProgress?: (progress: {
    sent: number;
    received: number;
    downloaded: number;
    downloadTotal: number;
  }) => void;
}

export interface CheckResult {
  /** `matches[i]` is 1 if the server holds item `i` (up to a 2^-30 false
   * positive rate per item by default), else 0. */
  matches: Uint8Array;
  /** How the filter was brought up to date. */
  syncKind: "full" | "delta" | "up-to-date";
  /** The filter's epoch after the sync. */
  epoch: number;
  /** Bytes of filter data downloaded (full filter or delta). */
  filterBytes: number;
  /** All bytes sent to and received from the server. */
  bytesSent: number;
  bytesReceived: number;
  /** Why the stored filter could not be used, if it was damaged. */
  discarded: string | null;
  /** The client's own OPRF work, and the wait for the server's answers. */
  blindMs: number;
  finalizeMs: number;
  roundTripMs: number;
}

/** Asks the filter server at `url` (ws:// or wss://) which of `items` it
 * holds; the server learns only how many items were asked. */
export function check(url: string, items: Items, options?: CheckOptions): Promise<CheckResult>;
