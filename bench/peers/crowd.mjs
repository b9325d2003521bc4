#!/usr/bin/env node
// The crowd step of the peers benchmark: 10,000 WebSocket connections in one server process, on
// 1,000 documents (10 connections each), one of the 10 typing on every document at 2 edits a
// second (2,000 edits/s in all), against fermata serve on SQLite and on PostgreSQL and against
// y-websocket's reference server with its LevelDB persistence, under the very same load.
//
//   ulimit -n 65536 (or as high as `ulimit -Hn` allows); node crowd.mjs --fermata BIN --postgres URL
//
// BIN is fermata's release binary, URL an empty database on a durable PostgreSQL server for it
// (scripts/bench creates `fermata_crowd` beside the peers step's). The generator holds one socket
// per connection, so it needs an open-file limit above the connections (it checks, and says so);
// every server is started through `sh -c 'ulimit -n ...'` with the highest limit it may have.
//
// For each server, in turn, on a new process and 1,000 new documents: its resident memory with
// no connection; 1,000 connections, the typists, one a document; then all 10,000 (connected 200
// at a time, each batch synced before the next), idle; a timed typing window with all of them;
// the 9,000 others closed, a shorter window with the typists alone. The figures: the p50 and
// p99 of an edit's acknowledgement latency (from the typist's send to the moment another
// connection of its document, the document's observer, receives the update carrying it: the
// same definition for every server), the server's resident memory per idle connection
// ((RSS at 10,000 − RSS at 1,000) / 9,000, from /proc/PID/status), and the server's CPU
// (utime + stime from /proc/PID/stat) per 1,000 acknowledged edits. fermata's figures are
// recorded against the goals (p99 within 50 ms, 16 KiB a connection) and against y-websocket's
// (CPU no more than its own; p99 and memory without a goal). PostgreSQL's own processes are not
// in fermata/postgres's CPU, as LevelDB and SQLite, which run inside their server, are in theirs.
//
// FERMATA_BENCH_CROWD_DOCUMENTS (default 1000) sets the documents, FERMATA_BENCH_CROWD_SECONDS
// (default 20) the timed window with every connection, FERMATA_BENCH_CROWD_ROUNDS (default 1) the
// rounds: with more than one, each server runs once per round (interleaved), the figures are the
// medians, and each recorded figure carries the lowest and highest ratio of its rounds.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import * as Y from 'yjs'
import * as syncProtocol from 'y-protocols/sync'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import WebSocket from 'ws'
import {
  HERE, Process, argument as commandLine, cleanEnvironment, cpuMillis, fermataCommand, freePort, keepFolder,
  median, percentile, record, removeFolder, setting, sleep, version
} from './servers.mjs'

const argument = (name) => commandLine(name, 'crowd.mjs --fermata BIN --postgres URL')

const DOCUMENTS = setting('FERMATA_BENCH_CROWD_DOCUMENTS', 1000)
const PER_DOCUMENT = 10
const CONNECTIONS = DOCUMENTS * PER_DOCUMENT
/** Edits a second of each typist; they are spread evenly in time over all the typists. */
const TYPING_RATE = 2
const WINDOW_S = setting('FERMATA_BENCH_CROWD_SECONDS', 20)
/** The window with the typists alone: how the server's CPU for the same edits grows with the crowd. */
const TYPISTS_WINDOW_S = Math.max(2, Math.round(WINDOW_S / 2))
/** Untimed typing before each window, so that no figure holds a document's first edit. */
const WARM_UP_S = 2
const ROUNDS = setting('FERMATA_BENCH_CROWD_ROUNDS', 1)
/** Connections opened at once; the next batch starts once every one of them has synced. */
const BATCH = 200
/**
 * The connections come from this many loopback addresses (127.0.0.2 and up), as a crowd comes
 * from many: fermata lets one address hold at most half of its ordinary connections, and under
 * an open-file limit of 20,000 that half is below 10,000.
 */
