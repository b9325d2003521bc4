// The one client harness of the peers benchmark: the same yjs documents, the same y-protocols
// sync messages and the same ws sockets against every server; only the framing differs where a
// server's protocol does (Hocuspocus prefixes every message with the document's name and wants a
// token message first).
//
// closedLoop() connects W writers and one observer to one document. After the initial sync and
// a few untimed edits each, every writer makes E edits in a closed loop: it appends a line to the
// shared Y.Text `source`, sends the update, and makes its next edit only once the observer's
// document holds the previous one. An edit's latency runs from the writer's send to the
// observer's receipt; the throughput is all timed edits over the wall time from the start to the
// last writer's last edit seen.

import * as Y from 'yjs'
import * as syncProtocol from 'y-protocols/sync'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import WebSocket from 'ws'

const MESSAGE_SYNC = 0
const MESSAGE_AUTH = 2
// Hocuspocus's own: the message type of the reply that carries its sync step 1, and the auth
// message's subtype for a token. Its other extra messages (the per-update sync status, the
// "authenticated" answer) are not read, so that every server is measured the same way: by what
// the observer receives.
const HOCUSPOCUS_SYNC_REPLY = 4
const HOCUSPOCUS_AUTH_TOKEN = 0

/** How long any one step may take before the run fails. */
const PATIENCE_MS = 60000

/** The text writer `writer` appends with its `n`th edit: 20 bytes, as the rooms benchmark. */
export const edit = (writer, n) =>
  `client ${String(writer).padStart(2, '0')} edit ${String(n).padStart(4, '0')}\n`

/** The framings: y-websocket's (fermata and the reference server: one document per socket, chosen
 * by the URL) and Hocuspocus's (the document's name before every message). */
export const FRAMINGS = ['y-websocket', 'hocuspocus']

const within = (promise, what) => {
  let timer
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up waiting for ${what}`)), PATIENCE_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** One client: a yjs document kept in sync with the server over one socket. */
class Client {
  constructor (url, room, framing, name) {
    // Hocuspocus names the document in every message, so one socket can carry several.
    this.room = framing === 'hocuspocus' ? room : null
    this.name = name
    this.doc = new Y.Doc()
    this.text = this.doc.getText('source')
    this.socket = new WebSocket(url, { perMessageDeflate: false })
    this.socket.binaryType = 'nodebuffer'
    this.synced = new Promise((resolve, reject) => {
      this.socket.on('open', () => {
        if (this.room !== null) {
          // Hocuspocus queues everything else until a token message (empty: it checks none).
          const encoder = this.start()
          encoding.writeVarUint(encoder, MESSAGE_AUTH)
          encoding.writeVarUint(encoder, HOCUSPOCUS_AUTH_TOKEN)
          encoding.writeVarString(encoder, '')
          this.send(encoder)
        }
        const encoder = this.start()
        encoding.writeVarUint(encoder, MESSAGE_SYNC)
        syncProtocol.writeSyncStep1(encoder, this.doc)
        this.send(encoder)
      })
      this.socket.on('error', reject)
      this.socket.on('close', (code, reason) => {
        if (!this.closing) reject(new Error(`${name}: the server closed the connection (${code} ${reason})`))
      })
      this.socket.on('message', (data) => {
        if (this.receive(new Uint8Array(data))) resolve()
      })
    })
    // Local edits go to the server as they happen; what came from the server does not go back.
    this.doc.on('update', (update, origin) => {
      if (origin === this) return
      const encoder = this.start()
      encoding.writeVarUint(encoder, MESSAGE_SYNC)
      syncProtocol.writeUpdate(encoder, update)
      this.send(encoder)
    })
  }

  /** A new message: empty, or with the document's name first where the framing wants it. */
  start () {
    const encoder = encoding.createEncoder()
    if (this.room !== null) encoding.writeVarString(encoder, this.room)
    return encoder
  }

  send (encoder) {
    this.socket.send(encoding.toUint8Array(encoder))
  }

  /** Handles one message; true when it was the server's sync step 2 (the initial sync). */
  receive (bytes) {
    const decoder = decoding.createDecoder(bytes)
    if (this.room !== null) decoding.readVarString(decoder)
    const type = decoding.readVarUint(decoder)
    if (type !== MESSAGE_SYNC && type !== HOCUSPOCUS_SYNC_REPLY) return false
    const encoder = this.start()
    encoding.writeVarUint(encoder, MESSAGE_SYNC)
    const empty = encoding.length(encoder)
    const kind = syncProtocol.readSyncMessage(decoder, encoder, this.doc, this)
    // A sync step 1 from the server is answered with step 2; updates and step 2 need no answer.
    if (encoding.length(encoder) > empty) this.send(encoder)
    return kind === syncProtocol.messageYjsSyncStep2
  }

  close () {
    this.closing = true
    this.socket.close()
  }
}

/**
 * Runs the closed loop against `url` (the document's socket URL; for Hocuspocus the server's,
 * with `room` the document's name; the observer's is `observerUrl` where it differs) and returns every timed edit's latency in milliseconds, the
 * wall time in milliseconds, the length of the text all the edits make, and the share of one
 * core the harness itself used meanwhile (the clients share its one event loop).
 */
export async function closedLoop ({ url, observerUrl = url, room, framing, writers, edits, warmUp }) {
  if (!FRAMINGS.includes(framing)) throw new Error(`no framing ${framing}`)
  const observer = new Client(observerUrl, room, framing, 'observer')
  const clients = Array.from({ length: writers }, (_, n) => new Client(url, room, framing, `writer ${n}`))
  const everyone = [observer, ...clients]
  try {
    await within(Promise.all(everyone.map((client) => client.synced)), 'the clients to sync')

    // Each writer waits for the observer to hold its edit: the observer's clock for the writer
    // reaching the writer's own.
    const waiting = new Map()
    observer.doc.on('update', () => {
      for (const [id, wait] of waiting) {
        if (Y.getState(observer.doc.store, id) >= wait.clock) {
          waiting.delete(id)
          wait.resolve(performance.now())
        }
      }
    })
    const one = (client, text) => {
      const id = client.doc.clientID
      const seen = new Promise((resolve) => {
        const sent = performance.now()
        client.text.insert(client.text.length, text)
        waiting.set(id, { clock: Y.getState(client.doc.store, id), resolve: (at) => resolve(at - sent) })
      })
      return within(seen, `the observer to see an edit of ${client.name}`)
    }

    await Promise.all(clients.map(async (client, n) => {
      for (let i = 0; i < warmUp; i++) await one(client, edit(n, i))
    }))
    const latencies = []
    const cpu = process.cpuUsage()
    const started = performance.now()
    await Promise.all(clients.map(async (client, n) => {
      for (let i = warmUp; i < warmUp + edits; i++) latencies.push(await one(client, edit(n, i)))
    }))
    const wall = performance.now() - started
    const { user, system } = process.cpuUsage(cpu)

    const expected = clients.reduce(
      (sum, _, n) => sum + Array.from({ length: warmUp + edits }, (_, i) => edit(n, i).length).reduce((a, b) => a + b, 0),
      0
    )
    if (observer.text.length !== expected) {
      throw new Error(`the observer holds ${observer.text.length} characters, not ${expected}`)
    }
    return { latencies, wall, length: expected, harnessCpu: (user + system) / 1000 / wall }
  } finally {
    for (const client of everyone) client.close()
  }
}
