// Tells *saved* from *saving*, *kept* and *offline* for one document and its y-websocket
// provider, and notices when the server refuses this connection's edits.
//
// What the server promises (crates/fermata-collab/src/room.rs, protocol.rs):
//   - persistence before publication: an update is committed to storage before anything about
//     it is sent to anyone, and an update that cannot be committed closes its connection (with
//     a reason the client reconnects on), never silently dropped;
//   - one connection's messages are handled in the order they were sent: an update that came
//     before a sync step 1 is committed (or its connection closed) before that step 1 is
//     answered with a sync step 2 (the room ends a batch of updates at the first other message,
//     commits the batch, then handles the message).
//
// The rule. A step 2 that answers a step 1 sent after a local change proves the change stored.
// So the tracker counts local changes (document updates whose origin is not the provider) and,
// once the connection can prove something, sends a step 1 of its own (a probe) remembering how
// many changes had been sent before it, one probe in flight at a time. Step 2 answers come back
// in the order the step 1s went out, so each is matched to the step 1 it answers; the
// provider's own step 1 at connection time proves nothing (the server answers it before the
// client has even sent what it changed offline).
//
// A probe proves the changes made offline only after they were sent: they travel in the
// client's answer to the server's own step 1, which the server sends to every new connection.
// The provider writes that answer right after the message handler returns, so probes start on a
// connection only from the next microtask after the server's step 1.
//
//   saved    the connection is open and synced, and an answered probe covers every local
//            change made so far (a change proven stored stays stored, across connections)
//   saving   the connection is open, but not synced yet or some local change not proven
//   kept     no open connection, and this browser keeps (lib/keeping.js: IndexedDB committed
//            them) local changes the server has not acknowledged; they go out on the next
//            connection, from this page or from the page opened again later
//   offline  no open connection, and nothing unacknowledged is kept in this browser: either
//            every change is proven stored, or the browser cannot keep them (no IndexedDB, or
//            it failed) and they live only in this page (y-websocket reconnects by itself)
//   refused  the server answered an edit with the protocol's "permission denied": this
//            connection is read-only (the member became a viewer), nothing typed here is saved
//
// *Kept* counts local changes the way *stored* does: `kept` is the highest change count whose
// changes IndexedDB has committed (the keeper reports it), and the state is kept once some
// change newer than the last proven one is on the device. The newest keystroke may still be on
// its way to IndexedDB for a moment then; `unsaved` (what the page warns about on leaving) tells
// exactly.
//
// A state-vector comparison alone cannot give this: a deletion does not advance a state vector,
// and a step 2 is a diff from the client's own vector, so it cannot show what the server lacks.
// The cost of the rule is one small round trip per burst of typing (the answer is the diff
// since the client's state, usually just the document's delete set).

import * as decoding from "lib0/decoding";
import * as encoding from "lib0/encoding";
import * as authProtocol from "y-protocols/auth";
import * as syncProtocol from "y-protocols/sync";
import { messageAuth, messageSync } from "y-websocket";