const SOURCES = 10
/**
 * Every connection sends a WebSocket ping this often. A live y-websocket client renews its
 * presence every 15 s, and fermata drops a connection that sent nothing for 60 s; the pings keep
 * the idle crowd open, at less cost than presence, and go to every server alike.
 */
const KEEPALIVE_MS = 20000
/** How long the memory settles after connections open before it is read. */
const SETTLE_MS = 2000
/** CPU is read this long after the last acknowledgement (or the last edit sent, typists alone). */
const TAIL_MS = 250
/** How long anything (a batch's sync, the last acknowledgements) may take. */
const PATIENCE_MS = 60000
const GOAL_P99_MS = 50
const GOAL_BYTES_PER_CONNECTION = 16 * 1024
/** A refused or dropped connection fails the run past this share of the crowd. */
const TOLERATED_FAILURES = 0.01

const MESSAGE_SYNC = 0
const SYNC_STEP_1 = 0
const SYNC_STEP_2 = 1
const SYNC_UPDATE = 2
/** What an idle connection sends and answers: an empty document's state vector and update. */
const message = (write) => {
  const encoder = encoding.createEncoder()
  encoding.writeVarUint(encoder, MESSAGE_SYNC)
  write(encoder, new Y.Doc())
  return Buffer.from(encoding.toUint8Array(encoder))
}
const EMPTY_STEP_1 = message(syncProtocol.writeSyncStep1)
const EMPTY_STEP_2 = message(syncProtocol.writeSyncStep2)

/** The line the typist of document `d` appends with its `n`th edit: 20 bytes, unique in its document. */
const line = (d, n) => `doc ${String(d).padStart(4, '0')} edit ${String(n).padStart(5, '0')}\n`

