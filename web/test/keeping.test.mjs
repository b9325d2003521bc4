// What src/lib/keeping.js keeps in the browser, with y-indexeddb over an in-memory IndexedDB
// (fake-indexeddb), the real y-websocket provider and the scripted server of test/scripted.mjs:
// edits made offline outlive the page and are sent by the page opened again; a state the server
// acknowledged is not called kept; another user's database is another; a refused connection's
// kept state is dropped; without IndexedDB, or when it fails or goes away, the editor works as
// before.

import "fake-indexeddb/auto";

import assert from "node:assert/strict";
import { test } from "node:test";

import * as Y from "yjs";

import { Keeper, forget, keptName } from "../src/lib/keeping.js";
import { ScriptedServer, connect, settle, sockets, until } from "./scripted.mjs";

/** A page: a provider, its tracker and a keeper keeping it as `name`. */
function open(t, name) {
  const page = connect(t);
  page.keeper = new Keeper(page.tracker, name);
  return page;
}

/** Closes a page as a closed tab does: nothing is flushed or said. */
function close(page) {
  page.provider.destroy();
  page.doc.destroy();
}

/** Connects the page's socket to `server` and lets them talk until `done()`. */
async function talk(server, done) {
  const socket = sockets[0];
  if (socket.readyState !== socket.OPEN) {
    socket.open();
    server.greet(socket);
  }
  await until("the page and the server to be done", () => {
    server.handleAll(socket);
    return done();
  });
}

/** Whether this browser has a database called `name`. */
async function exists(name) {
  return (await indexedDB.databases()).some((database) => database.name === name);
}

/** Waits until `check()` (asynchronous) holds. */
async function eventually(what, check) {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("edits made offline are kept, brought back by the page opened again, and sent", async (t) => {
  const name = keptName("user-1", "document-1", 1);
  const first = open(t, name);
  await until("keeping", () => first.tracker.keeping);
  first.text.insert(0, "line one\n");
  first.text.insert(9, "line two\n");
  await until("both lines kept", () => first.tracker.state === "kept" && !first.tracker.unsaved);
  close(first);

  // Another user of the same browser keeps in another database, and gets nothing of the first.
  const other = open(t, keptName("user-2", "document-1", 1));
  await until("the other user's database open", () => other.keeper.persistence.synced);
  assert.equal(other.text.toString(), "");
  close(other);

  const again = open(t, name);
  await until("the kept lines back", () => again.text.toString() === "line one\nline two\n");
  await until("kept", () => again.tracker.state === "kept");
  assert.equal(again.tracker.unsaved, false);
  const server = new ScriptedServer();
  await talk(server, () => again.tracker.state === "saved");
  assert.equal(server.doc.getText("source").toString(), "line one\nline two\n");
});

test("a state brought back that the server acknowledged is offline, not kept", async (t) => {
  const name = keptName("user-1", "document-2", 1);
  const first = open(t, name);
  const server = new ScriptedServer();
  await talk(server, () => first.tracker.state === "saved" && first.tracker.keeping);
  first.text.insert(0, "stored line");
  await talk(server, () => first.tracker.state === "saved");
  // Kept, and recorded as what the server holds.
  await eventually("the acknowledged snapshot recorded", async () => {
    const bytes = await first.keeper.persistence.get("acknowledged");
    return bytes instanceof Uint8Array && Y.equalSnapshots(Y.decodeSnapshot(bytes), Y.snapshot(first.doc));
  });
  close(first);

  const again = open(t, name);
  await until("the stored line back", () => again.text.toString() === "stored line");
  await until("the state brought back counted stored", () => again.tracker.stored === again.tracker.changes);
  await settle();
  assert.equal(again.tracker.state, "offline");
  assert.equal(again.tracker.unsaved, false);

  // A change made after it is kept, and the page opened next sends it.
  again.text.insert(11, ", then more");
  await until("the change kept", () => again.tracker.state === "kept");
  close(again);
  const third = open(t, name);
  await until("kept", () => third.tracker.state === "kept");
  await talk(server, () => third.tracker.state === "saved");
  assert.equal(server.doc.getText("source").toString(), "stored line, then more");
});

test("a connection refused as read-only drops what was kept, never to send it again", async (t) => {
  const name = keptName("user-1", "document-3", 1);
  const first = open(t, name);
  await until("keeping", () => first.tracker.keeping);
  first.text.insert(0, "typed before the role changed");
  await until("kept", () => first.tracker.state === "kept" && !first.tracker.unsaved);
  close(first);

  const again = open(t, name);
  await until("the kept text back", () => again.text.toString() !== "");
  const server = new ScriptedServer({ readOnly: true });
  await talk(server, () => again.tracker.state === "refused");
  assert.equal(server.doc.getText("source").toString(), "");
  await eventually("the database deleted", async () => !(await exists(name)));
  assert.equal(again.tracker.unsaved, false);

  const third = open(t, name);
  await until("the database open", () => third.keeper.persistence.synced);
  assert.equal(third.text.toString(), "");
});

test("a read-only page forgets what was kept for it", async (t) => {
  const name = keptName("user-1", "document-4", 1);
  const first = open(t, name);
  await until("keeping", () => first.tracker.keeping);
  first.text.insert(0, "typed as an editor");
  await until("kept", () => first.tracker.state === "kept");
  close(first);
  assert.ok(await exists(name));
  forget(name);
  await eventually("the database deleted", async () => !(await exists(name)));
});

test("without IndexedDB the editor works in the page alone", async (t) => {
  const present = globalThis.indexedDB;
  globalThis.indexedDB = undefined;
  let page;
  try {
    page = open(t, keptName("user-1", "document-5", 1));
  } finally {
    globalThis.indexedDB = present;
  }
  page.text.insert(0, "in the page only");
  await settle();
  assert.equal(page.tracker.keeping, false);
  assert.equal(page.tracker.state, "offline");
  assert.equal(page.tracker.unsaved, true);
  const server = new ScriptedServer();
  await talk(server, () => page.tracker.state === "saved");
  assert.equal(server.doc.getText("source").toString(), "in the page only");
});

test("a write IndexedDB refuses stops the keeping; typing goes on in the page", async (t) => {
  const page = open(t, keptName("user-1", "document-7", 1));
  await until("keeping", () => page.tracker.keeping);
  page.text.insert(0, "kept");
  await until("kept", () => page.tracker.state === "kept");
  // The database can take no more (a full quota aborts the write the same way).
  page.keeper.persistence.db.close();
  page.text.insert(4, ", then refused");
  await until("keeping stopped", () => !page.tracker.keeping);
  assert.equal(page.tracker.state, "offline");
  assert.equal(page.tracker.unsaved, true);
  page.text.insert(0, "still typing: ");
  assert.equal(page.text.toString(), "still typing: kept, then refused");
});

test("a database deleted under the page stops the keeping", async (t) => {
  const name = keptName("user-1", "document-6", 1);
  const page = open(t, name);
  await until("keeping", () => page.tracker.keeping);
  page.text.insert(0, "kept");
  await until("kept", () => page.tracker.state === "kept");
  // Another page of this user discards it (or a logout clears the browser's storage).
  forget(name);
  await until("keeping stopped", () => !page.tracker.keeping);
  assert.equal(page.tracker.state, "offline");
  assert.equal(page.tracker.unsaved, true);
  await eventually("the database deleted", async () => !(await exists(name)));
  // Typing goes on, in the page.
  page.text.insert(4, " and typed on");
  await settle();
  assert.equal(await exists(name), false, "the page wrote to the database again");
});
