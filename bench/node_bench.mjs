// Node benchmark: harness-sdk (retry, breaker and bulkhead on) vs undici.request vs global fetch,
// at concurrency 1 and 64, against the loopback upstream (`/bench` answers 200 {"ok":true}); at
// 64 also `harness+hmac` (the bench service signing every request: auth hmac, preset github) and
// `harness+before`, the same config with one sync `before` interceptor that adds a
// header (the `harness` row is its "no interceptor" baseline, measured in the same rounds).
// Prints throughput, p50/p99 latency and client CPU per 1,000 requests (process.cpuUsage:
// this process only, including Harness's tokio threads; the upstream is a child process).
//
//   cargo build --release -p harness-upstream
//   npm install ./bindings-node            # release build of the native module (bindings-node/test.sh
//                                          # leaves a debug one: rebuild with `node bindings-node/scripts/build.js`)
//   (cd bench && npm install) && node bench/node_bench.mjs
//
// Env: BENCH_REQUESTS (per cell, default 20000), BENCH_ROUNDS (default 5, median reported),
// BENCH_HUGE (the in-flight count of the last row, harness only; default 10000, 0 = skip),
// BENCH_JSON (write every round's figures there, for bench/summary.py),
// BENCH_ONLY (comma list of clients: harness, harness+before, undici.request, fetch; undici is
// loaded only when needed),
// BENCH_UPSTREAM (http://addr of a running upstream instead of starting one),
// HARNESS_NODE_SDK (the harness-sdk entry point to load, default ../bindings-node/index.mjs:
// bench/compare.sh points a base and a current build at one upstream this way),
// HARNESS_BENCH_LOG=1 to keep the per-request JSON log line on (stderr),
// HARNESS_WORKER_THREADS (the core runtime's worker count; default one per core) is printed with
// the results. On a 2-core machine 1 worker measured slower than the default at concurrency 64.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import path from 'node:path'
import readline from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const repoRoot = path.resolve(here, '..')
const sdk = process.env.HARNESS_NODE_SDK ? pathToFileURL(path.resolve(process.env.HARNESS_NODE_SDK)).href : '../bindings-node/index.mjs'
const { Client } = await import(sdk)
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null
const { Agent, request: undiciRequest } =
  !ONLY || ONLY.has('undici.request') ? await import('undici') : { Agent: class {}, request: null }

