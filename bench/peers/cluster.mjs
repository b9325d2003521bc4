#!/usr/bin/env node
// The cluster step of the peers benchmark: what scaling `fermata serve` out buys. The same closed
// loop runs against a cluster of 1, 2 and 3 members on one durable PostgreSQL server, every
// member capped at the same CPU quota, so that a member's share of a core is what is scaled, not
// whatever the machine has left.
//
//   node cluster.mjs --fermata BIN --pg-bin DIR --postgres URL
//
// BIN is fermata's release binary; DIR the folder of PostgreSQL's client binaries (its `psql`
// runs every statement below); URL an existing database on a durable PostgreSQL server, which
// this step connects to only to create and drop its own: a new `fermata_cluster_<N>` for each
// cluster (dropped first if an interrupted run left it, dropped again once the cluster stopped).
// scripts/bench passes its throwaway server's `postgres` database.
//
// Each member runs in a cgroup of its own with the CPU quota FERMATA_BENCH_CLUSTER_MILLICORES
// (thousandths of a core, default 125: cgroup v2 `cpu.max` "2500 20000", or cgroup v1
// `cpu.cfs_quota_us` 2500 in a `cpu.cfs_period_us` of 20000 where the cpu controller is mounted
// there), the step's own cgroups made under /sys/fs/cgroup and removed at the end, also when it
// fails or is interrupted. Writing them takes root; when it cannot, the step fails and says so
// rather than measure unbounded members. The quota keeps fermata the bottleneck: an acknowledged
// update costs a member about 0.23 ms of CPU, PostgreSQL about 0.55 ms (its flushes and
// statements) and this generator 0.1 to 0.2 ms, so three members at an eighth of a core make
// about 1,600 updates a second with 1.5 of a 2-core machine's cores busy; at 0.3 of a core each
// they would ask PostgreSQL alone for more than two cores, and measure PostgreSQL. The report
// prints what each member, PostgreSQL, the generator and the rest of the machine used in each
// window, and how often each member was throttled, so that a run where anything else ran short
// shows it.
//
// For N = 1, 2, 3, each on a new database: the members start (the `[cluster]` table, default
// lease timings, one shared data folder for the key file), and the step waits until every shard
// is held, every member holds some and the placement has not changed for a few seconds (read
// from the database: the live shard leases, their holders' member leases, and the addresses the
// members announced in cluster_members). An admin user and an API token come from the CLI, and
// FERMATA_BENCH_CLUSTER_DOCUMENTS documents (default 64) are created through the members in turn,
// each in a shard of the member it was created through. Each document gets a writer (a yjs
// document appending 20-byte lines to the Y.Text `source`) and an observer (a raw socket that
// syncs and then searches each update it receives for the line its writer is waiting on), both
// connected to the member that writes the document, looked up in the database (channels.shard,
// the shard's live lease holder, that member's announced address). Closed loop: a writer sends
// its next line as soon as the observer received the previous one. After 3 s untimed, a window
// of FERMATA_BENCH_CLUSTER_SECONDS (default 15): the acknowledged updates a second (every
// document's, from the writer's send to the observer's receipt, counted when received in the
// window), their p50 and p99, the clients served, and the members' CPU (utime + stime from
// /proc/PID/stat, all threads) per 1,000 acknowledged updates. The stored text of a few
// documents is checked to hold every acknowledged line.
//
// Then, on the 3-member cluster, forwarding: on FERMATA_BENCH_CLUSTER_FORWARDED documents
// (default 16) the same closed loop with the writer connected to a member that does not write
// the document (which forwards its frames to the one that does) against the writer connected to
// the one that does, the observer always there; windows of half the length, direct and forwarded
// taking turns twice (the members' fermata_forwarded_requests_total must count every forwarded
// writer). Its p50 and p99 against the direct ones'.
//
// Recorded (group `cluster`): the updates a second of 2 and of 3 members against 1 (goal for 3:
// at least 2.5x), the members' CPU per 1,000 updates of 2 and of 3 against 1 (goal: at most
// 1.2x, spreading the documents should not make an update dearer), and the forwarded p50 and p99
// against the direct ones (no goal). FERMATA_BENCH_CLUSTER_ROUNDS (default 1) repeats the whole
// step: the figures are then the medians, and each carries the lowest and highest ratio of its
// rounds.

import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import path from 'node:path'
import * as Y from 'yjs'
import * as syncProtocol from 'y-protocols/sync'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import WebSocket from 'ws'
import {
  Process, argument as commandLine, cleanEnvironment, cpuMillis, fermataCommand, freePort, keepFolder, median,
  onInterrupt, percentile, procStat, record, removeFolder, setting, sleep, ticksToMillis
} from './servers.mjs'

const argument = (name) => commandLine(name, 'cluster.mjs --fermata BIN --pg-bin DIR --postgres URL')

