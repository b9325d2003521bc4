// What the steps of the peers benchmark share (run.mjs, the closed loop; crowd.mjs, 10,000
// connections; cluster.mjs, scaling out): their command lines and settings, the server processes
// they start and clean up, fermata's CLI, a process's CPU time, the percentiles they summarize
// with, and the rows they record for scripts/bench's table.

import { execFileSync, spawn } from 'node:child_process'
import { appendFileSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const HERE = path.dirname(fileURLToPath(import.meta.url))
const PATIENCE_MS = 60000

/** A whole positive number from the environment variable `name`, else `fallback`. */
export function setting (name, fallback) {
  const value = process.env[name]
  if (value === undefined) return fallback
  if (!/^[1-9]\d*$/.test(value)) throw new Error(`${name} must be a positive whole number, not ${JSON.stringify(value)}`)
  return Number(value)
}

/** The value after `name` on the command line; `usage` is shown when it is missing. */
export function argument (name, usage) {
  const at = process.argv.indexOf(name)
  if (at < 0 || at + 1 >= process.argv.length) {
    process.stderr.write(`usage: ${usage} (missing ${name})\n`)
    process.exit(2)
  }
  return process.argv[at + 1]
}

export const freePort = () => new Promise((resolve, reject) => {
  const server = createServer()
  server.on('error', reject)
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address()
    server.close(() => resolve(port))
  })
})

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The environment without fermata's own settings, so the caller's do not leak in. */
export function cleanEnvironment (extra) {
  const env = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('FERMATA_') && key !== 'HANDOVER') env[key] = value
  }
  return { ...env, ...extra }
}

/**
 * Every server started, every data folder and every other cleanup registered with onInterrupt(),
 * so that an interrupted run cleans up too.
 */
const started = new Set()
const folders = new Set()
const cleanups = new Set()
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const server of started) server.child.kill('SIGTERM')
    for (const folder of folders) rmSync(folder, { recursive: true, force: true })
    for (const cleanup of cleanups) {
      try {
        cleanup()
      } catch {
        // The others run all the same.
      }
    }
    process.exit(1)
  })
}

/**
 * Runs `cleanup` (synchronous) should the run be interrupted, after the servers were sent
 * SIGTERM; the returned function unregisters it.
 */
export function onInterrupt (cleanup) {
  cleanups.add(cleanup)
  return () => cleanups.delete(cleanup)
}

/** Marks `folder` for removal should the run be interrupted; removeFolder() removes it now. */
export const keepFolder = (folder) => folders.add(folder)
export function removeFolder (folder) {
  rmSync(folder, { recursive: true, force: true })
  folders.delete(folder)
}

/** A server process whose output is kept, and shown when something fails. */
export class Process {
  constructor (name, command, args, env) {
    this.name = name
    this.child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    started.add(this)
    this.output = []
    const keep = (chunk) => { this.output.push(chunk) }
    this.child.stdout.on('data', keep)
    this.child.stderr.on('data', keep)
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })))
    this.running = true
    this.exited.then(() => {
      this.running = false
      started.delete(this)
    })
  }

  text () {
    return Buffer.concat(this.output).toString()
  }

  /** Waits until GET `url` answers 200, failing when the process exits first. */
  async ready (url) {
    const deadline = Date.now() + PATIENCE_MS
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`${this.name} exited before it was ready:\n${this.text()}`)
      try {
        const answer = await fetch(url)
        if (answer.status === 200) return
      } catch {
        // Not listening yet.
      }
      await sleep(50)
    }
    throw new Error(`${this.name} was not ready in ${PATIENCE_MS} ms:\n${this.text()}`)
  }

  async stop () {
    if (this.running) this.child.kill('SIGTERM')
    return this.exited
  }
}

/** Runs `fermata ARGS` to the end with `input` on its standard input; returns its output. */
export function fermataCommand (bin, args, env, input) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { env, stdio: ['pipe', 'pipe', 'pipe'] })
    const out = []
    const err = []
    child.stdout.on('data', (chunk) => out.push(chunk))
    child.stderr.on('data', (chunk) => err.push(chunk))
    child.on('error', reject)
    child.on('exit', (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString().trim())
      else reject(new Error(`fermata ${args.join(' ')} failed (${code}): ${Buffer.concat(err)}`))
    })
    child.stdin.end(input)
  })
}

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim())

/** Clock ticks (`getconf CLK_TCK`) in milliseconds, for the times of /proc. */
export const ticksToMillis = (ticks) => ticks * 1000 / CLOCK_TICKS

/** The fields of /proc/PID/stat after the command name (which may hold spaces), from the state on. */
export function procStat (pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** A process's CPU time in milliseconds, all its threads, user and system. */
export function cpuMillis (pid) {
  // utime and stime are the 14th and 15th fields of the line, the 12th and 13th after the name.
  const fields = procStat(pid)
  return ticksToMillis(Number(fields[11]) + Number(fields[12]))
}

export const version = (pkg) =>
  JSON.parse(readFileSync(path.join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version

/** Nearest rank, as the Rust benchmarks summarize: always an observed sample. */
export function percentile (sorted, percent) {
  const rank = Math.max(1, Math.ceil(sorted.length * percent / 100))
  return sorted[rank - 1]
}

export const median = (values) => percentile([...values].sort((a, b) => a - b), 50)

/**
 * Appends one figure to FERMATA_BENCH_RECORD (when set) in the format scripts/bench tabulates:
 * `measured` against `floor`, with `goal` (such as "<= 1" or ">= 1.3", or null) on their ratio. `spread`, when
 * given, is the lowest and highest ratio over the rounds the figure summarizes.
 */
export function record (group, figure, unit, measured, floor, floorName, goal, spread) {
  const file = process.env.FERMATA_BENCH_RECORD
  if (!file) return
  const row = { group, figure, unit, measured, floor, floor_name: floorName, ratio: measured / floor, goal }
  if (spread) row.spread = spread
  appendFileSync(file, JSON.stringify(row) + '\n')
}
