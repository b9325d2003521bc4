#!/usr/bin/env node
// Hocuspocus (@hocuspocus/server) as scripts/bench runs it beside fermata serve: one server on
// HOST:PORT whose store hook keeps each document's full Yjs state in a file of its own under
// STORE_DIR, written to a temporary file, flushed (fsync) and renamed over the previous one, and
// read back when the document is loaded again.
//
//   HOST=127.0.0.1 PORT=PORT STORE_DIR=DIR node hocuspocus.mjs
//
// Hocuspocus calls onStoreDocument with its default debounce: 2000 ms after the last change,
// and at least every 10000 ms (maxDebounce) while changes keep coming, and once more when the
// last connection of a document closes. It broadcasts each update to the other connections as
// soon as it has applied it, before any store: an update is acknowledged long before it is on
// disk.

import { Server } from '@hocuspocus/server'
import * as Y from 'yjs'
import { open, readFile, rename } from 'node:fs/promises'
import path from 'node:path'

const host = process.env.HOST || '127.0.0.1'
const port = Number(process.env.PORT || '1234')
const folder = process.env.STORE_DIR
if (!folder) {
  process.stderr.write('hocuspocus.mjs: STORE_DIR must name the folder documents are stored in\n')
  process.exit(2)
}

const fileOf = (documentName) => path.join(folder, `${encodeURIComponent(documentName)}.bin`)

const store = {
  async onLoadDocument ({ documentName, document }) {
    try {
      Y.applyUpdate(document, await readFile(fileOf(documentName)))
    } catch (error) {
      if (error.code !== 'ENOENT') throw error
    }
    return document
  },

  async onStoreDocument ({ documentName, document }) {
    const file = fileOf(documentName)
    const partial = `${file}.partial`
    const handle = await open(partial, 'w')
    try {
      await handle.writeFile(Y.encodeStateAsUpdate(document))
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(partial, file)
  }
}

const server = new Server({
  address: host,
  port,
  quiet: true,
  extensions: [store]
})

await server.listen()
process.stdout.write(`hocuspocus listening on ${host}:${port}\n`)