const SIZES = [1, 2, 3]
const DOCUMENTS = setting('FERMATA_BENCH_CLUSTER_DOCUMENTS', 64)
const WINDOW_S = setting('FERMATA_BENCH_CLUSTER_SECONDS', 15)
const ROUNDS = setting('FERMATA_BENCH_CLUSTER_ROUNDS', 1)
const MILLICORES = setting('FERMATA_BENCH_CLUSTER_MILLICORES', 125)
const FORWARDED = Math.min(DOCUMENTS, setting('FERMATA_BENCH_CLUSTER_FORWARDED', 16))
/** The cluster the forwarding is measured on. */
const FORWARDING_SIZE = 3
/** Direct and forwarded take turns this many times, each window half the scaling one. */
const FORWARDING_TURNS = 2
const FORWARDING_WINDOW_S = Math.max(2, Math.round(WINDOW_S / 2))
/** Untimed closed loop before every window, so that no figure holds a room's first commits. */
const WARM_UP_S = 3
/**
 * The cgroup CPU period; the quota is MILLICORES thousandths of it. Shorter than the kernel's
 * default 100 ms: a member that spent its quota waits for the next period, and at 100 ms that
 * pause (up to 87.5 ms at an eighth of a core) would be most of a p99.
 */
const PERIOD_US = 20000
/** A window whose members were throttled in fewer of their periods than this did not measure them. */
const THROTTLED_ENOUGH = 0.5
/** The placement must stay the same this long (members look once a second) to count as settled. */
const STABLE_MS = 3000
const PATIENCE_MS = 60000
/** Documents whose stored text is checked against what their observer saw. */
const CHECKED = 5
const GOAL_THREE = 2.5
const GOAL_CPU = 1.2
const CORES = availableParallelism()

const MESSAGE_SYNC = 0
const SYNC_STEP_1 = 0
const SYNC_STEP_2 = 1
const SYNC_UPDATE = 2
const emptyMessage = (write) => {
  const encoder = encoding.createEncoder()
  encoding.writeVarUint(encoder, MESSAGE_SYNC)
  write(encoder, new Y.Doc())
  return Buffer.from(encoding.toUint8Array(encoder))
}
const EMPTY_STEP_1 = emptyMessage(syncProtocol.writeSyncStep1)
const EMPTY_STEP_2 = emptyMessage(syncProtocol.writeSyncStep2)

/** The line a document's writer appends with its `n`th edit: 20 bytes, unique in its document. */
const line = (d, n) => `doc ${String(d).padStart(4, '0')} edit ${String(n).padStart(5, '0')}\n`

const format = (n) => Math.round(n).toLocaleString('en-US')
const ms = (value) => `${value.toFixed(2)} ms`
const cores = (millis, windowMs) => (millis / windowMs).toFixed(2)
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`

const within = (promise, what) => {
  let timer
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up waiting for ${what}`)), PATIENCE_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// ---------------------------------------------------------------------------------------------
// CPU quotas

/**
 * The cgroup hierarchy that holds the cpu controller: v2 (`cpu.max`) when /sys/fs/cgroup is the
 * unified hierarchy with cpu among its controllers, else v1's cpu hierarchy (`cpu.cfs_quota_us`).
 * Throws, saying what is needed, when neither can be written.
 */
function cpuHierarchy () {
  const needs = 'the cluster step caps each member with a cgroup CPU quota: it needs to run as root with the ' +
    'cgroup v2 cpu controller at /sys/fs/cgroup (cpu listed in cgroup.controllers) or cgroup v1\'s cpu ' +
    'hierarchy at /sys/fs/cgroup/cpu, writable'
  const attempt = (root, kind) => {
    const probe = path.join(root, `fermata-bench-probe-${process.pid}`)
    try {
      if (kind === 'v2') {
        const enabled = readFileSync(path.join(root, 'cgroup.subtree_control'), 'utf8').split(/\s+/)
        if (!enabled.includes('cpu')) writeFileSync(path.join(root, 'cgroup.subtree_control'), '+cpu')
      }
      mkdirSync(probe)
      try {
        if (kind === 'v2') writeFileSync(path.join(probe, 'cpu.max'), `${MILLICORES * PERIOD_US / 1000} ${PERIOD_US}`)
        else writeFileSync(path.join(probe, 'cpu.cfs_quota_us'), String(MILLICORES * PERIOD_US / 1000))
      } finally {
        rmdirSync(probe)
      }
      return { kind, root }
    } catch (error) {
      throw new Error(`${needs}; ${kind} at ${root}: ${error.message}`)
    }
  }
  const v2 = '/sys/fs/cgroup'
  const controllers = path.join(v2, 'cgroup.controllers')
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) return attempt(v2, 'v2')
  const v1 = '/sys/fs/cgroup/cpu'
  if (existsSync(path.join(v1, 'cpu.cfs_quota_us'))) return attempt(v1, 'v1')
  throw new Error(`${needs}; this machine has neither`)
}

/** One member's cgroup: MILLICORES of a core, removed by remove() (also on an interrupt). */
class CpuGroup {
  constructor (hierarchy, name) {
    this.hierarchy = hierarchy
    this.dir = path.join(hierarchy.root, name)
    mkdirSync(this.dir)
    this.forget = onInterrupt(() => this.remove())
    const quota = MILLICORES * PERIOD_US / 1000
    try {
      if (hierarchy.kind === 'v2') {
        writeFileSync(path.join(this.dir, 'cpu.max'), `${quota} ${PERIOD_US}`)
      } else {
        writeFileSync(path.join(this.dir, 'cpu.cfs_period_us'), String(PERIOD_US))
        writeFileSync(path.join(this.dir, 'cpu.cfs_quota_us'), String(quota))
      }
    } catch (error) {
      this.remove()
      throw error
    }
  }

