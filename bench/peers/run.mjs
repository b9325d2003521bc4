#!/usr/bin/env node
// The peers benchmark: live propagation through fermata serve (on SQLite and on PostgreSQL)
// against two peers, y-websocket's reference server with its LevelDB persistence and Hocuspocus
// with a store hook, all driven by the one harness of harness.mjs.
//
//   node run.mjs --fermata BIN --postgres URL
//
// BIN is fermata's release binary, run with its default settings; URL names an empty database
// on a durable PostgreSQL server for it. Every server listens on a free loopback port and keeps
// its data in a temporary folder removed at the end. The rounds are interleaved (fermata/sqlite,
// fermata/postgres, y-websocket, hocuspocus, then again), each on a new document; the report
// gives each round and the medians, and with FERMATA_BENCH_RECORD set appends fermata's medians
// against each peer's to that file in the format scripts/bench tabulates. FERMATA_BENCH_CLIENTS
// sets the writers (default 8), FERMATA_BENCH_UPDATES the edits each (default 200),
// FERMATA_BENCH_PEER_ROUNDS the rounds (default 3).

import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { closedLoop, edit } from './harness.mjs'
import {
  HERE, Process, argument as commandLine, cleanEnvironment, fermataCommand, freePort, keepFolder, median,
  percentile, record, removeFolder, setting, version
} from './servers.mjs'

const WARM_UP = 10
const argument = (name) => commandLine(name, 'run.mjs --fermata BIN --postgres URL')

/**
 * fermata serve on one backend, with two users and an API token each: the writers' and the
 * observer's (a member may hold only `max_connections_per_member`, 8 by default, of a room's
 * connections), both members of the repository; each round gets a new document.
 */
