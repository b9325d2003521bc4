#!/usr/bin/env node
// A Yjs client on the real y-websocket WebsocketProvider that keeps typing, and reports what
// happens to its connection as it happens, one JSON line per event.
//
//   node typist.mjs --server ws://127.0.0.1:PORT/sync --room ROOM --token TOKEN
//                   [--prefix TEXT] [--every MS] [--after-close MS] [--timeout MS]
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

import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'

const opts = { server: null, room: null, token: null, prefix: 'line-', every: 50, afterClose: 1000, timeout: 20000 }
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
let ticker = null

function finish () {
  clearInterval(ticker)
  say({ event: 'done', typed, closed, text: text.toString() })
  try {
    provider.destroy()
    doc.destroy()
  } catch (err) {
    process.stderr.write(`typist.mjs: teardown: ${err && err.stack}\n`)
  }
  setTimeout(() => process.exit(0), 500).unref()
}

const overall = setTimeout(finish, opts.timeout)

provider.on('sync', isSynced => {
  if (!isSynced || ticker !== null) return
  say({ event: 'synced', text: text.toString() })
  ticker = setInterval(() => {
    typed += 1
    text.insert(text.length, `${opts.prefix}${typed}\n`)
  }, opts.every)
})

provider.on('connection-close', event => {
  if (closed || event === null || event === undefined) return
  closed = true
  say({ event: 'closed', code: event.code, reason: event.reason || '', typed })
  clearTimeout(overall)
  setTimeout(finish, opts.afterClose)
})
