// Keeps the editor's Yjs document in this browser, in IndexedDB through y-indexeddb, so that what
// someone types while the server cannot be reached outlives the page: opened again later, the
// page brings it back and sends it with everything else on its next connection (the provider
// sends whatever the server lacks, kept changes included, in its sync answers and updates).
//
// One database per user, document and Yjs epoch (`keptName`): another user signed in on the same
// browser opens another database and never sends the first user's changes, and a document whose
// history was replaced is never merged with a state of its former history. Logging out clears
// every database (the server's `Clear-Site-Data: "storage"`, see the logout handler); a page
// that is read-only (`forget`), or whose connection the server refused as read-only (the
// keeper), discards its own.
//
// What the keeper adds to y-indexeddb, for lib/saving.js's rule:
//   - it writes each update itself, in y-indexeddb's format (one record per update; y-indexeddb
//     reads, merges and trims them as its own), because y-indexeddb does not say when a write
//     committed or failed: the page may claim a change kept only once IndexedDB committed it,
//     and a failed write (quota, a database closed under it) stops the keeping;
//   - it records, each time every local change is proven stored, the snapshot (state vector and
//     delete set) of the document the server then holds. A state brought back that equals that
//     snapshot holds nothing the server lacks, so it counts as stored at once, and the page
//     says *offline*, not *kept*, when the server is still away. Anything else brought back
//     (a change made after it, or another tab's kept changes) is proven the usual way.
//
// Where IndexedDB is missing or fails (a private window that refuses it, a full quota), the
// editor works as without it: its changes live in the page, and the indicator says *offline*.

import * as Y from "yjs";
import { IndexeddbPersistence, PREFERRED_TRIM_SIZE, storeState } from "y-indexeddb";

/** The `custom` store's key for the snapshot of the document last proven stored. */
const ACKNOWLEDGED = "acknowledged";

/** The database that keeps `document` (its ID) in Yjs `epoch` for `user` (the user's ID). */
export function keptName(user, document, epoch) {
  return `fermata:${user}:${document}:${epoch}`;
}

/** Deletes what this browser keeps under `name`, if it can. */
export function forget(name, indexedDB = globalThis.indexedDB) {
  try {
    if (indexedDB) indexedDB.deleteDatabase(name);
  } catch {
    // Nothing kept can be reached either.
  }
}

/** How long the recorded snapshot may lag behind others' changes, in milliseconds. */
const RECORD_DELAY = 1000;

export class Keeper {
  /**
   * @param {import("./saving.js").SaveTracker} tracker the tracker of the document to keep,
   *   created before the keeper (so it has counted a change before the keeper sees it)
   * @param {string} name the database's name (`keptName`)
   */
  constructor(tracker, name) {
    this.tracker = tracker;
    this.name = name;
    this.stopped = false;
    this.discarded = false;
    /** The change that brought the kept state back into the document, if it changed it. */
    this.broughtBack = undefined;
    /** Whether the snapshot recorded last is the document's as it is now, all proven stored. */
    this.recorded = false;
    this.recordTimer = null;
    this.persistence = null;
    if (!globalThis.indexedDB) return;
    const doc = tracker.provider.doc;
    let persistence;
    try {
      persistence = new IndexeddbPersistence(name, doc);
    } catch {
      return;
    }
    this.persistence = persistence;
    doc.off("update", persistence._storeUpdate);
    this.onUpdate = (update, origin) => this.store(update, origin);
    doc.on("update", this.onUpdate);

    // y-indexeddb's own callback ran first: it brings the kept state back in a transaction
    // created before this one, which reads the snapshot as it was before this page wrote any.
    const acknowledged = persistence._db.then((db) => {
      // Another page deleting the database (a read-only page discarding it), or the browser
      // clearing it (a logout's Clear-Site-Data), closes this connection: keeping stops here.
      db.onversionchange = () => this.stop();
      db.onclose = () => this.stop();
      if (this.stopped) return undefined;
      this.tracker.setKeeping(true);
      return persistence.get(ACKNOWLEDGED);
    });
    acknowledged.catch(() => this.stop());
    persistence.on("synced", () => {
      if (this.stopped) return;
      // IndexedDB holds the document as it is now once the transaction that brought the kept
      // state back (and wrote the page's own state beside it) committed.
      const change = this.tracker.changes;
      const now = Y.snapshot(doc);
      this.settled(() => this.tracker.keep(change));
      acknowledged.then(
        (bytes) => {
          const back = this.broughtBack;
          if (this.stopped || back === undefined || !(bytes instanceof Uint8Array)) return;
          if (Y.equalSnapshots(Y.decodeSnapshot(bytes), now)) this.tracker.storedAlready(back);
        },
        () => {},
      );
      this.record();
    });
    tracker.watch(() => {
      // A connection the server refused as read-only: this user can no longer edit the
      // document, and what was kept for them is dropped, not sent again on every connection.
      if (tracker.refused) this.discard();
      else this.record();
    });
  }