  /** `command ARGS` started inside this cgroup: the shell joins it, then becomes the command. */
  wrap (command, args) {
    return ['/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', path.join(this.dir, 'cgroup.procs'), command, ...args]]
  }

  /** Periods run and throttled so far, from cpu.stat. */
  throttling () {
    const stat = readFileSync(path.join(this.dir, 'cpu.stat'), 'utf8')
    const value = (name) => Number((stat.match(new RegExp(`^${name} (\\d+)$`, 'm')) || [])[1] || 0)
    return { periods: value('nr_periods'), throttled: value('nr_throttled') }
  }

  /** Moves whatever still runs in it to the hierarchy's root, and removes it. */
  remove () {
    if (!existsSync(this.dir)) return
    const left = readFileSync(path.join(this.dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)
    for (const pid of left) {
      try {
        writeFileSync(path.join(this.hierarchy.root, 'cgroup.procs'), pid)
      } catch {
        // It exited meanwhile.
      }
    }
    rmdirSync(this.dir)
    this.forget()
  }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL, through psql

class Postgres {
  constructor (bin, url) {
    this.psqlBin = path.join(bin, 'psql')
    this.url = new URL(url)
  }

  /** The URL of database `name` on the same server. */
  database (name) {
    const url = new URL(this.url)
    url.pathname = `/${name}`
    return url.toString()
  }

  /** Runs `sql` on `url`; returns its rows, each an array of columns. */
  psql (url, sql) {
    const run = spawnSync(this.psqlBin, ['-X', '-q', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', sql],
      { encoding: 'utf8' })
    if (run.error) throw new Error(`${this.psqlBin}: ${run.error.message}`)
    if (run.status !== 0) throw new Error(`psql failed (${run.status}) on ${sql.slice(0, 80)}...: ${run.stderr}`)
    return run.stdout.split('\n').filter((row) => row.length > 0).map((row) => row.split('\t'))
  }

  create (name) {
    this.drop(name)
    this.psql(this.url.toString(), `CREATE DATABASE ${name}`)
  }

  drop (name) {
    this.psql(this.url.toString(), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }

  /** The server's postmaster, for its CPU: null when this account may not read where it runs. */
  postmaster () {
    try {
      const [[dataDirectory]] = this.psql(this.url.toString(), 'SHOW data_directory')
      return Number(readFileSync(path.join(dataDirectory, 'postmaster.pid'), 'utf8').split('\n')[0])
    } catch {
      return null
    }
  }
}

/** The database's clock in milliseconds, as fermata's leases count it. */
const NOW = 'CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)'

/** How many shards each live member holds, by its announced address ('-' for a holder that is no live member). */
function placement (pg, url) {
  const rows = pg.psql(url, `
    WITH clock AS (SELECT ${NOW} AS now),
    members AS (
      SELECT l.holder, m.address FROM clock, leases l JOIN cluster_members m ON m.lease_name = l.name
      WHERE l.name LIKE 'fermata:member:%' AND l.released_at IS NULL AND l.expires_at > clock.now),
    shards AS (
      SELECT l.holder FROM clock, leases l
      WHERE l.name LIKE 'fermata:writer:%' AND l.released_at IS NULL AND l.expires_at > clock.now)
    SELECT coalesce(m.address, '-'), count(*) FROM shards s LEFT JOIN members m ON m.holder = s.holder GROUP BY 1
    UNION ALL
    SELECT m.address, 0 FROM members m WHERE NOT EXISTS (SELECT 1 FROM shards s WHERE s.holder = m.holder)
    ORDER BY 1`)
  return new Map(rows.map(([address, count]) => [address, Number(count)]))
}

/** The announced address of the member that writes each of `ids` now. */
function holders (pg, url, ids) {
  for (const id of ids) if (!/^[0-9a-zA-Z_-]+$/.test(id)) throw new Error(`unexpected document ID ${JSON.stringify(id)}`)
  const rows = pg.psql(url, `
    WITH clock AS (SELECT ${NOW} AS now)
    SELECT c.id, m.address
    FROM clock CROSS JOIN channels c
    JOIN leases s ON s.name = 'fermata:writer:' || c.shard
    JOIN leases l ON l.holder = s.holder AND l.name LIKE 'fermata:member:%'
    JOIN cluster_members m ON m.lease_name = l.name
    WHERE c.id IN (${ids.map((id) => `'${id}'`).join(', ')})
      AND s.released_at IS NULL AND s.expires_at > clock.now
      AND l.released_at IS NULL AND l.expires_at > clock.now`)
  const found = new Map(rows)
  const missing = ids.filter((id) => !found.has(id))
  if (missing.length > 0) throw new Error(`no live member writes ${missing.length} of the documents (${missing[0]}, ...)`)
  return found
}

// ---------------------------------------------------------------------------------------------
// CPU outside the members

/** PostgreSQL's CPU so far: the postmaster, its reaped children, and its live ones (the backends). */
function postgresMillis (postmaster) {
  if (!postmaster) return NaN
  let ticks = 0
  const own = procStat(postmaster)
  // utime, stime, cutime, cstime: the 12th to 15th fields after the name.
  for (let n = 11; n <= 14; n++) ticks += Number(own[n])
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const fields = procStat(entry)
      if (Number(fields[1]) === postmaster) ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // It exited meanwhile.
    }
  }
  return ticksToMillis(ticks)
}

/** The machine's busy CPU time so far in milliseconds, every core (from /proc/stat). */
function machineMillis () {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0)
  return ticksToMillis(total - fields[3] - fields[4])
}