export class SaveTracker {
  /**
   * @param {import("y-websocket").WebsocketProvider} provider
   * @param {() => void} onChange called whenever the state may have changed
   */
  constructor(provider, onChange) {
    this.provider = provider;
    this.onChange = onChange;
    /** Local changes made so far. */
    this.changes = 0;
    /** Local changes proven stored: the highest count covered by an answered probe. */
    this.stored = 0;
    /** For each step 1 sent on this connection and not answered yet, in order: the change
     *  count its answer proves, or null for one that proves nothing. */
    this.awaiting = [];
    /** Whether the client has answered the server's step 1 on this connection. */
    this.answeredServer = false;
    /** Whether a probe is in flight. */
    this.probing = false;
    /** Whether this browser can keep changes (IndexedDB opened and has not failed since). */
    this.keeping = false;
    /** Local changes kept in this browser: the highest count IndexedDB committed. */
    this.kept = 0;
    /** Whether the server refused an edit of this connection as read-only. */
    this.refused = false;
    /** Called, after `onChange`, whenever the state may have changed (see `watch`). */
    this.watchers = [];

    const doc = provider.doc;
    // Registered after the provider's own listener, so the change is on the socket before the
    // probe that covers it.
    doc.on("update", (_update, origin) => {
      if (origin === provider) return;
      this.changes += 1;
      queueMicrotask(() => this.probe());
      this.changed();
    });
    provider.on("status", ({ status }) => {
      // On "connected" the provider is about to send its own step 1, which proves nothing.
      this.awaiting = status === "connected" ? [null] : [];
      this.answeredServer = false;
      this.probing = false;
      this.changed();
    });
    provider.on("sync", () => this.changed());

    const handle = provider.messageHandlers[messageSync];
    provider.messageHandlers[messageSync] = (encoder, decoder, from, fromServer, type) => {
      const kind = decoding.peekVarUint(decoder);
      handle(encoder, decoder, from, fromServer, type);
      // Messages relayed from another tab (fromServer false) prove nothing about storage.
      if (!fromServer) return;
      if (kind === syncProtocol.messageYjsSyncStep1) {
        this.answeredServer = true;
        queueMicrotask(() => this.probe());
      } else if (kind === syncProtocol.messageYjsSyncStep2) {
        const proves = this.awaiting.shift();
        if (proves !== undefined && proves !== null) {
          this.stored = Math.max(this.stored, proves);
          this.probing = false;
          this.probe();
        }
        this.changed();
      }
    };

    // The server tells a read-only connection once, at its first edit, that it is denied (the
    // stock handler only logs it). The connection stays open, read-only.
    const auth = provider.messageHandlers[messageAuth];
    provider.messageHandlers[messageAuth] = (encoder, decoder, ...rest) => {
      const denied = decoding.peekVarUint(decoder) === authProtocol.messagePermissionDenied;
      auth(encoder, decoder, ...rest);
      if (denied && !this.refused) {
        this.refused = true;
        this.changed();
      }
    };
  }

  /** Calls `watcher` whenever the state may have changed, after `onChange`. */
  watch(watcher) {
    this.watchers.push(watcher);
  }

  changed() {
    this.onChange();
    for (const watcher of this.watchers) watcher();
  }

  /** Whether browser keeping works, as the keeper found it. */
  setKeeping(keeping) {
    if (this.keeping === keeping) return;
    this.keeping = keeping;
    this.changed();
  }

  /** The first `count` local changes are committed to IndexedDB. */
  keep(count) {
    if (count <= this.kept) return;
    this.kept = count;
    this.changed();
  }

  /** Local change number `change` is known stored without a probe (the keeper's evidence that
   *  the state it brought back is the one the server acknowledged): it counts as proven when
   *  every change before it is. */
  storedAlready(change) {
    if (this.stored !== change - 1) return;
    this.stored = change;
    this.changed();
  }

  /** Sends a probe when there is something to prove and nothing already on its way. */
  probe() {
    const ws = this.provider.ws;
    if (!this.provider.wsconnected || !ws || ws.readyState !== ws.OPEN) return;
    if (!this.answeredServer || this.probing || this.stored >= this.changes) return;
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, messageSync);
    syncProtocol.writeSyncStep1(encoder, this.provider.doc);
    ws.send(encoding.toUint8Array(encoder));
    this.awaiting.push(this.changes);
    this.probing = true;
  }

  /** @returns {"saved" | "saving" | "kept" | "offline" | "refused"} */
  get state() {
    if (this.refused) return "refused";
    if (this.provider.wsconnected) {
      return this.provider.synced && this.stored >= this.changes ? "saved" : "saving";
    }
    return this.keeping && this.kept > this.stored ? "kept" : "offline";
  }

  /** Whether some local change is neither proven stored nor kept in this browser: what closing
   *  the page would lose. Nothing, once the server refused: nothing typed here can be saved. */
  get unsaved() {
    if (this.refused) return false;
    return this.changes > Math.max(this.stored, this.keeping ? this.kept : 0);
  }
}