async function fermata (bin, backend, folder, postgresUrl) {
  const dataDir = path.join(folder, `fermata-${backend}`)
  const storage = backend === 'postgres' ? ['--storage', 'postgres'] : []
  const env = cleanEnvironment(backend === 'postgres' ? { FERMATA_DATABASE_URL: postgresUrl } : {})
  const common = ['--data-dir', dataDir, ...storage]
  const tokens = {}
  for (const user of ['bench', 'observer']) {
    await fermataCommand(bin, ['user', 'add', user, '--password-stdin', ...common], env, 'a long enough password\n')
    tokens[user] = await fermataCommand(bin, ['token', 'create', '--user', user, ...common], env, '')
  }
  const port = await freePort()
  const server = new Process(`fermata/${backend}`, bin, ['serve', '--listen', `127.0.0.1:${port}`, ...common], env)
  const base = `http://127.0.0.1:${port}`
  await server.ready(`${base}/readyz`)
  const api = async (method, route, body) => {
    const answer = await fetch(`${base}${route}`, {
      method,
      headers: { Authorization: `Bearer ${tokens.bench}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    const json = await answer.json()
    if (!answer.ok) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(json)}`)
    return json
  }
  await api('POST', '/api/v1/repositories', { name: 'bench/peers' })
  await api('PUT', '/api/v1/repositories/bench/peers/members/observer', { role: 'editor' })
  return {
    name: `fermata/${backend}`,
    server,
    // Where the time of an acknowledgement goes: the commits' own duration, from /metrics.
    async commits () {
      const metrics = await (await fetch(`${base}/metrics`)).text()
      const value = (name) => Number((metrics.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1])
      const count = value('fermata_document_commit_duration_seconds_count')
      const seconds = value('fermata_document_commit_duration_seconds_sum')
      return `${count} commits, ${(seconds / count * 1000).toFixed(2)} ms each on average`
    },
    async target (round) {
      const created = await api('POST', '/api/v1/documents', { repository: 'bench/peers', title: `Peers round ${round}` })
      const socket = `ws://127.0.0.1:${port}/sync/${created.id}`
      return {
        url: `${socket}?token=${tokens.bench}`,
        observerUrl: `${socket}?token=${tokens.observer}`,
        room: created.id,
        framing: 'y-websocket',
        // What fermata acknowledged is committed: the document it serves afterwards holds it all.
        // Its revision counts the commits (one each), warm-up included.
        check: async (length, edits) => {
          const stored = await api('GET', `/api/v1/documents/${created.id}`)
          if (stored.text.length !== length) {
            throw new Error(`fermata/${backend} stored ${stored.text.length} characters, not ${length}`)
          }
          return `${(edits / Math.max(1, stored.revision)).toFixed(1)} edits a commit`
        }
      }
    }
  }
}

/** A Node peer server on a free port: `args` run by node with HOST and PORT set. */
async function peer (name, args, env, framing) {
  const port = await freePort()
  const server = new Process(name, process.execPath, args, cleanEnvironment({ ...env, HOST: '127.0.0.1', PORT: String(port) }))
  await server.ready(`http://127.0.0.1:${port}/`)
  return {
    name,
    server,
    async target (round) {
      const room = `peers-round-${round}`
      const url = framing === 'hocuspocus' ? `ws://127.0.0.1:${port}` : `ws://127.0.0.1:${port}/${room}`
      return { url, room, framing, check: async () => '' }
    },
    async commits () { return '' }
  }
}

function summarize (run) {
  const { latencies, wall } = run
  const sorted = [...latencies].sort((a, b) => a - b)
  return {
    perSecond: latencies.length / (wall / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    harnessCpu: run.harnessCpu
  }
}

const line = (name, figures) =>
  `${name.padEnd(18)} ${figures.perSecond.toFixed(0).padStart(6)} edits/s  p50 ${figures.p50.toFixed(2).padStart(7)} ms  p99 ${figures.p99.toFixed(2).padStart(7)} ms  harness CPU ${(figures.harnessCpu * 100).toFixed(0).padStart(3)}%`

async function main () {
  const bin = argument('--fermata')
  const postgresUrl = argument('--postgres')
  const writers = setting('FERMATA_BENCH_CLIENTS', 8)
  const edits = setting('FERMATA_BENCH_UPDATES', 200)
  const rounds = setting('FERMATA_BENCH_PEER_ROUNDS', 3)
  const folder = mkdtempSync(path.join(tmpdir(), 'fermata-peers-'))
  keepFolder(folder)
  const servers = []
  const stopAll = () => Promise.all(servers.map((s) => s.server.stop()))
  try {
    const ywsVersion = version('y-websocket')
    const hocuspocusVersion = version('@hocuspocus/server')
    servers.push(await fermata(bin, 'sqlite', folder, postgresUrl))
    servers.push(await fermata(bin, 'postgres', folder, postgresUrl))
    servers.push(await peer('y-websocket', [path.join(HERE, 'node_modules/y-websocket/bin/server.cjs')],
      { YPERSISTENCE: path.join(folder, 'y-websocket') }, 'y-websocket'))
    mkdirSync(path.join(folder, 'hocuspocus'))
    servers.push(await peer('hocuspocus', [path.join(HERE, 'hocuspocus.mjs')],
      { STORE_DIR: path.join(folder, 'hocuspocus') }, 'hocuspocus'))

    console.log(`peers: ${writers} writers x ${edits} edits of ${edit(0, 0).length} bytes on one document, each ` +
      `next edit once an observer client sees the previous one (after ${WARM_UP} untimed each); ` +
      `${rounds} interleaved rounds, a new document each`)
    console.log(`  fermata serve (release binary, default settings) on SQLite and on durable PostgreSQL; ` +
      `y-websocket ${ywsVersion} bin/server.cjs with YPERSISTENCE (LevelDB); ` +
      `@hocuspocus/server ${hocuspocusVersion} with a file store hook (default debounce 2 s, at most 10 s)`)
    const results = new Map(servers.map((s) => [s.name, []]))
    for (let round = 1; round <= rounds; round++) {
      for (const server of servers) {
        const target = await server.target(round)
        const run = await closedLoop({ ...target, writers, edits, warmUp: WARM_UP })
        const note = await target.check(run.length, writers * (WARM_UP + edits))
        const figures = summarize(run)
        results.get(server.name).push(figures)
        console.log(`  round ${round}  ${line(server.name, figures)}  ${note}`.trimEnd())
      }
    }
    const medians = new Map()
    for (const [name, runs] of results) {
      const figures = {
        perSecond: median(runs.map((r) => r.perSecond)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        harnessCpu: median(runs.map((r) => r.harnessCpu))
      }
      medians.set(name, figures)
      console.log(`  median   ${line(name, figures)}`)
    }
    for (const server of servers) {
      const commits = await server.commits()
      if (commits) console.log(`  ${server.name}: ${commits}`)
    }

    const shape = `${writers} writers x ${edits} edits`
    const peers = [
      ['y-websocket', `y-websocket ${ywsVersion}, LevelDB, no flush per update`],
      ['hocuspocus', `Hocuspocus ${hocuspocusVersion}, debounced store`]
    ]
    for (const backend of ['sqlite', 'postgres']) {
      const ours = medians.get(`fermata/${backend}`)
      for (const [name, description] of peers) {
        const theirs = medians.get(name)
        console.log(`  fermata/${backend} vs ${name}: throughput ${(ours.perSecond / theirs.perSecond).toFixed(2)}x, ` +
          `p50 ${(ours.p50 / theirs.p50).toFixed(2)}x, p99 ${(ours.p99 / theirs.p99).toFixed(2)}x`)
        // The rounds are interleaved, so each round's ratio sets fermata against the peer's run
        // beside it; the table shows their lowest and highest beside the medians' ratio.
        const spread = (measure) => {
          const ratios = results.get(`fermata/${backend}`).map((run, n) => measure(run) / measure(results.get(name)[n]))
          return [Math.min(...ratios), Math.max(...ratios)]
        }
        record(`peers/${backend}`, `${shape} vs ${name}: edits/s`, '/s', ours.perSecond, theirs.perSecond,
          `${description}, edits/s`, '>= 1.3', spread((run) => run.perSecond))
        record(`peers/${backend}`, `${shape} vs ${name}: p99`, 'us', ours.p99 * 1000, theirs.p99 * 1000,
          `${description}, p99`, '<= 0.8', spread((run) => run.p99))
      }
    }
  } catch (error) {
    await stopAll()
    removeFolder(folder)
    for (const s of servers) process.stderr.write(`--- ${s.name} output ---\n${s.server.text()}\n`)
    throw error
  }
  const exits = await Promise.all(servers.map(async (s) => [s.name, await s.server.stop()]))
  removeFolder(folder)
  for (const [name, exit] of exits) {
    if (name.startsWith('fermata') && exit.code !== 0) {
      throw new Error(`${name} did not stop cleanly (${JSON.stringify(exit)})`)
    }
  }
}

main().catch((error) => {
  process.stderr.write(`run.mjs: ${error.stack || error}\n`)
  process.exit(1)
})
