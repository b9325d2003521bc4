#!/usr/bin/env node
// A raw WebSocket client for abuse tests: it sends one hostile message and reports whether and
// how the server closed the connection.
//
//   node raw.mjs --url ws://127.0.0.1:PORT/sync/ROOM?token=T
//                (--garbage | --oversized BYTES | --foreign-update) [--timeout MS]
//
//   --garbage         256 random bytes whose first byte (127) is no y-websocket message type
//   --oversized N     one binary message of exactly N bytes: a sync "update" header
//                     (messageSync 0, messageYjsUpdate 2, varuint length) followed by junk
//   --foreign-update  a well-formed sync "update" message whose Yjs update depends on content
//                     the document has never seen (a missing dependency)
//
// Prints one JSON line and exits 0 either way:
//   {"closed":CODE,"reason":"...","received":N}   the server closed the socket
//   {"closed":null,"received":N}                  still open after --timeout ms (default 5000)
// "received" counts the messages the server sent; "error" is added when the socket reported one
// (a refused upgrade shows as "Unexpected server response: 401" and close code 1006).

import { randomBytes, randomFillSync } from 'node:crypto'
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import WebSocket from 'ws'

// y-websocket message types (y-websocket/src/y-websocket.js) and sync sub-types (y-protocols/sync).
const messageSync = 0
const messageYjsUpdate = 2
const garbageType = 127

const USAGE = 'usage: raw.mjs --url URL (--garbage | --oversized BYTES | --foreign-update) [--timeout MS]'

function fail (message) {
  process.stderr.write(`raw.mjs: ${message}\n${USAGE}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const opts = { url: null, mode: null, size: 0, timeout: 5000 }
  const integer = (name, value) => {
    if (value === undefined || !/^\d+$/.test(value)) fail(`${name} needs a non-negative integer`)
    return Number(value)
  }
  const setMode = mode => {
    if (opts.mode !== null) fail('give exactly one of --garbage, --oversized, --foreign-update')
    opts.mode = mode
  }
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]
    switch (name) {
      case '--url':
        if (i + 1 >= argv.length) fail('--url needs a value')
        opts.url = argv[++i]
        break
      case '--garbage': setMode('garbage'); break
      case '--foreign-update': setMode('foreign-update'); break
      case '--oversized': setMode('oversized'); opts.size = integer(name, argv[++i]); break
      case '--timeout': opts.timeout = integer(name, argv[++i]); break
      case '--help': case '-h': process.stdout.write(USAGE + '\n'); process.exit(0); break
      default: fail(`unknown argument ${JSON.stringify(name)}`)
    }
  }
  if (opts.url === null) fail('--url is required')
  if (opts.mode === null) fail('give one of --garbage, --oversized, --foreign-update')
  return opts
}

// Random bytes that decode to an unknown top-level message type.
function garbageMessage () {
  const bytes = randomBytes(256)
  bytes[0] = garbageType
  return bytes
}

// Exactly `size` bytes (at least 3): messageSync, messageYjsUpdate, a varuint payload length,
// then junk that is not a valid Yjs update. Where no payload length fills the message exactly
// (the varuint grows by a byte at 128, 16384, ...), one junk byte trails the declared payload.
function oversizedMessage (size) {
  const header = length => {
    const encoder = encoding.createEncoder()
    encoding.writeVarUint(encoder, messageSync)
    encoding.writeVarUint(encoder, messageYjsUpdate)
    encoding.writeVarUint(encoder, length)
    return encoding.toUint8Array(encoder)
  }
  let headerBytes = header(0)
  let payloadLength = 0
  for (let headerLength = 3; headerLength <= 12 && size >= headerLength; headerLength++) {
    const candidate = header(size - headerLength)
    if (candidate.length === headerLength) {
      headerBytes = candidate
      payloadLength = size - headerLength
      break
    }
    if (candidate.length < headerLength) {
      headerBytes = candidate
      payloadLength = size - headerLength
      break
    }
  }
  const message = Buffer.alloc(Math.max(size, headerBytes.length))
  message.set(headerBytes, 0)
  if (message.length > headerBytes.length) {
    randomFillSync(message, headerBytes.length)
    // 0xff-leading junk, so a decoder reading the payload as an update fails.
    message[headerBytes.length] = 0xff
  }
  return message
}

// A sync "update" whose Yjs update continues text the receiver has never seen.
function foreignUpdateMessage () {
  const docA = new Y.Doc()
  const textA = docA.getText('source')
  textA.insert(0, 'content the server never received. ')
  const stateVectorAfterFirstInsert = Y.encodeStateVector(docA)
  textA.insert(textA.length, 'continuation that depends on it')
  const update = Y.encodeStateAsUpdate(docA, stateVectorAfterFirstInsert)
  docA.destroy()
  const encoder = encoding.createEncoder()
  encoding.writeVarUint(encoder, messageSync)
  encoding.writeVarUint(encoder, messageYjsUpdate)
  encoding.writeVarUint8Array(encoder, update)
  const message = encoding.toUint8Array(encoder)
  // Self-check: the message decodes as y-websocket would read it.
  const decoder = decoding.createDecoder(message)
  if (decoding.readVarUint(decoder) !== messageSync ||
      decoding.readVarUint(decoder) !== messageYjsUpdate ||
      decoding.readVarUint8Array(decoder).length !== update.length) {
    throw new Error('foreign update message does not round-trip')
  }
  return message
}

const opts = parseArgs(process.argv.slice(2))
const message = opts.mode === 'garbage'
  ? garbageMessage()
  : opts.mode === 'oversized'
    ? oversizedMessage(opts.size)
    : foreignUpdateMessage()

let done = false
let received = 0
let lastError = null

const ws = new WebSocket(opts.url, { maxPayload: 256 * 1024 * 1024 })

function report (result) {
  if (done) return
  done = true
  clearTimeout(timer)
  if (lastError !== null) result.error = lastError
  process.stdout.write(JSON.stringify(result) + '\n')
  process.exitCode = 0
  setTimeout(() => process.exit(0), 1000).unref()
}

const timer = setTimeout(() => {
  report({ closed: null, received })
  ws.terminate()
}, opts.timeout)

ws.on('open', () => {
  ws.send(message, { binary: true }, err => {
    if (err) lastError = err.message
  })
})
ws.on('message', () => { received++ })
ws.on('error', err => { lastError = err.message })
ws.on('close', (code, reason) => {
  report({ closed: code, reason: reason.toString(), received })
})
