// What the tests of the editor's libraries share: the real y-websocket provider over sockets a
// test drives by hand, and a scripted server that answers and commits exactly when the test says,
// in the order the Fermata room does (a connection's messages in order). Not a test file itself:
// package.json runs test/*.test.mjs.

import assert from "node:assert/strict";

import * as decoding from "lib0/decoding";
import * as encoding from "lib0/encoding";
import * as authProtocol from "y-protocols/auth";
import * as syncProtocol from "y-protocols/sync";
import { WebsocketProvider } from "y-websocket";
import * as Y from "yjs";

import { SaveTracker } from "../src/lib/saving.js";

/** The sockets the providers opened, newest last. */
export const sockets = [];

/** A WebSocket the test opens, feeds and closes; what the client sends waits in `sent`. */
export class ScriptedSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 3;
  CONNECTING = 0;
  OPEN = 1;
  CLOSED = 3;

  constructor(url) {
    this.url = url;
    this.readyState = ScriptedSocket.CONNECTING;
    this.sent = [];
    sockets.push(this);
  }

  send(bytes) {
    this.sent.push(new Uint8Array(bytes));
  }

  close() {
    this.readyState = ScriptedSocket.CLOSED;
  }

  open() {
    this.readyState = ScriptedSocket.OPEN;
    this.onopen();
  }

  receive(bytes) {
    this.onmessage({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
  }

  drop() {
    this.readyState = ScriptedSocket.CLOSED;
    this.onclose({ code: 1006, reason: "" });
  }
}

/** The server's side of one connection: its document, which only takes what the test commits. */
export class ScriptedServer {
  /** `readOnly`: the connection is a viewer's, as the room treats one: an update with content
   *  is dropped, and the first is answered with the protocol's "permission denied". */
  constructor({ readOnly = false } = {}) {
    this.doc = new Y.Doc();
    this.readOnly = readOnly;
    this.denied = false;
  }

  /** Sends the server's sync step 1, as the room does to every new connection. */
  greet(socket) {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 0);
    syncProtocol.writeSyncStep1(encoder, this.doc);
    socket.receive(encoding.toUint8Array(encoder));
  }

  /** Handles the oldest message the client sent: commits an update, answers a step 1. */
  handleNext(socket) {
    const message = socket.sent.shift();
    assert.ok(message, "the client sent nothing more");
    const decoder = decoding.createDecoder(message);
    if (decoding.readVarUint(decoder) !== 0) return "presence";
    const reply = encoding.createEncoder();
    encoding.writeVarUint(reply, 0);
    if (this.readOnly && decoding.peekVarUint(decoder) !== syncProtocol.messageYjsSyncStep1) {
      decoding.readVarUint(decoder);
      const update = decoding.readVarUint8Array(decoder);
      const decoded = Y.decodeUpdate(update);
      if ((decoded.structs.length > 0 || decoded.ds.clients.size > 0) && !this.denied) {
        this.denied = true;
        const denial = encoding.createEncoder();
        encoding.writeVarUint(denial, 2);
        authProtocol.writePermissionDenied(denial, "this connection is read-only");
        socket.receive(encoding.toUint8Array(denial));
      }
      return "dropped";
    }
    const kind = syncProtocol.readSyncMessage(decoder, reply, this.doc, "client");
    if (kind === syncProtocol.messageYjsSyncStep1) {
      socket.receive(encoding.toUint8Array(reply));
      return "step 1";
    }
    return "update";
  }

  /** Handles every message the client has sent so far. */
  handleAll(socket) {
    const handled = [];
    while (socket.sent.length > 0) handled.push(this.handleNext(socket));
    return handled;
  }
}

/** Lets queued microtasks (the tracker's probes) run. */
export const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/** Waits until `condition()` holds, polling, for five seconds at most. */
export async function until(what, condition) {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    assert.ok(Date.now() < deadline, `gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A provider and its tracker over scripted sockets, stopped when `t` ends; `room` names the
 *  document (a page opened again uses the same). */
export function connect(t, room = "room") {
  sockets.length = 0;
  const doc = new Y.Doc();
  const provider = new WebsocketProvider("ws://fermata.invalid/sync", room, doc, {
    WebSocketPolyfill: ScriptedSocket,
    disableBc: true,
  });
  const tracker = new SaveTracker(provider, () => {});
  // The provider's and its awareness's timers would keep the test process alive.
  t.after(() => {
    provider.destroy();
    provider.awareness.destroy();
  });
  return { doc, text: doc.getText("source"), provider, tracker };
}
