// One Node instance of the mixed-language fleet test (tests/fleet_mixed.py).
//
// A harness Client built from the bootstrap config in argv[2] (it follows the config_source).
// On `go` (a line on stdin) it sends GETs to service `api` from FLEET_LOOPS concurrent loops,
// paced to FLEET_RATE requests per second in all; on `stop` it finishes. Every 20 ms it prints
// its state as one JSON line: the version it runs, the requests that succeeded and failed, the
// first errors.
'use strict'

const readline = require('node:readline')
const { Client } = require(process.env.HARNESS_NODE_PKG || '../bindings-node')

const config = JSON.parse(process.argv[2])
const loops = Number(process.env.FLEET_LOOPS || 4)
const rate = Number(process.env.FLEET_RATE || 400)
const client = new Client(config)
const counts = { ok: 0, failed: 0 }
const errors = []
let go
const started = new Promise((resolve) => (go = resolve))
let stopping = false

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function load() {
  await started
  const perLoop = rate / loops
  const start = performance.now()
  let n = 0
  while (!stopping) {
    n += 1
    const delay = start + (n * 1000) / perLoop - performance.now()
    if (delay > 0) await sleep(delay)
    let error = null
    try {
      const r = await client.get('api', '/ok')
      if (r.status !== 200) error = `status ${r.status}`
    } catch (e) {
      error = `${e.name}: ${e.message}`
    }
    if (error === null) counts.ok += 1
    else {
      counts.failed += 1
      if (errors.length < 5) errors.push(error)
    }
  }
}

function report(done) {
  const s = client.configSourceState()
  const line = { version: s.version, rejected: s.rejectedVersion, connected: s.connected, ok: counts.ok, failed: counts.failed, errors, done }
  process.stdout.write(`${JSON.stringify(line)}\n`)
}

async function main() {
  const workers = Array.from({ length: loops }, () => load())
  const input = readline.createInterface({ input: process.stdin })
  input.on('line', (line) => {
    if (line.trim() === 'go') go()
    if (line.trim() === 'stop') stopping = true
  })
  input.on('close', () => {
    stopping = true
  })
  while (!stopping) {
    report(false)
    await sleep(20)
  }
  go()
  await Promise.all(workers)
  report(true)
  input.close()
  client.close()
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`)
  process.exit(1)
})