const format = (n) => n.toLocaleString('en-US')
const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`

/** The server process's resident memory in bytes, from /proc/PID/status. */
function residentBytes (pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(status.match(/^VmRSS:\s+(\d+) kB$/m)[1]) * 1024
}

/** A process's soft limit on open files, from /proc/PID/limits. */
function openFileLimit (pid) {
  const limits = readFileSync(`/proc/${pid}/limits`, 'utf8')
  const soft = limits.match(/^Max open files\s+(\S+)/m)[1]
  return soft === 'unlimited' ? Infinity : Number(soft)
}

/** Starts `command ARGS` with the highest open-file limit it may have, 65,536 or the hard limit. */
const RAISED = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"'
const raised = (name, command, args, env) => new Process(name, '/bin/sh', ['-c', RAISED, 'sh', command, ...args], env)

/** What went wrong with the crowd's connections, counted by kind, for the report. */
class Trouble {
  constructor () { this.counts = new Map() }
  add (what) { this.counts.set(what, (this.counts.get(what) || 0) + 1) }
  get total () { let n = 0; for (const count of this.counts.values()) n += count; return n }
  toString () { return [...this.counts].map(([what, n]) => `${n} x ${what}`).join('; ') }
}

/**
 * One connection of the crowd: a raw socket that does the sync handshake (its empty state vector
 * out, the server's step 1 answered with an empty step 2, the server's step 2 awaited) and then
 * holds. The typist keeps a yjs document to make real text updates; the observer searches what
 * it receives for the lines its document's typist is waiting on, without applying anything; the
 * others read and drop everything.
 */
class Connection {
  constructor (url, source, document, role, trouble) {
    this.document = document
    this.role = role
    this.closing = false
    this.synced = false
    this.socket = new WebSocket(url, { perMessageDeflate: false, localAddress: source, handshakeTimeout: PATIENCE_MS })
    this.socket.binaryType = 'nodebuffer'
    this.ready = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.closed = new Promise((resolve) => this.socket.on('close', (code, reason) => {
      // A socket that failed is closed after its error, which was counted already.
      if (!this.closing && !this.errored) {
        const what = `closed by the server: ${code} ${reason}`.trimEnd()
        trouble.add(what)
        this.reject(new Error(what))
      }
      resolve()
    }))
    this.socket.on('error', (error) => {
      this.errored = true
      trouble.add(error.message)
      this.reject(error)
    })
    this.socket.on('open', () => {
      if (role === 'typist') {
        const encoder = encoding.createEncoder()
        encoding.writeVarUint(encoder, MESSAGE_SYNC)
        syncProtocol.writeSyncStep1(encoder, document.doc)
        this.socket.send(encoding.toUint8Array(encoder))
      } else {
        this.socket.send(EMPTY_STEP_1)
      }
    })
    this.socket.on('message', role === 'typist' ? (data) => this.typistReceives(data) : (data) => this.receive(data))
  }

  receive (data) {
    // Sync messages only: awareness (1) and anything else is dropped unread.
    if (data[0] !== MESSAGE_SYNC) return
    const kind = data[1]
    if (kind === SYNC_STEP_1) {
      this.socket.send(EMPTY_STEP_2)
    } else if (!this.synced) {
      if (kind === SYNC_STEP_2) {
        this.synced = true
        this.resolve()
      }
    } else if (this.role === 'observer' && (kind === SYNC_UPDATE || kind === SYNC_STEP_2)) {
      this.document.seen(data)
    }
  }

  /** The typist syncs its document as a client would, then ignores what comes back. */
  typistReceives (data) {
    if (this.synced || data[0] !== MESSAGE_SYNC) return
    const decoder = decoding.createDecoder(data)
    decoding.readVarUint(decoder)
    const encoder = encoding.createEncoder()
    encoding.writeVarUint(encoder, MESSAGE_SYNC)
    const kind = syncProtocol.readSyncMessage(decoder, encoder, this.document.doc, this)
    if (encoding.length(encoder) > 1) this.socket.send(encoding.toUint8Array(encoder))
    if (kind === syncProtocol.messageYjsSyncStep2) {
      this.synced = true
      this.resolve()
    }
  }

  close () {
    this.closing = true
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) {
      this.socket.close(1000)
    }
    return this.closed
  }
}

/** One document of the crowd: its typist's yjs document and the edits its observer waits for. */
class Document {
  constructor (index, url) {
    this.index = index
    this.url = url
    this.doc = new Y.Doc()
    this.text = this.doc.getText('source')
    this.edits = 0
    /** Edits sent and not yet seen by the observer: { marker, sent, timed }. */
    this.pending = []
    this.typist = null
    this.observer = null
    this.doc.on('update', (update, origin) => {
      if (origin === this.typist) return
      const encoder = encoding.createEncoder()
      encoding.writeVarUint(encoder, MESSAGE_SYNC)
      syncProtocol.writeUpdate(encoder, update)
      this.typist.socket.send(encoding.toUint8Array(encoder))
    })
  }

  /** The typist appends its next line; `tally` counts it, and its latency once it is seen. */
  type (tally) {
    const text = line(this.index, this.edits++)
    const sent = performance.now()
    if (tally.watched) this.pending.push({ marker: Buffer.from(text), sent, tally })
    tally.sent++
    this.text.insert(this.text.length, text)
  }

  /** The observer received `data`: every waiting edit whose line it carries is acknowledged. */
  seen (data) {
    const now = performance.now()
    for (let i = 0; i < this.pending.length;) {
      const edit = this.pending[i]
      if (data.indexOf(edit.marker) >= 0) {
        edit.tally.latencies.push(now - edit.sent)
        this.pending.splice(i, 1)
      } else {
        i++
      }
    }
  }
}

/** Edits sent, and for a watched window (with observers) their latencies as they are seen. */
const newTally = (watched) => ({ watched, sent: 0, latencies: [] })

/**
 * Types for `seconds`: every typist TYPING_RATE edits a second, the typists taking turns at even
 * intervals (document 0, 1, ... then 0 again), open loop: an edit goes at its time whatever
 * became of the previous ones.
 */
function typeFor (documents, seconds, tally) {
  const interval = 1000 / (TYPING_RATE * documents.length)
  const total = Math.round(seconds * TYPING_RATE) * documents.length
  const start = performance.now()
  let i = 0
  return new Promise((resolve) => {
    const tick = () => {
      const now = performance.now()
      while (i < total && start + i * interval <= now) documents[i++ % documents.length].type(tally)
      if (i >= total) resolve()
      else setTimeout(tick, Math.max(0, start + i * interval - performance.now()))
    }
    tick()
  })
}

/** Opens `connections` BATCH at a time, each batch synced before the next. */
async function connectAll (connections) {
  for (let at = 0; at < connections.length; at += BATCH) {
    const batch = connections.slice(at, at + BATCH).map((make) => make())
    const outcomes = await Promise.allSettled(batch.map((connection) => within(connection.ready, 'a connection to sync')))
    // A connection that failed is kept out of the crowd; its kind of failure is in the trouble.
    for (const [n, outcome] of outcomes.entries()) {
      if (outcome.status === 'rejected') batch[n].failed = true
    }
  }
}

const within = (promise, what) => {
  let timer
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up waiting for ${what}`)), PATIENCE_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Pings every open connection once every KEEPALIVE_MS, a slice of them each second. */
function keepAlive (connections) {
  let next = 0
  const timer = setInterval(() => {
    const slice = Math.ceil(connections.length * 1000 / KEEPALIVE_MS)
    for (let n = 0; n < slice && connections.length > 0; n++) {
      const connection = connections[next++ % connections.length]
      if (connection.socket.readyState === WebSocket.OPEN) connection.socket.ping()
    }
  }, 1000)
  return () => clearInterval(timer)
}

