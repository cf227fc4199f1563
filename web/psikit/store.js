// Where a page keeps each server's filter between visits: IndexedDB, one
// record per server address. The bytes are psikit's own filter file
// (version, epoch, SHA-256 digest); the client checks them when it loads
// them, so a damaged record only costs a fresh download.

const STORE = "filters";

export class FilterStore {
  /** A store in the IndexedDB database `name` of this page's origin. */
  constructor(name = "psikit") {
    this.name = name;
    this.db = null;
  }

  open() {
    this.db ??= new Promise((resolve, reject) => {
      const request = indexedDB.open(this.name, 1);
      request.onupgradeneeded = () => request.result.createObjectStore(STORE);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    return this.db;
  }

  async run(mode, act) {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const request = act(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(request.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  }

  /** The filter saved for `server`, or `undefined`. */
  get(server) {
    return this.run("readonly", (s) => s.get(server));
  }

  /** Saves `bytes` (a `Uint8Array`) as the filter of `server`. */
  put(server, bytes) {
    return this.run("readwrite", (s) => s.put(bytes, server));
  }

  /** Forgets the filter of `server`. */
  delete(server) {
    return this.run("readwrite", (s) => s.delete(server));
  }
}