// ---------------------------------------------------------------------------------------------
// The closed loop

/**
 * One document's writer and observer. The writer holds a yjs document and sends its updates as
 * a client would; the observer syncs an empty document and then searches the updates it
 * receives for the line the writer is waiting on, applying nothing. When the observer has it,
 * the loop records the latency in the current tally and the writer sends its next line.
 */
class Loop {
  constructor (document, writerUrl, observerUrl) {
    this.document = document
    this.index = document.index
    this.doc = new Y.Doc()
    this.text = this.doc.getText('source')
    this.waiting = null
    this.running = false
    this.writer = this.connect(writerUrl, 'writer')
    this.observer = this.connect(observerUrl, 'observer')
    this.doc.on('update', (update, origin) => {
      if (origin === this) return
      const encoder = encoding.createEncoder()
      encoding.writeVarUint(encoder, MESSAGE_SYNC)
      syncProtocol.writeUpdate(encoder, update)
      this.writer.socket.send(encoding.toUint8Array(encoder))
    })
  }

  connect (url, role) {
    const socket = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: PATIENCE_MS })
    socket.binaryType = 'nodebuffer'
    const connection = { socket, role, synced: false, closing: false }
    connection.ready = new Promise((resolve, reject) => {
      connection.resolve = resolve
      socket.on('error', (error) => {
        this.failure = this.failure || new Error(`document ${this.index}'s ${role}: ${error.message}`)
        reject(this.failure)
      })
      socket.on('close', (code, reason) => {
        if (connection.closing) return
        this.failure = this.failure || new Error(`document ${this.index}'s ${role} was closed by the server: ${code} ${reason}`.trimEnd())
        reject(this.failure)
      })
    })
    socket.on('open', () => {
      if (role === 'writer') {
        const encoder = encoding.createEncoder()
        encoding.writeVarUint(encoder, MESSAGE_SYNC)
        syncProtocol.writeSyncStep1(encoder, this.doc)
        socket.send(encoding.toUint8Array(encoder))
      } else {
        socket.send(EMPTY_STEP_1)
      }
    })
    socket.on('message', (data) => role === 'writer' ? this.writerReceives(connection, data) : this.observerReceives(connection, data))
    return connection
  }

  writerReceives (connection, data) {
    if (connection.synced || data[0] !== MESSAGE_SYNC) return
    const decoder = decoding.createDecoder(data)
    decoding.readVarUint(decoder)
    const encoder = encoding.createEncoder()
    encoding.writeVarUint(encoder, MESSAGE_SYNC)
    const kind = syncProtocol.readSyncMessage(decoder, encoder, this.doc, this)
    if (encoding.length(encoder) > 1) connection.socket.send(encoding.toUint8Array(encoder))
    if (kind === syncProtocol.messageYjsSyncStep2) {
      connection.synced = true
      connection.resolve()
    }
  }

  observerReceives (connection, data) {
    if (data[0] !== MESSAGE_SYNC) return
    const kind = data[1]
    if (kind === SYNC_STEP_1) {
      connection.socket.send(EMPTY_STEP_2)
    } else if (!connection.synced) {
      if (kind === SYNC_STEP_2) {
        connection.synced = true
        connection.resolve()
      }
    } else if ((kind === SYNC_UPDATE || kind === SYNC_STEP_2) && this.waiting && data.indexOf(this.waiting.marker) >= 0) {
      const now = performance.now()
      const { sent } = this.waiting
      this.waiting = null
      this.document.acknowledged++
      this.tally.seen(now, now - sent)
      if (this.running) this.send()
      else if (this.drained) this.drained()
    }
  }

  get ready () {
    return Promise.all([this.writer.ready, this.observer.ready])
  }

  send () {
    // The numbers go on from the document's earlier loops: every line is new to the document.
    const text = line(this.index, this.document.edits++)
    this.waiting = { marker: Buffer.from(text), sent: performance.now() }
    this.text.insert(this.text.length, text)
  }

  /** Starts the loop, counting into `tally`. */
  start (tally) {
    this.tally = tally
    this.running = true
    if (!this.waiting) this.send()
  }

  /** Stops sending; resolves once the last line sent was seen. */
  stop () {
    this.running = false
    if (this.failure) return Promise.reject(this.failure)
    if (!this.waiting) return Promise.resolve()
    return within(new Promise((resolve) => { this.drained = resolve }), `document ${this.index}'s last line`)
      .finally(() => { this.drained = null })
  }

  async close () {
    for (const connection of [this.writer, this.observer]) {
      connection.closing = true
      if (connection.socket.readyState === WebSocket.OPEN || connection.socket.readyState === WebSocket.CONNECTING) {
        connection.socket.close(1000)
      }
    }
  }
}

/** Acknowledgements counted in a window: those received between open() and close(). */
class Tally {
  constructor () {
    this.latencies = []
    this.from = Infinity
    this.to = Infinity
  }