/**
 * The crowd against one server, once: `run.server` is running, `run.urls` are its documents'
 * socket URLs (every connection of a document uses the same), and `run.commits()`, where the
 * server has it, tells its commits so far. Returns the figures.
 */
async function crowd (run) {
  const { server, urls } = run
  const pid = server.child.pid
  const trouble = new Trouble()
  const documents = urls.map((url, n) => new Document(n, url))
  const all = []
  const opener = (document, k) => () => {
    const role = k === 0 ? 'typist' : k === 1 ? 'observer' : 'idle'
    const source = `127.0.0.${2 + (document.index * PER_DOCUMENT + k) % SOURCES}`
    const connection = new Connection(document.url, source, document, role, trouble)
    if (role === 'typist') document.typist = connection
    if (role === 'observer') document.observer = connection
    all.push(connection)
    return connection
  }
  const figures = { trouble }
  const stopKeepAlive = keepAlive(all)
  try {
    await sleep(SETTLE_MS)
    figures.rssIdle = residentBytes(pid)

    let started = performance.now()
    await connectAll(documents.map((document) => opener(document, 0)))
    figures.connect1k = performance.now() - started
    await sleep(SETTLE_MS)
    figures.rss1k = residentBytes(pid)

    started = performance.now()
    const rest = []
    for (let k = 1; k < PER_DOCUMENT; k++) rest.push(...documents.map((document) => opener(document, k)))
    await connectAll(rest)
    figures.connectAll = figures.connect1k + performance.now() - started
    const failed = all.filter((connection) => connection.failed).length
    figures.failedToConnect = failed
    if (failed > CONNECTIONS * TOLERATED_FAILURES) {
      throw new Error(`${failed} of ${CONNECTIONS} connections failed: ${trouble}`)
    }
    await sleep(SETTLE_MS)
    figures.rss10k = residentBytes(pid)

    // Every connection, timed: edits whose typist or observer failed are left out.
    const live = documents.filter((document) => !document.typist.failed && !document.observer.failed)
    await typeFor(live, WARM_UP_S, newTally(true))
    const tally = newTally(true)
    const commits = await run.commits()
    const cpu = cpuMillis(pid)
    const harness = process.cpuUsage()
    started = performance.now()
    await typeFor(live, WINDOW_S, tally)
    const sendingEnded = performance.now()
    // Wait for the last acknowledgements; an edit never seen counts at the time given up.
    while (tally.latencies.length < tally.sent && performance.now() - sendingEnded < PATIENCE_MS) await sleep(20)
    await sleep(TAIL_MS)
    const ended = performance.now()
    figures.cpu10k = cpuMillis(pid) - cpu
    const committed = await run.commits()
    if (committed) {
      figures.commits = committed.count - commits.count
      figures.commitMs = (committed.seconds - commits.seconds) * 1000 / figures.commits
    }
    const { user, system } = process.cpuUsage(harness)
    figures.harnessCpu = (user + system) / 1000 / (ended - started)
    figures.wall10k = ended - started
    figures.sent = tally.sent
    figures.seen = tally.latencies.length
    for (const document of live) {
      for (const edit of document.pending) {
        if (edit.tally === tally) tally.latencies.push(ended - edit.sent)
      }
      document.pending = []
    }
    const sorted = tally.latencies.sort((a, b) => a - b)
    figures.p50 = percentile(sorted, 50)
    figures.p99 = percentile(sorted, 99)
    figures.max = sorted[sorted.length - 1]
    figures.overGoal = sorted.filter((latency) => latency > GOAL_P99_MS).length / sorted.length
    figures.cpuPer1000 = figures.cpu10k / (figures.seen / 1000)
    figures.lengths = live.map((document) => [document.index, document.text.length])

    // The typists alone: the other 9,000 close, the memory and CPU settle, and the same typing.
    const typists = new Set(documents.map((document) => document.typist))
    await Promise.all(all.filter((connection) => !typists.has(connection)).map((connection) => connection.close()))
    all.splice(0, all.length, ...typists)
    await sleep(SETTLE_MS)
    figures.rssAfter = residentBytes(pid)
    await typeFor(live, WARM_UP_S / 2, newTally(false))
    const alone = newTally(false)
    const cpuAlone = cpuMillis(pid)
    await typeFor(live, TYPISTS_WINDOW_S, alone)
    await sleep(TAIL_MS)
    figures.cpu1k = cpuMillis(pid) - cpuAlone
    figures.cpuPer1000Alone = figures.cpu1k / (alone.sent / 1000)
    figures.sentAlone = alone.sent
    return figures
  } finally {
    stopKeepAlive()
    await Promise.all(all.map((connection) => connection.close()))
  }
}

