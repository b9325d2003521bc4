#!/usr/bin/env node
// A command-line Yjs client built on the real y-websocket WebsocketProvider.
//
//   node client.mjs --server ws://127.0.0.1:PORT/sync --room ROOM [--token TOKEN] [--name NAME]
//                   [--insert TEXT]... [--expect TEXT]... [--expect-length N]
//                   [--expect-peers N] [--expect-close CODE]
//                   [--timeout MS] [--linger MS]
//
// It connects to SERVER/ROOM (plus ?token=TOKEN), waits for the initial sync, appends each
// --insert to the shared Y.Text "source" (one transaction each), waits until the text contains
// every --expect string and has at least --expect-length characters (and, with --expect-peers,
// until the awareness states of at least N other clients have been visible at once), stays connected --linger
// ms more, then prints one JSON line and exits. Its own awareness state is {"user":{"name":NAME}}.
//   {"ok":true,"text":"...","synced":true}                                   exit 0
//   {"ok":false,"reason":"...","text":"...","synced":false,...}              exit 1
// With --expect-close CODE, a close of the connection by the server with that code is the
// success case instead: {"ok":true,"closed":CODE,"reason":"..."}.

import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'

const USAGE = 'usage: client.mjs --server URL --room ROOM [--token T] [--name NAME] [--insert TEXT]... ' +
  '[--expect TEXT]... [--expect-length N] [--expect-peers N] [--expect-close CODE] ' +
  '[--timeout MS] [--linger MS]'

function fail (message) {
  process.stderr.write(`client.mjs: ${message}\n${USAGE}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const opts = {
    server: null,
    room: null,
    token: null,
    inserts: [],
    expects: [],
    expectLength: 0,
    expectPeers: 0,
    expectClose: null,
    name: `interop-${process.pid}`,
    timeout: 15000,
    linger: 200
  }
  const integer = (name, value) => {
    if (!/^\d+$/.test(value)) fail(`${name} needs a non-negative integer, got ${JSON.stringify(value)}`)
    return Number(value)
  }
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]
    if (name === '--help' || name === '-h') {
      process.stdout.write(USAGE + '\n')
      process.exit(0)
    }
    if (i + 1 >= argv.length) fail(`${name} needs a value`)
    const value = argv[++i]
    switch (name) {
      case '--server': opts.server = value; break
      case '--room': opts.room = value; break
      case '--token': opts.token = value; break
      case '--name': opts.name = value; break
      case '--insert': opts.inserts.push(value); break
      case '--expect': opts.expects.push(value); break
      case '--expect-length': opts.expectLength = integer(name, value); break
      case '--expect-peers': opts.expectPeers = integer(name, value); break
      case '--expect-close': opts.expectClose = integer(name, value); break
      case '--timeout': opts.timeout = integer(name, value); break
      case '--linger': opts.linger = integer(name, value); break
      default: fail(`unknown argument ${JSON.stringify(name)}`)
    }
  }
  if (opts.server === null) fail('--server is required')
  if (opts.room === null) fail('--room is required')
  return opts
}

const opts = parseArgs(process.argv.slice(2))

const doc = new Y.Doc()
const text = doc.getText('source')
const provider = new WebsocketProvider(opts.server, opts.room, doc, {
  WebSocketPolyfill: WebSocket,
  params: opts.token === null ? {} : { token: opts.token },
  // Separate processes never share a BroadcastChannel, and an open one keeps Node running.
  disableBc: true
})
// A fresh Awareness holds its state at clock 0, which other peers ignore (they apply a state only
// when its clock is newer than the one they know, and an unknown client counts as 0): set a
// field, as editors do, so that this client's presence reaches the others.
provider.awareness.setLocalStateField('user', { name: opts.name })

let finished = false
let inserted = false
let lastError = null
let lingerTimer = null

let peersSeen = 0 // the most other clients seen at once; once reached, a peer leaving is fine
const peerCount = () => {
  const now = [...provider.awareness.getStates().keys()].filter(id => id !== doc.clientID).length
  peersSeen = Math.max(peersSeen, now)
  return peersSeen
}

// Prints the result, then tears the provider down and lets the process exit on its own; a
// fallback timer (unref'd, so it never keeps the process alive) forces the exit if a socket lingers.
function finish (result, exitCode) {
  if (finished) return
  finished = true
  clearTimeout(overallTimer)
  clearTimeout(lingerTimer)
  process.stdout.write(JSON.stringify(result) + '\n')
  process.exitCode = exitCode
  const ws = provider.ws
  try {
    provider.destroy()
    doc.destroy()
  } catch (err) {
    process.stderr.write(`client.mjs: teardown: ${err && err.stack}\n`)
  }
  if (ws && typeof ws.terminate === 'function' && ws.readyState !== ws.CLOSED) {
    // Give the close handshake a moment, then drop the TCP connection.
    setTimeout(() => ws.terminate(), 500).unref()
  }
  setTimeout(() => process.exit(exitCode), 2000).unref()
}

function failure (reason, extra = {}) {
  const result = { ok: false, reason, text: text.toString(), synced: provider.synced, ...extra }
  if (lastError !== null && result.error === undefined) result.error = lastError
  finish(result, 1)
}

function expectationsHold () {
  const current = text.toString()
  return provider.synced &&
    inserted &&
    opts.expects.every(s => current.includes(s)) &&
    current.length >= opts.expectLength &&
    peerCount() >= opts.expectPeers
}

function check () {
  if (finished || lingerTimer !== null || opts.expectClose !== null) return
  if (!expectationsHold()) return
  lingerTimer = setTimeout(() => {
    lingerTimer = null
    if (finished) return
    if (!expectationsHold()) {
      // Lost the sync during the linger (a reconnect); wait for the expectations again.
      check()
      return
    }
    const result = { ok: true, text: text.toString(), synced: true }
    if (opts.expectPeers > 0) result.peers = peerCount()
    finish(result, 0)
  }, opts.linger)
}

const overallTimer = setTimeout(() => {
  if (opts.expectClose !== null) {
    failure(`timeout after ${opts.timeout} ms: expected the server to close with ${opts.expectClose}`)
  } else {
    failure(`timeout after ${opts.timeout} ms` + (provider.synced ? '' : ' (never synced)'))
  }
}, opts.timeout)

provider.on('sync', isSynced => {
  if (finished || !isSynced) return
  if (!inserted) {
    inserted = true
    for (const line of opts.inserts) {
      text.insert(text.length, line) // one transaction per insert
    }
  }
  check()
})

doc.on('update', () => check())
provider.awareness.on('change', () => check())

provider.on('connection-error', event => {
  // ws reports a refused upgrade here, e.g. "Unexpected server response: 403".
  lastError = (event && (event.message || (event.error && event.error.message))) || 'connection error'
})

provider.on('connection-close', event => {
  if (finished) return
  if (event === null || event === undefined) {
    // The provider closes by itself when the server sent nothing for 30 s.
    failure('connection dropped: no message from the server for 30 s')
    return
  }
  const code = event.code
  const reason = event.reason || ''
  process.stderr.write(`client.mjs: server closed the connection: code ${code} reason ${JSON.stringify(reason)}\n`)
  if (opts.expectClose !== null && code === opts.expectClose) {
    const result = { ok: true, closed: code, reason }
    if (lastError !== null) result.error = lastError
    finish(result, 0)
  } else {
    failure('connection closed', { closed: code, closeReason: reason })
  }
})