  seen (now, latency) {
    if (now >= this.from && now <= this.to) this.latencies.push(latency)
  }

  open () { this.from = performance.now() }
  close () { this.to = performance.now() }
}

/**
 * Runs `loops` for WARM_UP_S untimed and then `seconds` timed; returns the window's figures: the
 * acknowledged updates, their latencies, the members' CPU and throttling, PostgreSQL's, the
 * generator's and the machine's.
 */
async function closedLoop (loops, members, postmaster, seconds) {
  const tally = new Tally()
  for (const loop of loops) {
    if (loop.failure) throw loop.failure
    loop.start(tally)
  }
  await sleep(WARM_UP_S * 1000)
  const before = {
    members: members.map((member) => cpuMillis(member.process.child.pid)),
    throttling: members.map((member) => member.group.throttling()),
    postgres: postgresMillis(postmaster),
    machine: machineMillis(),
    generator: process.cpuUsage()
  }
  tally.open()
  await sleep(seconds * 1000)
  tally.close()
  const windowMs = tally.to - tally.from
  const memberMs = members.map((member, n) => cpuMillis(member.process.child.pid) - before.members[n])
  const throttling = members.map((member, n) => {
    const now = member.group.throttling()
    return { periods: now.periods - before.throttling[n].periods, throttled: now.throttled - before.throttling[n].throttled }
  })
  const postgres = postgresMillis(postmaster) - before.postgres
  const machine = machineMillis() - before.machine
  const { user, system } = process.cpuUsage(before.generator)
  await Promise.all(loops.map((loop) => loop.stop()))
  const failed = loops.find((loop) => loop.failure)
  if (failed) throw failed.failure
  const sorted = tally.latencies.sort((a, b) => a - b)
  const acknowledged = sorted.length
  const cpu = memberMs.reduce((a, b) => a + b, 0)
  return {
    windowMs,
    latencies: sorted,
    acknowledged,
    perSecond: acknowledged / (windowMs / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1],
    memberMs,
    cpu,
    cpuPer1000: cpu / (acknowledged / 1000),
    throttled: throttling.map((t) => t.periods === 0 ? 0 : t.throttled / t.periods),
    postgres,
    machine,
    generator: (user + system) / 1000
  }
}

// ---------------------------------------------------------------------------------------------
// A cluster

/** The config every member of a cluster runs with: the `[cluster]` table, default lease timings. */
function writeConfig (folder) {
  const config = path.join(folder, 'fermata.toml')
  writeFileSync(config, [
    '# The cluster step of the benchmark: every member on one PostgreSQL database; every',
    '# connection comes from loopback, forwarded ones included.',
    '[http]',
    `max_connections_per_peer = ${8 * DOCUMENTS + 256}`,
    '[cluster]',
    'enabled = true',
    ''
  ].join('\n'))
  return config
}

/**
 * `size` members on a new database, each in its own cgroup, started one after the other; returns
 * once the cluster has settled, with an API token.
 */
async function startCluster (bin, pg, hierarchy, size, folder, round) {
  const database = `fermata_cluster_${size}`
  pg.create(database)
  const url = pg.database(database)
  const env = cleanEnvironment({ FERMATA_DATABASE_URL: url })
  const config = writeConfig(folder)
  const common = ['--config', config, '--data-dir', path.join(folder, 'data'), '--storage', 'postgres']
  const cluster = { size, database, url, members: [], common, env }
  try {
    await fermataCommand(bin, ['user', 'add', 'bench', '--role', 'system_admin', '--password-stdin', ...common], env,
      'a long enough password\n')
    cluster.token = await fermataCommand(bin, ['token', 'create', '--user', 'bench', ...common], env, '')
    for (let k = 0; k < size; k++) {
      const port = await freePort()
      const group = new CpuGroup(hierarchy, `fermata-bench-cluster-${process.pid}-${round}-${size}-${k}`)
      const member = { group, base: `http://127.0.0.1:${port}`, port }
      cluster.members.push(member)
      const [command, args] = group.wrap(bin, ['serve', '--listen', `127.0.0.1:${port}`, ...common])
      member.process = new Process(`member ${k + 1} of ${size}`, command, args, env)
      await member.process.ready(`${member.base}/readyz`)
    }
    cluster.settledIn = await settle(pg, cluster)
    return cluster
  } catch (error) {
    await stopCluster(pg, cluster, error)
    throw error
  }
}

/** Waits until every member holds some shards, no shard is unheld and the placement holds still. */
async function settle (pg, cluster) {
  const started = performance.now()
  const bases = cluster.members.map((member) => member.base)
  let last = ''
  let since = performance.now()
  while (performance.now() - started < PATIENCE_MS) {
    for (const member of cluster.members) {
      if (!member.process.running) throw new Error(`${member.process.name} exited:\n${member.process.text()}`)
    }
    const held = placement(pg, cluster.url)
    const key = JSON.stringify([...held])
    if (key !== last) {
      last = key
      since = performance.now()
    }
    const total = [...held.values()].reduce((a, b) => a + b, 0)
    const settled = held.size === bases.length && bases.every((base) => held.get(base) > 0) && total === 256
    if (settled && performance.now() - since >= STABLE_MS) {
      cluster.shards = bases.map((base) => held.get(base))
      return performance.now() - started
    }
    await sleep(250)
  }
  throw new Error(`the cluster of ${cluster.size} never settled: ${last}`)
}

