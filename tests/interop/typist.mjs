#!/usr/bin/env node
// A Yjs client on the real y-websocket WebsocketProvider that keeps typing, and reports what
// happens to its connection as it happens, one JSON line per event.
//
//   node typist.mjs --server ws://127.0.0.1:PORT/sync --room ROOM --token TOKEN
//                   [--prefix TEXT] [--every MS] [--after-close MS] [--timeout MS]
//                   [--duration MS [--linger MS]]
//
// After the initial sync it appends "PREFIX<n>\n" (n = 1, 2, ...) to the shared Y.Text "source"
// every MS milliseconds (default 50), one transaction each, and goes on after the connection is
// closed (y-websocket keeps the edits and tries to reconnect).
//   {"event":"synced","text":"..."}
//   {"event":"permission-denied","reason":"..."}   the server's y-protocols auth message
//   {"event":"closed","code":CODE,"reason":"...","typed":N}   N: lines typed when it closed
//   {"event":"done","typed":N,"closed":true|false,"text":"..."}
// It ends --after-close ms after the first close (default 1000), or at --timeout (default
// 20000) if the server never closed it; it always exits 0.
//
// With --duration MS it types through outages instead: it types for MS milliseconds from the
// initial sync whatever happens to the connection, reporting every close and every sync after
// one ({"event":"resynced","typed":N}), and records the lines of other prefixes that arrive from
// the server: a room sends only what it committed, so those are acknowledged lines. It reports
// them as they arrive ({"event":"seen","lines":[...]}), so a test that kills it still knows what
// it saw. When the MS milliseconds are over it stops typing ({"event":"stopped","typed":N}) and
// waits until the server confirmed it stored everything typed, as the browser editor's "Saved"
// does: once connected and synced, it sends a sync step 1 of its own and waits for the answer on
// the same connection. A room answers messages in the order they came and closes a client whose
// update it could not save, so that answer means every earlier update was stored; a close before
// it means trying again on the next connection. Then it stays connected for --linger ms (default
// 1000), or until --timeout, and prints
//   {"event":"done","typed":N,"closes":K,"synced":true|false,"seen":["...",...],"text":"..."}
// where "synced" says whether it got there before the timeout.

import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
import * as encoding from 'lib0/encoding'
import * as syncProtocol from 'y-protocols/sync'

const opts = {
  server: null,
  room: null,
  token: null,
  prefix: 'line-',
  every: 50,
  afterClose: 1000,
  timeout: 20000,
  duration: null,
  linger: 1000
}
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i += 2) {
  const value = argv[i + 1]
  switch (argv[i]) {
    case '--server': opts.server = value; break
    case '--room': opts.room = value; break
    case '--token': opts.token = value; break
    case '--prefix': opts.prefix = value; break
    case '--every': opts.every = Number(value); break
    case '--after-close': opts.afterClose = Number(value); break
    case '--timeout': opts.timeout = Number(value); break
    case '--duration': opts.duration = Number(value); break
    case '--linger': opts.linger = Number(value); break
    default:
      process.stderr.write(`typist.mjs: unknown argument ${JSON.stringify(argv[i])}\n`)
      process.exit(2)
  }
}
if (opts.server === null || opts.room === null || opts.token === null) {
  process.stderr.write('typist.mjs: --server, --room and --token are required\n')
  process.exit(2)
}

const say = event => process.stdout.write(JSON.stringify(event) + '\n')

// y-websocket reports the server's "permission denied" auth message with console.warn.
console.warn = (...args) => say({ event: 'permission-denied', reason: args.map(String).join(' ') })

const doc = new Y.Doc()
const text = doc.getText('source')
const provider = new WebsocketProvider(opts.server, opts.room, doc, {
  WebSocketPolyfill: WebSocket,
  params: { token: opts.token },
  disableBc: true
})
provider.awareness.setLocalStateField('user', { name: `typist-${process.pid}` })