const TOTAL = Number(process.env.BENCH_REQUESTS ?? 20000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const HUGE = Number(process.env.BENCH_HUGE ?? 10000)
const LOG = process.env.HARNESS_BENCH_LOG === '1'
// BENCH_CONCURRENCY=64 (comma list) narrows the levels, e.g. under a profiler.
const LEVELS = process.env.BENCH_CONCURRENCY ? process.env.BENCH_CONCURRENCY.split(',').map(Number) : [1, 64]

let upstream = null
let addr
if (process.env.BENCH_UPSTREAM) {
  addr = new URL(process.env.BENCH_UPSTREAM).host
} else {
  const targetDir = path.join(repoRoot, 'target', process.env.CARGO_BUILD_TARGET || 'x86_64-unknown-linux-gnu')
  const bin =
    process.env.HARNESS_UPSTREAM_BIN ??
    ['release', 'debug'].map((p) => path.join(targetDir, p, 'harness-upstream')).find((p) => fs.existsSync(p))
  if (!bin) throw new Error('build the upstream first: cargo build --release -p harness-upstream')
  upstream = spawn(bin, [], { stdio: ['pipe', 'pipe', 'inherit'] })
  const [line] = await once(readline.createInterface({ input: upstream.stdout }), 'line')
  addr = JSON.parse(line).addr
}
const url = `http://${addr}/bench`

const config = {
  client: { name: 'bench' },
  log: { enabled: LOG },
  services: {
    bench: {
      base_url: `http://${addr}`,
      retry: { max_retries: 1 },
      breaker: { failure_threshold: 5, open_ms: 30000 },
      bulkhead: { max_concurrency: 200 },
    },
    // The same service with room for every caller of the c=10,000 row.
    huge: {
      base_url: `http://${addr}`,
      retry: { max_retries: 1 },
      timeouts: { connect_ms: 5000, response_ms: 30000, request_ms: 60000 },
      bulkhead: { max_concurrency: 20000 },
    },
  },
}
const harness = new Client(config)
// The same config with one sync `before` interceptor that adds a header: what an interceptor costs
// (not with an SDK from before `use`, as bench/compare.sh may load).
const intercepted = typeof Client.prototype.use === 'function' ? new Client(config) : null
intercepted?.use({ name: 'bench-header', before: () => ({ headers: { 'x-bench': '1' } }) })
// The same service signing every request in the core (auth type hmac, preset github).
const signedConfig = structuredClone(config)
signedConfig.services.bench.auth = { type: 'hmac', preset: 'github', secret: { value: 'bench-signing-secret' } }
let signed = null
try {
  signed = new Client(signedConfig)
} catch {
  // An SDK from before signed requests (bench/compare.sh may load one): no such row.
}
const agent = new Agent({ keepAliveTimeout: 30000, connections: 128 })

const clients = {
  harness: async () => {
    const r = await harness.get('bench', '/bench')
    return r.status === 200 && r.body.length > 0
  },
  'harness+before': async () => {
    const r = await intercepted.get('bench', '/bench')
    return r.status === 200 && r.body.length > 0
  },
  'harness+hmac': async () => {
    const r = await signed.get('bench', '/bench')
    return r.status === 200 && r.body.length > 0
  },
  'undici.request': async () => {
    const r = await undiciRequest(url, { dispatcher: agent })
    const body = await r.body.arrayBuffer()
    return r.statusCode === 200 && body.byteLength > 0
  },
  fetch: async () => {
    const r = await fetch(url)
    const body = await r.arrayBuffer()
    return r.status === 200 && body.byteLength > 0
  },
}

async function measure(call, concurrency, total) {
  if (concurrency <= 64) for (let i = 0; i < concurrency * 4; i++) await call() // warm the pool
  await Promise.all(Array.from({ length: concurrency }, call))
  const perWorker = Math.floor(total / concurrency)
  const lat = new Float64Array(perWorker * concurrency)
  let n = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = 0; i < perWorker; i++) {
        const s = performance.now()
        if (!(await call())) throw new Error('a bench request failed')
        lat[n++] = performance.now() - s
      }
    }),
  )
  const secs = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  lat.sort()
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]
  return {
    rps: n / secs,
    p50: q(0.5),
    p99: q(0.99),
    cpuPer1k: ((cpu.user + cpu.system) / 1000 / n) * 1000,
  }
}

// BENCH_ONLY=harness (comma list) measures a subset, e.g. under a profiler.
if (ONLY) {
  for (const name of Object.keys(clients)) if (!ONLY.has(name)) delete clients[name]
}
if (!intercepted) delete clients['harness+before']
if (!signed) delete clients['harness+hmac']

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
// Clients measured at concurrency 64 only.
const C64_ONLY = new Set(['harness+before', 'harness+hmac'])
const measured = (concurrency) => Object.entries(clients).filter(([name]) => concurrency === 64 || !C64_ONLY.has(name))

const results = {}
for (const concurrency of LEVELS) {
  const total = concurrency === 1 ? Math.max(1000, Math.floor(TOTAL / 4)) : TOTAL
  for (let round = 0; round < ROUNDS; round++) {
    // Interleaved rounds, so drift (other load on the machine) hits every client alike.
    for (const [name, call] of measured(concurrency)) {
      const key = `${name}@${concurrency}`
      ;(results[key] ??= []).push(await measure(call, concurrency, total))
    }
  }
}

const fmt = (x, d = 0) => x.toFixed(d)
console.log(`harness-sdk vs undici.request vs fetch (Node ${process.version}), loopback upstream in a child process,`)
console.log(`median of ${ROUNDS} interleaved rounds; Harness with retry, breaker and bulkhead on, log line ${LOG ? 'on' : 'off'},`)
console.log(`HARNESS_WORKER_THREADS=${process.env.HARNESS_WORKER_THREADS || 'unset (one worker per core)'}\n`)
console.log('| client | concurrency | req/s | p50 ms | p99 ms | CPU ms / 1k req |')
console.log('|---|---:|---:|---:|---:|---:|')
for (const concurrency of LEVELS) {
  for (const [name] of measured(concurrency)) {
    const rows = results[`${name}@${concurrency}`]
    const m = (k) => median(rows.map((r) => r[k]))
    console.log(`| ${name} | ${concurrency} | ${fmt(m('rps'))} | ${fmt(m('p50'), 3)} | ${fmt(m('p99'), 3)} | ${fmt(m('cpuPer1k'), 1)} |`)
  }
}
const ratio = (k, a, b) =>
  results[a] && results[b] && median(results[a].map((r) => r[k])) / median(results[b].map((r) => r[k]))
