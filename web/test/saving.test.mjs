// The saved / saving / offline rule of src/lib/saving.js, with the real y-websocket provider
// over a socket the test drives by hand: a scripted server that answers and commits exactly when
// the test says, in the order the Fermata room does (a connection's messages in order).

import assert from "node:assert/strict";
import { test } from "node:test";

import * as decoding from "lib0/decoding";
import * as encoding from "lib0/encoding";
import * as syncProtocol from "y-protocols/sync";
import { WebsocketProvider } from "y-websocket";
import * as Y from "yjs";

import { SaveTracker } from "../src/lib/saving.js";

/** The sockets the provider opened, newest last. */
const sockets = [];

/** A WebSocket the test opens, feeds and closes; what the client sends waits in `sent`. */
class ScriptedSocket {
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
class ScriptedServer {
  constructor() {
    this.doc = new Y.Doc();
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
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/** Waits until `condition()` holds, polling, for five seconds at most. */
async function until(what, condition) {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    assert.ok(Date.now() < deadline, `gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A provider and its tracker over scripted sockets, stopped when `t` ends. */
function connect(t) {
  sockets.length = 0;
  const doc = new Y.Doc();
  const provider = new WebsocketProvider("ws://fermata.invalid/sync", "room", doc, {
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

test("a change is saving until a step 1 sent after it is answered", async (t) => {
  const { text, provider, tracker } = connect(t);
  const server = new ScriptedServer();
  assert.equal(tracker.state, "offline");
  const socket = sockets[0];
  socket.open();
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");

  text.insert(0, "hello");
  assert.equal(tracker.state, "saving");
  await settle();
  // The update, then the probe: committed first, answered after.
  assert.deepEqual(server.handleNext(socket), "update");
  assert.equal(tracker.state, "saving", "saved before the probe was answered");
  assert.deepEqual(server.handleNext(socket), "step 1");
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "hello");

  // A change made while a probe is on its way is not proven by that probe's answer.
  text.insert(5, " there");
  await settle();
  text.insert(11, ", you");
  assert.deepEqual(server.handleNext(socket), "update");
  assert.deepEqual(server.handleNext(socket), "step 1");
  assert.equal(tracker.state, "saving", "a change newer than the probe counted as saved");
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "hello there, you");

  // A deletion does not move the state vector, and is tracked all the same.
  text.delete(0, 2);
  assert.equal(tracker.state, "saving");
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "llo there, you");
});

test("changes made offline are saved only after they went out in the answer to the server", async (t) => {
  const { text, provider, tracker } = connect(t);
  const server = new ScriptedServer();
  text.insert(0, "written offline");
  assert.equal(tracker.state, "offline");
  const socket = sockets[0];
  socket.open();
  await settle();
  // The server answers the provider's own step 1 first: synced, but nothing is stored yet.
  server.handleAll(socket);
  assert.equal(provider.synced, true);
  assert.equal(tracker.state, "saving");
  assert.equal(server.doc.getText("source").toString(), "");
  // The server's step 1 is answered with what it lacks, then the probe follows; until the
  // server has handled both, the change is not proven.
  server.greet(socket);
  await settle();
  assert.equal(tracker.state, "saving");
  assert.equal(server.handleNext(socket), "update");
  assert.equal(tracker.state, "saving");
  assert.equal(server.handleNext(socket), "step 1");
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "written offline");
});

test("a lost connection is offline, forgets its probes and keeps what was proven", async (t) => {
  const { text, provider, tracker } = connect(t);
  const server = new ScriptedServer();
  let socket = sockets[0];
  socket.open();
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  text.insert(0, "kept");
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");

  text.insert(4, " and more");
  await settle();
  // The server goes away before it handles the change or the probe.
  socket.drop();
  assert.equal(tracker.state, "offline");
  // y-websocket reconnects by itself, after a backoff.
  await until("a new connection", () => sockets.length === 2);
  socket = sockets[1];
  socket.open();
  assert.equal(tracker.state, "saving");
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "kept and more");
});