/**
 * fermata serve on one backend, set up once: a user with an API token, a repository, and a
 * configuration for a crowd from loopback (no cap per address below the crowd, and 10
 * connections of one member to a document: the crowd is one member). Each run starts the server
 * again and creates the run's documents.
 */
async function fermata (bin, backend, folder, postgresUrl) {
  const dataDir = path.join(folder, `fermata-${backend}`)
  const storage = backend === 'postgres' ? ['--storage', 'postgres'] : []
  const env = cleanEnvironment(backend === 'postgres' ? { FERMATA_DATABASE_URL: postgresUrl } : {})
  const common = ['--data-dir', dataDir, ...storage]
  await fermataCommand(bin, ['user', 'add', 'bench', '--password-stdin', ...common], env, 'a long enough password\n')
  const token = await fermataCommand(bin, ['token', 'create', '--user', 'bench', ...common], env, '')
  const config = path.join(folder, `fermata-${backend}.toml`)
  writeFileSync(config, [
    '# The crowd benchmark: every connection comes from loopback, and one member holds all 10',
    '# connections of a document.',
    '[http]',
    `max_connections_per_peer = ${CONNECTIONS + 2000}`,
    '[documents]',
    `max_connections_per_member = ${PER_DOCUMENT}`,
    ''
  ].join('\n'))
  let repository = false
  return {
    name: `fermata/${backend}`,
    async start (round) {
      const port = await freePort()
      const server = raised(`fermata/${backend}`, bin,
        ['serve', '--config', config, '--listen', `127.0.0.1:${port}`, ...common], env)
      const base = `http://127.0.0.1:${port}`
      await server.ready(`${base}/readyz`)
      const limit = openFileLimit(server.child.pid)
      // fermata takes 256 files for itself, 32 connections as its health reserve.
      if (limit - 256 - 32 < CONNECTIONS + 100) {
        await server.stop()
        throw new Error(`fermata/${backend} may open only ${limit} files, too few for ${CONNECTIONS} connections`)
      }
      const api = async (method, route, body) => {
        const answer = await fetch(`${base}${route}`, {
          method,
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body)
        })
        const json = await answer.json()
        if (!answer.ok) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(json)}`)
        return json
      }
      if (!repository) {
        await api('POST', '/api/v1/repositories', { name: 'bench/crowd' })
        repository = true
      }
      const created = performance.now()
      const ids = new Array(DOCUMENTS)
      let next = 0
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < DOCUMENTS) {
          const n = next++
          ids[n] = (await api('POST', '/api/v1/documents', { repository: 'bench/crowd', title: `Crowd ${round}.${n}` })).id
        }
      }))
      const setup = `${format(DOCUMENTS)} documents created in ${((performance.now() - created) / 1000).toFixed(1)} s`
      return {
        server,
        setup,
        urls: ids.map((id) => `ws://127.0.0.1:${port}/sync/${id}?token=${token}`),
        // What fermata acknowledged is committed: the stored documents hold every edit.
        async check (lengths) {
          for (const [document, length] of lengths.slice(0, 5)) {
            const stored = await api('GET', `/api/v1/documents/${ids[document]}`)
            if (stored.text.length < length) {
              throw new Error(`fermata/${backend} stored ${stored.text.length} characters of document ${document}, not ${length}`)
            }
          }
        },
        // Its commits so far and their time in all, from /metrics: where an acknowledgement waits.
        async commits () {
          const metrics = await (await fetch(`${base}/metrics`)).text()
          const value = (name) => Number((metrics.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1])
          return {
            count: value('fermata_document_commit_duration_seconds_count'),
            seconds: value('fermata_document_commit_duration_seconds_sum')
          }
        },
        // Refused or dropped connections, as fermata counts them.
        async limited () {
          const metrics = await (await fetch(`${base}/metrics`)).text()
          return metrics.split('\n').filter((row) => row.startsWith('fermata_limited_total') && !/ 0$/.test(row)).join(', ')
        }
      }
    }
  }
}