if (results['harness@64'] && results['undici.request@64']) console.log(
  `\nat concurrency 64: harness/undici throughput ${fmt(ratio('rps', 'harness@64', 'undici.request@64'), 2)}x, ` +
    `CPU per request ${fmt(ratio('cpuPer1k', 'harness@64', 'undici.request@64'), 2)}x`,
)
if (results['harness@64'] && results['harness+hmac@64']) console.log(
  `at concurrency 64: hmac signing / none: throughput ${fmt(ratio('rps', 'harness+hmac@64', 'harness@64'), 2)}x, ` +
    `CPU per request ${fmt(ratio('cpuPer1k', 'harness+hmac@64', 'harness@64'), 2)}x`,
)
if (results['harness@64'] && results['harness+before@64']) console.log(
  `at concurrency 64: one before interceptor / none: throughput ${fmt(ratio('rps', 'harness+before@64', 'harness@64'), 2)}x, ` +
    `CPU per request ${fmt(ratio('cpuPer1k', 'harness+before@64', 'harness@64'), 2)}x`,
)

// 10,000 in flight: one warm-up pass opens the connections, then the measured rounds; every
// request must succeed and every bulkhead permit must be back when the run ends.
let huge = null
if (HUGE > 0 && clients.harness) {
  const hugeCall = async () => {
    const r = await harness.get('huge', '/bench')
    return r.status === 200 && r.body.length > 0
  }
  const rounds = []
  let errors = 0
  const guarded = async () => {
    try {
      return await hugeCall()
    } catch {
      errors++
      return true
    }
  }
  await Promise.all(Array.from({ length: HUGE }, guarded))
  errors = 0
  for (let round = 0; round < Math.min(ROUNDS, 3); round++) rounds.push(await measure(guarded, HUGE, HUGE * 5))
  const inUse = /^harness_bulkhead_permits_in_use\{service="huge"\} (\d+)/m.exec(harness.metrics())
  huge = { rounds, errors, leaked: inUse ? Number(inUse[1]) : -1 }
  const m = (k) => median(rounds.map((r) => r[k]))
  console.log(`\nharness at ${HUGE} in flight: ${fmt(m('rps'))} req/s, p50 ${fmt(m('p50'), 1)} ms, p99 ${fmt(m('p99'), 1)} ms, ` +
    `CPU ${fmt(m('cpuPer1k'), 1)} ms/1k, errors ${errors}, permits left in use ${huge.leaked}`)
}

if (process.env.BENCH_JSON) {
  const rows = []
  for (const [key, rounds] of Object.entries(results)) {
    const [client, c] = key.split('@')
    const row = { client, concurrency: Number(c), errors: 0, rounds: rounds.map(jsonRound) }
    // bench/summary.py pairs a row marked so with its baseline, round by round.
    if (client === 'harness+before') Object.assign(row, { interceptor: 'one before (adds a header)', baseline: 'harness' })
    if (client === 'harness+hmac') Object.assign(row, { interceptor: 'hmac signing (preset github)', baseline: 'harness' })
    rows.push(row)
  }
  if (huge) rows.push({ client: 'harness', concurrency: HUGE, errors: huge.errors, leaked_permits: huge.leaked, rounds: huge.rounds.map(jsonRound) })
  fs.writeFileSync(process.env.BENCH_JSON, JSON.stringify({ bench: 'node', runtime: `Node ${process.version}`, rows }, null, 1))
}
function jsonRound(r) {
  return { rps: r.rps, p50_ms: r.p50, p99_ms: r.p99, cpu_ms_per_1k: r.cpuPer1k }
}

harness.close()
intercepted?.close()
signed?.close()
await agent.close?.()
upstream?.stdin.end()
