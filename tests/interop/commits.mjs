#!/usr/bin/env node
// A Yjs client that writes a long journal: N updates, each one committed on its own.
//
//   node commits.mjs --url ws://127.0.0.1:PORT/sync/ROOM?token=T --count N [--prefix TEXT]
//                    [--timeout MS]
//
// After the initial sync it appends "PREFIX<n>\n" (n = 1 to N) to the shared Y.Text "source",
// one transaction each, and sends every update followed by a sync step 1 of its own. A room
// gathers the updates that wait together into one commit, and a message that is not an update
// ends the gathering, so each update is a commit of its own; the room answers a step 1 after it
// handled everything sent before it, and closes a client whose update it could not save. Once
// every step 1 is answered, each of the N updates was committed. It prints one JSON line:
//   {"ok":true,"committed":N}                         exit 0
//   {"ok":false,"reason":"...","answered":K}          exit 1 (closed, told its updates are not
//                                                     kept, or no answer in time)

import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import * as syncProtocol from 'y-protocols/sync'
import WebSocket from 'ws'

// y-websocket's message types (y-websocket/src/y-websocket.js): sync, and the auth message a
// server sends a client whose updates it drops ("permission denied").
const messageSync = 0
const messageAuth = 2

const USAGE = 'usage: commits.mjs --url URL --count N [--prefix TEXT] [--timeout MS]'

function fail (message) {
  process.stderr.write(`commits.mjs: ${message}\n${USAGE}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const opts = { url: null, count: null, prefix: 'commit-', timeout: 60000 }
  const integer = (name, value) => {
    if (value === undefined || !/^\d+$/.test(value)) fail(`${name} needs a non-negative integer`)
    return Number(value)
  }
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]
    if (i + 1 >= argv.length) fail(`${name} needs a value`)
    const value = argv[++i]
    switch (name) {
      case '--url': opts.url = value; break
      case '--count': opts.count = integer(name, value); break
      case '--prefix': opts.prefix = value; break
      case '--timeout': opts.timeout = integer(name, value); break
      default: fail(`unknown argument ${JSON.stringify(name)}`)
    }
  }
  if (opts.url === null || opts.count === null) fail('--url and --count are required')
  return opts
}

const opts = parseArgs(process.argv.slice(2))
const doc = new Y.Doc()
const text = doc.getText('source')
const socket = new WebSocket(opts.url)
socket.binaryType = 'arraybuffer'

/** Step 2 answers to this client's step 1s: the initial sync's, then one per update. */
let answered = 0
let typing = false
let done = false

function finish (result, exitCode) {
  if (done) return
  done = true
  clearTimeout(timer)
  process.stdout.write(JSON.stringify(result) + '\n')
  process.exitCode = exitCode
  socket.close()
  setTimeout(() => process.exit(exitCode), 500).unref()
}

const timer = setTimeout(() => {
  finish({ ok: false, reason: `timeout after ${opts.timeout} ms`, answered }, 1)
}, opts.timeout)

function syncMessage (write) {
  const encoder = encoding.createEncoder()
  encoding.writeVarUint(encoder, messageSync)
  write(encoder)
  return encoding.toUint8Array(encoder)
}

const stepOne = () => syncMessage((encoder) => syncProtocol.writeSyncStep1(encoder, doc))

function type () {
  typing = true
  doc.on('update', (update, origin) => {
    if (origin === 'server') return
    socket.send(syncMessage((encoder) => syncProtocol.writeUpdate(encoder, update)))
    socket.send(stepOne())
  })
  for (let n = 1; n <= opts.count; n++) text.insert(text.length, `${opts.prefix}${n}\n`)
}

socket.on('open', () => socket.send(stepOne()))

socket.on('message', (data) => {
  const decoder = decoding.createDecoder(new Uint8Array(data))
  const messageType = decoding.readVarUint(decoder)
  if (messageType === messageAuth) {
    finish({ ok: false, reason: 'the server keeps none of this client\'s updates (permission denied)', answered }, 1)
    return
  }
  if (messageType !== messageSync) return // presence
  const encoder = encoding.createEncoder()
  encoding.writeVarUint(encoder, messageSync)
  const kind = syncProtocol.readSyncMessage(decoder, encoder, doc, 'server')
  // The server's own step 1 is answered with what this client holds.
  if (encoding.length(encoder) > 1) socket.send(encoding.toUint8Array(encoder))
  if (kind !== syncProtocol.messageYjsSyncStep2) return
  answered += 1
  if (!typing) type()
  // The first answer is the initial sync's; each after it acknowledges one update.
  if (answered === opts.count + 1) finish({ ok: true, committed: answered - 1 }, 0)
})

socket.on('close', (code, reason) => {
  finish({ ok: false, reason: `closed by the server: ${code} ${reason}`, answered }, 1)
})

socket.on('error', (error) => {
  finish({ ok: false, reason: `socket error: ${error.message}`, answered }, 1)
})