/** y-websocket's reference server with its LevelDB persistence, its data kept across rounds. */
function yWebsocket (folder) {
  return {
    name: 'y-websocket',
    async start (round) {
      const port = await freePort()
      const server = raised('y-websocket', process.execPath, [path.join(HERE, 'node_modules/y-websocket/bin/server.cjs')],
        cleanEnvironment({ YPERSISTENCE: path.join(folder, 'y-websocket'), HOST: '127.0.0.1', PORT: String(port) }))
      await server.ready(`http://127.0.0.1:${port}/`)
      const limit = openFileLimit(server.child.pid)
      if (limit < CONNECTIONS + 100) {
        await server.stop()
        throw new Error(`y-websocket may open only ${limit} files, too few for ${CONNECTIONS} connections`)
      }
      return {
        server,
        setup: '',
        urls: Array.from({ length: DOCUMENTS }, (_, n) => `ws://127.0.0.1:${port}/crowd-${round}-${n}`),
        async check () {},
        async commits () { return null },
        async limited () { return '' }
      }
    }
  }
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`

function report (name, f) {
  const perConnection = (f.rss10k - f.rss1k) / (CONNECTIONS - DOCUMENTS)
  const pad = ' '.repeat(name.length + 4)
  console.log(`  ${name}: ${format(CONNECTIONS)} connected in ${seconds(f.connectAll)} (the first ${format(DOCUMENTS)} in ` +
    `${seconds(f.connect1k)}); RSS ${mib(f.rssIdle)} with none, ${mib(f.rss1k)} at ${format(DOCUMENTS)}, ` +
    `${mib(f.rss10k)} at ${format(CONNECTIONS)}: ${format(Math.round(perConnection))} bytes a connection ` +
    `(${mib(f.rssAfter)} once the crowd left)`)
  console.log(`${pad}${format(CONNECTIONS)} connections: ${format(f.sent)} edits in ${seconds(f.wall10k)}, ${format(f.seen)} seen; ` +
    `p50 ${f.p50.toFixed(2)} ms, p99 ${f.p99.toFixed(2)} ms, max ${f.max.toFixed(1)} ms ` +
    `(${(f.overGoal * 100).toFixed(1)}% over ${GOAL_P99_MS} ms); server CPU ` +
    `${(f.cpu10k / f.wall10k * 100).toFixed(0)}% of a core, ${f.cpuPer1000.toFixed(1)} ms per 1,000 edits; ` +
    `harness CPU ${(f.harnessCpu * 100).toFixed(0)}%`)
  if (f.commits) {
    console.log(`${pad}${format(f.commits)} commits in that window, ${(f.seen / f.commits).toFixed(2)} edits each, ` +
      `${f.commitMs.toFixed(2)} ms each on average`)
  }
  console.log(`${pad}${format(DOCUMENTS)} typists alone: ${format(f.sentAlone)} edits, server CPU ` +
    `${f.cpuPer1000Alone.toFixed(1)} ms per 1,000 edits sent (with the crowd: ${(f.cpuPer1000 / f.cpuPer1000Alone).toFixed(2)}x as much)`)
  if (f.trouble.total > 0 || f.limited) {
    console.log(`${pad}trouble: ${f.failedToConnect} connections failed; ${f.trouble || 'no socket errors'}` +
      `${f.limited ? `; ${f.limited}` : ''}`)
  }
}

async function main () {
  const bin = argument('--fermata')
  const postgresUrl = argument('--postgres')
  const own = openFileLimit('self')
  if (own < CONNECTIONS + 500) {
    process.stderr.write(`crowd.mjs: this process may open only ${own} files, too few for ${CONNECTIONS} connections; ` +
      'raise the limit first (ulimit -n 65536, or as high as `ulimit -Hn` allows)\n')
    process.exit(2)
  }
  const folder = mkdtempSync(path.join(tmpdir(), 'fermata-crowd-'))
  keepFolder(folder)
  const begun = performance.now()
  let running = null
  try {
    const ywsVersion = version('y-websocket')
    const servers = [
      await fermata(bin, 'sqlite', folder, postgresUrl),
      await fermata(bin, 'postgres', folder, postgresUrl),
      yWebsocket(folder)
    ]
    console.log(`crowd: ${format(CONNECTIONS)} connections on ${format(DOCUMENTS)} documents (${PER_DOCUMENT} each, ` +
      `connected ${BATCH} at a time), one typist a document at ${TYPING_RATE} edits/s (${format(DOCUMENTS * TYPING_RATE)} ` +
      `edits/s) of ${line(0, 0).length} bytes, for ${WINDOW_S} s after ${WARM_UP_S} s untimed; then the typists alone for ` +
      `${TYPISTS_WINDOW_S} s; ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}, a new server process and new documents each`)
    console.log(`  fermata serve (release binary; a config raising the per-address and per-member connection caps) ` +
      `on SQLite and on durable PostgreSQL; y-websocket ${ywsVersion} bin/server.cjs with YPERSISTENCE (LevelDB)`)
    const results = new Map(servers.map((s) => [s.name, []]))
    for (let round = 1; round <= ROUNDS; round++) {
      for (const server of servers) {
        const run = await server.start(round)
        running = run
        if (run.setup) console.log(`  ${server.name}: ${run.setup}`)
        // What the server logs from now on: its warnings and errors under the load are reported.
        const logged = run.server.output.length
        const figures = await crowd(run)
        await run.check(figures.lengths)
        figures.limited = await run.limited()
        const stopping = run.server.output.length
        const exit = await run.server.stop()
        running = null
        if (server.name.startsWith('fermata') && exit.code !== 0) {
          throw new Error(`${server.name} did not stop cleanly (${JSON.stringify(exit)}):\n${run.server.text()}`)
        }
        const warnings = (from, to) => Buffer.concat(run.server.output.slice(from, to)).toString().split('\n')
          .filter((row) => /\b(ERROR|WARN)\b/.test(row))
        results.get(server.name).push(figures)
        report(ROUNDS > 1 ? `${server.name} round ${round}` : server.name, figures)
        for (const [when, rows] of [['under the load', warnings(logged, stopping)], ['while stopping', warnings(stopping)]]) {
          if (rows.length === 0) continue
          console.log(`    ${format(rows.length)} warnings or errors logged ${when}${rows.length > 3 ? ', the first 3' : ''}:`)
          for (const row of rows.slice(0, 3)) console.log(`      ${row}`)
        }
      }
    }

    const perConnection = (f) => (f.rss10k - f.rss1k) / (CONNECTIONS - DOCUMENTS)
    const theirs = results.get('y-websocket')
    const shape = `${format(CONNECTIONS)} connections, ${format(DOCUMENTS * TYPING_RATE)} edits/s`
    const description = `y-websocket ${ywsVersion}, LevelDB`
    for (const backend of ['sqlite', 'postgres']) {
      const ours = results.get(`fermata/${backend}`)
      // Each figure: the median over the rounds, and with more than one the spread of its ratios.
      const figure = (name, unit, measure, floor, floorName, goal) => {
        const measured = median(ours.map(measure))
        const floors = ours.map((_, n) => floor(n))
        const ratios = ours.map((run, n) => measure(run) / floors[n])
        const spread = ROUNDS > 1 ? [Math.min(...ratios), Math.max(...ratios)] : undefined
        const floorValue = median(floors)
        record(`crowd/${backend}`, name, unit, measured, floorValue, floorName, goal, spread)
        return measured / floorValue
      }
      const p99 = figure(`${shape}: p99 acknowledgement`, 'us', (f) => f.p99 * 1000,
        () => GOAL_P99_MS * 1000, `the goal's ${GOAL_P99_MS} ms`, '<= 1')
      const p99Theirs = figure(`${shape} vs y-websocket: p99 acknowledgement`, 'us', (f) => f.p99 * 1000,
        (n) => theirs[n].p99 * 1000, `${description}, p99`, null)
      const memory = figure(`RSS per idle connection, ${format(DOCUMENTS)} to ${format(CONNECTIONS)}`, 'B', perConnection,
        () => GOAL_BYTES_PER_CONNECTION, '16 KiB', '<= 1')
      const memoryTheirs = figure(`RSS per idle connection, ${format(DOCUMENTS)} to ${format(CONNECTIONS)} vs y-websocket`, 'B',
        perConnection, (n) => perConnection(theirs[n]), `${description}, per connection`, null)
      const cpu = figure(`${shape} vs y-websocket: server CPU per 1,000 acknowledged edits`, 'ms', (f) => f.cpuPer1000,
        (n) => theirs[n].cpuPer1000, `${description}, CPU per 1,000 edits`, '<= 1')
      console.log(`  fermata/${backend}: p99 ${p99.toFixed(2)}x the goal's ${GOAL_P99_MS} ms, ${p99Theirs.toFixed(2)}x y-websocket's; ` +
        `memory a connection ${memory.toFixed(2)}x 16 KiB, ${memoryTheirs.toFixed(2)}x y-websocket's; ` +
        `CPU per edit ${cpu.toFixed(2)}x y-websocket's`)
    }
    console.log(`  crowd step: ${seconds(performance.now() - begun)} in all`)
  } catch (error) {
    if (running) {
      await running.server.stop()
      process.stderr.write(`--- ${running.server.name} output ---\n${running.server.text()}\n`)
    }
    removeFolder(folder)
    throw error
  }
  removeFolder(folder)
}

main().catch((error) => {
  process.stderr.write(`crowd.mjs: ${error.stack || error}\n`)
  process.exit(1)
})