  /** Writes one update of the document; a local one counts as kept once committed. */
  store(update, origin) {
    const persistence = this.persistence;
    if (this.stopped) return;
    const change = this.tracker.changes;
    if (origin === persistence) {
      // The kept state brought back, or records another page of the same user wrote, merged
      // when the records are trimmed: already in IndexedDB.
      if (!persistence.synced && this.broughtBack === undefined) this.broughtBack = change;
      this.settled(() => this.tracker.keep(change));
      return;
    }
    // Before the database is open: y-indexeddb writes the whole document when it opens.
    if (!persistence.db) return;
    const local = origin !== this.tracker.provider;
    let transaction;
    try {
      transaction = persistence.db.transaction(["updates"], "readwrite");
      transaction.objectStore("updates").add(update);
    } catch {
      this.stop();
      return;
    }
    transaction.oncomplete = () => {
      if (local) this.tracker.keep(change);
    };
    transaction.onabort = () => this.stop();
    if (!local) this.recordLater();
    // y-indexeddb's own trimming: past so many records, merge them into one, a moment later.
    persistence._dbsize += 1;
    if (persistence._dbsize >= PREFERRED_TRIM_SIZE) {
      clearTimeout(persistence._storeTimeoutId);
      persistence._storeTimeoutId = setTimeout(() => {
        persistence._storeTimeoutId = null;
        if (!this.stopped) storeState(persistence, false).catch(() => this.stop());
      }, persistence._storeTimeout);
    }
  }

  /** Runs `then` once every write asked for so far has committed. */
  settled(then) {
    try {
      const transaction = this.persistence.db.transaction(["updates"], "readonly");
      transaction.oncomplete = () => {
        if (!this.stopped) then();
      };
    } catch {
      this.stop();
    }
  }

  /** Records the snapshot of the document when every local change is proven stored. */
  record() {
    const tracker = this.tracker;
    if (!(tracker.provider.synced && tracker.stored >= tracker.changes)) {
      this.recorded = false;
      return;
    }
    if (this.recorded || this.stopped || !this.persistence.db) return;
    this.recorded = true;
    const bytes = Y.encodeSnapshot(Y.snapshot(tracker.provider.doc));
    this.persistence.set(ACKNOWLEDGED, bytes).catch(() => this.stop());
  }

  /** Records the snapshot again a moment after others' changes arrived (the server's). */
  recordLater() {
    this.recorded = false;
    if (this.recordTimer !== null) return;
    this.recordTimer = setTimeout(() => {
      this.recordTimer = null;
      this.record();
    }, RECORD_DELAY);
  }

  /** Stops keeping: the changes from now on live in the page only. */
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.recordTimer);
    this.recordTimer = null;
    this.tracker.setKeeping(false);
    if (!this.persistence) return;
    this.tracker.provider.doc.off("update", this.onUpdate);
    this.persistence.destroy().catch(() => {});
  }

  /** Stops keeping and deletes what this browser keeps of the document. */
  discard() {
    if (this.discarded) return;
    this.discarded = true;
    this.stop();
    if (!this.persistence) return;
    // After this page's connection closed (`destroy` closes it), or nothing was opened.
    this.persistence._db.then(
      () => forget(this.name),
      () => {},
    );
  }
}
