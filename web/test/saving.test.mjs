// The saved / saving / kept / offline / refused rule of src/lib/saving.js, with the real
// y-websocket provider over a socket the test drives by hand (test/scripted.mjs). What the
// browser keeps is reported to the tracker by hand here; test/keeping.test.mjs keeps it in
// IndexedDB.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ScriptedServer, connect, settle, sockets, until } from "./scripted.mjs";

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

test("changes the browser committed and the server lacks are kept, until the server has them", async (t) => {
  const { text, tracker } = connect(t);
  const server = new ScriptedServer();
  text.insert(0, "typed offline");
  // Without keeping (no IndexedDB, or not open yet) the change lives in the page only.
  assert.equal(tracker.state, "offline");
  assert.equal(tracker.unsaved, true);
  tracker.setKeeping(true);
  assert.equal(tracker.state, "offline", "kept before the browser committed anything");
  tracker.keep(1);
  assert.equal(tracker.state, "kept");
  assert.equal(tracker.unsaved, false);

  // A newer change on its way to the browser's storage: still kept, but leaving would lose it.
  text.insert(13, ", and more");
  assert.equal(tracker.state, "kept");
  assert.equal(tracker.unsaved, true);
  tracker.keep(2);
  assert.equal(tracker.unsaved, false);

  // The server is back: saving until a probe sent after the kept changes is answered.
  const socket = sockets[0];
  socket.open();
  assert.equal(tracker.state, "saving");
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");
  assert.equal(server.doc.getText("source").toString(), "typed offline, and more");

  // Away again with nothing the server lacks: offline, not kept.
  socket.drop();
  assert.equal(tracker.state, "offline");
  assert.equal(tracker.unsaved, false);
});

test("when keeping fails, what it kept no longer counts", async (t) => {
  const { text, tracker } = connect(t);
  tracker.setKeeping(true);
  text.insert(0, "kept, then not");
  tracker.keep(1);
  assert.equal(tracker.state, "kept");
  // The database was closed or cleared under the page (a logout elsewhere, a full quota).
  tracker.setKeeping(false);
  assert.equal(tracker.state, "offline");
  assert.equal(tracker.unsaved, true);
});

test("a state brought back that the server acknowledged counts as stored, nothing before it", async (t) => {
  const { text, tracker } = connect(t);
  const server = new ScriptedServer();
  tracker.setKeeping(true);
  // The browser's kept state, brought back (change 1), was the server's: stored.
  text.insert(0, "as the server has it");
  tracker.keep(1);
  tracker.storedAlready(1);
  assert.equal(tracker.stored, 1);
  assert.equal(tracker.state, "offline");

  // A change made before a state brought back is not proven by that state.
  text.insert(0, "new: ");
  text.insert(0, "brought back ");
  tracker.keep(3);
  tracker.storedAlready(3);
  assert.equal(tracker.stored, 1);
  assert.equal(tracker.state, "kept");

  const socket = sockets[0];
  socket.open();
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");
});

test("an edit the server refuses as read-only is refused for good, and nothing is unsaved", async (t) => {
  const { text, tracker } = connect(t);
  const server = new ScriptedServer({ readOnly: true });
  const socket = sockets[0];
  socket.open();
  server.greet(socket);
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "saved");

  text.insert(0, "not allowed");
  await settle();
  server.handleAll(socket);
  assert.equal(tracker.state, "refused");
  assert.equal(tracker.unsaved, false, "the page would warn about edits that cannot be saved");
  assert.equal(server.doc.getText("source").toString(), "");

  // Still refused on the next connection: the page says so until it is opened again.
  socket.drop();
  assert.equal(tracker.state, "refused");
  await until("a new connection", () => sockets.length === 2);
  sockets[1].open();
  assert.equal(tracker.state, "refused");
});