/** Stops the members (SIGTERM, all at once), removes their cgroups and the database. */
async function stopCluster (pg, cluster, failure) {
  const exits = await Promise.all(cluster.members.map((member) => member.process ? member.process.stop() : null))
  for (const member of cluster.members) member.group.remove()
  const unclean = cluster.members.filter((member, n) => exits[n] && exits[n].code !== 0)
  if (failure || unclean.length > 0) {
    for (const member of cluster.members) {
      if (member.process) process.stderr.write(`--- ${member.process.name} output ---\n${member.process.text()}\n`)
    }
  }
  pg.drop(cluster.database)
  if (!failure && unclean.length > 0) {
    throw new Error(`${unclean.map((member) => member.process.name).join(', ')} did not stop cleanly: ` +
      unclean.map((member) => JSON.stringify(exits[cluster.members.indexOf(member)])).join(', '))
  }
}

/** Creates DOCUMENTS documents through the members in turn; returns their IDs with the member each came through. */
async function createDocuments (cluster, round) {
  const api = async (base, method, route, body) => {
    const answer = await fetch(`${base}${route}`, {
      method,
      headers: { Authorization: `Bearer ${cluster.token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    const json = await answer.json()
    if (!answer.ok) throw new Error(`${method} ${base}${route}: ${answer.status} ${JSON.stringify(json)}`)
    return json
  }
  cluster.api = api
  await api(cluster.members[0].base, 'POST', '/api/v1/repositories', { name: 'bench/cluster' })
  const documents = new Array(DOCUMENTS)
  let next = 0
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < DOCUMENTS) {
      const n = next++
      const through = cluster.members[n % cluster.members.length]
      const { id } = await api(through.base, 'POST', '/api/v1/documents', { repository: 'bench/cluster', title: `Cluster ${round}.${n}` })
      documents[n] = { id, through }
    }
  }))
  return documents
}

/** Connects a loop on each of `documents`, the writer through `writerAt(document)`, the observer at the holder. */
async function connectLoops (cluster, documents, writerAt) {
  const loops = documents.map((document) => {
    const socket = (base) => `${base.replace(/^http/, 'ws')}/sync/${document.id}?token=${cluster.token}`
    return new Loop(document, socket(writerAt(document)), socket(document.holder))
  })
  try {
    await Promise.all(loops.map((loop) => within(loop.ready, `document ${loop.index} to sync`)))
  } catch (error) {
    await Promise.all(loops.map((loop) => loop.close()))
    throw error
  }
  return loops
}

/** The stored text of the first few documents holds every line their observers saw. */
async function checkStored (cluster, documents) {
  for (const document of documents.slice(0, CHECKED)) {
    const stored = await cluster.api(document.holder, 'GET', `/api/v1/documents/${document.id}`)
    const lines = stored.text.split('\n').filter(Boolean).length
    if (lines < document.acknowledged) {
      throw new Error(`document ${document.index} stored ${lines} lines, ${document.acknowledged} were acknowledged`)
    }
  }
}

/**
 * One cluster of `size`: settled, its documents created and spread, the closed loop timed; and
 * on FORWARDING_SIZE, the forwarding windows. Returns its figures.
 */
async function runCluster (bin, pg, hierarchy, postmaster, size, round) {
  const folder = mkdtempSync(path.join(tmpdir(), 'fermata-cluster-'))
  keepFolder(folder)
  try {
    const cluster = await startCluster(bin, pg, hierarchy, size, folder, round)
    let loops = []
    let failure = null
    try {
      const documents = await createDocuments(cluster, round)
      const ids = documents.map((document) => document.id)
      const where = holders(pg, cluster.url, ids)
      for (const [index, document] of documents.entries()) {
        Object.assign(document, { index, holder: where.get(document.id), edits: 0, acknowledged: 0 })
      }
      const elsewhere = documents.filter((document) => document.holder !== document.through.base).length
      const perMember = cluster.members.map((member) => documents.filter((document) => document.holder === member.base).length)

      loops = await connectLoops(cluster, documents, (document) => document.holder)
      const figures = await closedLoop(loops, cluster.members, postmaster, WINDOW_S)
      Object.assign(figures, { size, clients: loops.length * 2, perMember, shards: cluster.shards, settledIn: cluster.settledIn, elsewhere })
      await Promise.all(loops.map((loop) => loop.close()))
      loops = []
      if (size === FORWARDING_SIZE) figures.forwarding = await forwarding(cluster, documents, postmaster)
      await checkStored(cluster, documents)
      const moved = [...holders(pg, cluster.url, ids)].filter(([id, base]) => where.get(id) !== base).length
      if (moved > 0) throw new Error(`${moved} documents changed holder while the loops ran: the placement had not settled`)
      return figures
    } catch (error) {
      failure = error
      throw error
    } finally {
      await Promise.all(loops.map((loop) => loop.close()))
      await stopCluster(pg, cluster, failure)
    }
  } finally {
    removeFolder(folder)
  }
}

/**
 * The forwarding windows on FORWARDED documents, spread over the holders: the writer at the
 * holder (direct) and at the next member (forwarded) take turns, the observer at the holder.
 * Returns the latencies of each, or the reason forwarding could not be measured.
 */
async function forwarding (cluster, documents, postmaster) {
  const bases = cluster.members.map((member) => member.base)
  // Documents of each holder in turn, so that every member forwards and every member is forwarded to.
  const byHolder = bases.map((base) => documents.filter((document) => document.holder === base))
  const chosen = []
  for (let at = 0; chosen.length < FORWARDED; at++) {
    for (const list of byHolder) if (at < list.length && chosen.length < FORWARDED) chosen.push(list[at])
  }
  const next = (document) => bases[(bases.indexOf(document.holder) + 1) % bases.length]
  const results = { direct: [], forwarded: [] }
  for (let turn = 0; turn < FORWARDING_TURNS; turn++) {
    for (const kind of ['direct', 'forwarded']) {
      let loops
      try {
        loops = await connectLoops(cluster, chosen, kind === 'direct' ? (document) => document.holder : next)
      } catch (error) {
        if (kind === 'forwarded') return { unavailable: error.message }
        throw error
      }
      try {
        results[kind].push(await closedLoop(loops, cluster.members, postmaster, FORWARDING_WINDOW_S))
      } catch (error) {
        if (kind === 'forwarded' && results.forwarded.length === 0) return { unavailable: error.message }
        throw error
      } finally {
        await Promise.all(loops.map((loop) => loop.close()))
      }
    }
  }
  // Each way's windows pooled: the percentiles of all their latencies, the rate and CPU of all their time.
  const pooled = (windows) => {
    const all = windows.flatMap((w) => w.latencies).sort((a, b) => a - b)
    const windowMs = windows.reduce((a, w) => a + w.windowMs, 0)
    const cpu = windows.reduce((a, w) => a + w.cpu, 0)
    return {
      p50: percentile(all, 50),
      p99: percentile(all, 99),
      perSecond: all.length / (windowMs / 1000),
      cpuPer1000: cpu / (all.length / 1000)
    }
  }
  // Every forwarded writer went through a forwarding member, as its metrics count them.
  const relayed = await forwardedConnections(cluster)
  if (relayed < FORWARDING_TURNS * chosen.length) {
    throw new Error(`the members counted ${relayed} forwarded live connections, not ${FORWARDING_TURNS * chosen.length}`)
  }
  return { documents: chosen.length, relayed, direct: pooled(results.direct), forwarded: pooled(results.forwarded) }
}

/** The live connections the members relayed to another, from fermata_forwarded_requests_total. */
async function forwardedConnections (cluster) {
  let total = 0
  for (const member of cluster.members) {
    const metrics = await (await fetch(`${member.base}/metrics`)).text()
    for (const row of metrics.split('\n')) {
      if (!row.startsWith('fermata_forwarded_requests_total{')) continue
      if (/kind="sync"/.test(row) && /outcome="forwarded"/.test(row)) total += Number(row.slice(row.lastIndexOf(' ') + 1))
    }
  }
  return total
}

// ---------------------------------------------------------------------------------------------
// The report

function report (f, round) {
  const windowMs = f.windowMs
  const quota = MILLICORES / 1000
  const memberShares = f.memberMs.map((millis, n) =>
    `${cores(millis, windowMs)} (throttled ${(f.throttled[n] * 100).toFixed(0)}%)`).join(', ')
  console.log(`  ${plural(f.size, 'member', 'members')}${ROUNDS > 1 ? `, round ${round}` : ''}: holding ${f.shards.join(' + ')} shards (settled in ` +
    `${(f.settledIn / 1000).toFixed(1)} s), documents ${f.perMember.join(' + ')}` +
    `${f.elsewhere ? ` (${f.elsewhere} not written by the member they were created through)` : ''}; ` +
    `${format(f.clients)} clients served`)
  console.log(`    ${format(f.acknowledged)} acknowledged updates in ${(windowMs / 1000).toFixed(1)} s: ` +
    `${format(f.perSecond)}/s; p50 ${ms(f.p50)}, p99 ${ms(f.p99)}, max ${ms(f.max)}`)
  const others = f.machine - f.cpu - f.generator - (Number.isNaN(f.postgres) ? 0 : f.postgres)
  console.log(`    members' CPU ${format(f.cpu)} ms, ${f.cpuPer1000.toFixed(1)} ms per 1,000 updates; cores used ` +
    `(quota ${quota.toFixed(3)} each): ${memberShares}; PostgreSQL ${cores(f.postgres, windowMs)}, generator ` +
    `${cores(f.generator, windowMs)}, other processes ${cores(Math.max(0, others), windowMs)}, the machine ` +
    `${cores(f.machine, windowMs)} of ${CORES}`)
  if (Math.min(...f.throttled) < THROTTLED_ENOUGH) {
    console.log(`    (a member was throttled in fewer than ${THROTTLED_ENOUGH * 100}% of its periods: something other than ` +
      'the members\' quota limited this window)')
  }
  if (f.forwarding) {
    const w = f.forwarding
    if (w.unavailable) {
      console.log(`    forwarding: not measured, a writer connected through a member that does not hold its document failed: ${w.unavailable}`)
    } else {
      console.log(`    forwarding, ${w.documents} documents, ${FORWARDING_TURNS} windows of ${FORWARDING_WINDOW_S} s each way ` +
        `(${w.relayed} live connections relayed by the members): ` +
        `direct p50 ${ms(w.direct.p50)}, p99 ${ms(w.direct.p99)}, ${format(w.direct.perSecond)}/s, ` +
        `${w.direct.cpuPer1000.toFixed(1)} ms CPU per 1,000; forwarded p50 ${ms(w.forwarded.p50)}, p99 ${ms(w.forwarded.p99)}, ` +
        `${format(w.forwarded.perSecond)}/s, ${w.forwarded.cpuPer1000.toFixed(1)} ms CPU per 1,000; ` +
        `${(w.forwarded.p50 / w.direct.p50).toFixed(2)}x and ${(w.forwarded.p99 / w.direct.p99).toFixed(2)}x`)
    }
  }
}

/** One figure over the rounds: the median measured and floor, with the spread of the rounds' ratios. */
function figure (name, unit, rounds, measure, floor, floorName, goal) {
  const measured = median(rounds.map(measure))
  const floors = median(rounds.map(floor))
  const ratios = rounds.map((r) => measure(r) / floor(r))
  const spread = rounds.length > 1 ? [Math.min(...ratios), Math.max(...ratios)] : undefined
  record('cluster', name, unit, measured, floors, floorName, goal, spread)
  const range = spread ? ` (${spread[0].toFixed(2)}x to ${spread[1].toFixed(2)}x)` : ''
  return `${(measured / floors).toFixed(2)}x${range}`
}

async function main () {
  const bin = argument('--fermata')
  const pg = new Postgres(argument('--pg-bin'), argument('--postgres'))
  const hierarchy = cpuHierarchy()
  const postmaster = pg.postmaster()
  const quota = (MILLICORES / 1000).toFixed(3)
  console.log(`cluster: fermata serve in clusters of ${SIZES.join(', ')} members on durable PostgreSQL, each member ` +
    `capped at ${quota} core (cgroup ${hierarchy.kind}); ${DOCUMENTS} documents created through the members in turn, one writer ` +
    `and one observer each at the document's member, closed loop of ${line(0, 0).length}-byte lines, ${WINDOW_S} s after ` +
    `${WARM_UP_S} s untimed; then forwarding on ${FORWARDED} documents of the ${FORWARDING_SIZE}-member cluster; ` +
    `${plural(ROUNDS, 'round', 'rounds')}`)
  if (!postmaster) console.log('  (PostgreSQL\'s CPU is not shown: its data folder cannot be read from here)')
  const begun = performance.now()
  const rounds = []
  for (let round = 1; round <= ROUNDS; round++) {
    const bySize = new Map()
    for (const size of SIZES) {
      const figures = await runCluster(bin, pg, hierarchy, postmaster, size, round)
      bySize.set(size, figures)
      report(figures, round)
    }
    rounds.push(bySize)
  }

  const shape = `${DOCUMENTS} documents, closed loop, ${quota} core a member`
  const at = (size) => (r) => r.get(size)
  const scaling = []
  for (const size of SIZES.slice(1)) {
    const ratio = figure(`${size} members vs 1, ${shape}: acknowledged updates/s`, '/s', rounds,
      (r) => at(size)(r).perSecond, (r) => at(1)(r).perSecond, `1 member, ${quota} core`, size === 3 ? `>= ${GOAL_THREE}` : null)
    scaling.push(`${size} members ${ratio}`)
  }
  const cpu = []
  for (const size of SIZES.slice(1)) {
    const ratio = figure(`${size} members vs 1, ${shape}: members' CPU per 1,000 acknowledged updates`, 'ms', rounds,
      (r) => at(size)(r).cpuPer1000, (r) => at(1)(r).cpuPer1000, '1 member', `<= ${GOAL_CPU}`)
    cpu.push(`${size} members ${ratio}`)
  }
  console.log(`  updates/s against 1 member: ${scaling.join(', ')}; CPU per update against 1 member: ${cpu.join(', ')}`)
  const forwarded = rounds.map((r) => r.get(FORWARDING_SIZE).forwarding).filter((w) => w && !w.unavailable)
  if (forwarded.length === rounds.length) {
    const name = `${FORWARDING_SIZE} members, ${FORWARDED} documents: writer through a member that forwards vs at the holder`
    const p50 = figure(`${name}, p50 acknowledgement`, 'us', forwarded, (w) => w.forwarded.p50 * 1000,
      (w) => w.direct.p50 * 1000, 'the writer at the holder, p50', null)
    const p99 = figure(`${name}, p99 acknowledgement`, 'us', forwarded, (w) => w.forwarded.p99 * 1000,
      (w) => w.direct.p99 * 1000, 'the writer at the holder, p99', null)
    console.log(`  forwarded against direct: p50 ${p50}, p99 ${p99}`)
  } else {
    console.log('  forwarding: not measured (see above); nothing recorded for it')
  }
  console.log(`  cluster step: ${((performance.now() - begun) / 1000).toFixed(1)} s in all`)
}

main().catch((error) => {
  process.stderr.write(`cluster.mjs: ${error.stack || error}\n`)
  process.exit(1)
})