let typed = 0
let closed = false
let closes = 0
let ticker = null
let finished = false
// The lines of other typists that arrived from the server, in the order they first did.
const seen = new Set()

function teardown () {
  try {
    provider.destroy()
    doc.destroy()
  } catch (err) {
    process.stderr.write(`typist.mjs: teardown: ${err && err.stack}\n`)
  }
  setTimeout(() => process.exit(0), 500).unref()
}

function finish () {
  clearInterval(ticker)
  say({ event: 'done', typed, closed, text: text.toString() })
  teardown()
}

function finishTypingThrough (synced) {
  if (finished) return
  finished = true
  clearInterval(ticker)
  say({ event: 'done', typed, closes, synced, seen: [...seen], text: text.toString() })
  teardown()
}

function typeEvery () {
  return setInterval(() => {
    typed += 1
    text.insert(text.length, `${opts.prefix}${typed}\n`)
  }, opts.every)
}

if (opts.duration === null) {
  const overall = setTimeout(finish, opts.timeout)

  provider.on('sync', isSynced => {
    if (!isSynced || ticker !== null) return
    say({ event: 'synced', text: text.toString() })
    ticker = typeEvery()
  })

  provider.on('connection-close', event => {
    if (closed || event === null || event === undefined) return
    closed = true
    say({ event: 'closed', code: event.code, reason: event.reason || '', typed })
    clearTimeout(overall)
    setTimeout(finish, opts.afterClose)
  })
} else {
  setTimeout(() => finishTypingThrough(false), opts.timeout)

  // Updates the provider applied came from the server (no BroadcastChannel here).
  doc.on('update', (_update, origin) => {
    if (origin !== provider) return
    const lines = text.toString().split('\n')
    lines.pop() // what follows the last newline is no whole line
    const fresh = []
    for (const line of lines) {
      if (line !== '' && !line.startsWith(opts.prefix) && !seen.has(line)) {
        seen.add(line)
        fresh.push(line)
      }
    }
    if (fresh.length > 0) say({ event: 'seen', lines: fresh })
  })

  // y-websocket's message types: a sync message, and of those the answer to a step 1.
  const MESSAGE_SYNC = 0
  const SYNC_STEP_2 = 1

  // Once typing is over: done when the server confirmed it stored everything typed (the answer
  // to a step 1 sent after it, on a connection that stayed open) and the connection then stayed
  // up for --linger ms.
  function awaitQuiet () {
    let probed = null // the socket a probe awaits its answer on
    let confirmedAt = null
    setInterval(() => {
      const ws = provider.ws
      if (!(provider.wsconnected && provider.synced) || ws === null) {
        probed = null
        confirmedAt = null
      } else if (confirmedAt !== null) {
        if (Date.now() - confirmedAt >= opts.linger) finishTypingThrough(true)
      } else if (probed !== ws) {
        probed = ws
        ws.addEventListener('message', event => {
          const bytes = new Uint8Array(event.data)
          if (probed === ws && bytes[0] === MESSAGE_SYNC && bytes[1] === SYNC_STEP_2) {
            confirmedAt = Date.now()
          }
        })
        const encoder = encoding.createEncoder()
        encoding.writeVarUint(encoder, MESSAGE_SYNC)
        syncProtocol.writeSyncStep1(encoder, doc)
        ws.send(encoding.toUint8Array(encoder))
      }
    }, 50)
  }

  provider.on('sync', isSynced => {
    if (!isSynced) return
    if (ticker !== null) {
      say({ event: 'resynced', typed })
      return
    }
    say({ event: 'synced', text: text.toString() })
    ticker = typeEvery()
    setTimeout(() => {
      clearInterval(ticker)
      say({ event: 'stopped', typed })
      awaitQuiet()
    }, opts.duration)
  })

  provider.on('connection-close', event => {
    closes += 1
    closed = true
    say({
      event: 'closed',
      code: event ? event.code : null,
      reason: (event && event.reason) || '',
      typed
    })
  })
}
