// Quickstart: a resilient call with harness-sdk against the embedded test upstream.
//
//   cargo build -p harness-upstream && npm install ./bindings-node
//   node examples/node/quickstart.mjs
//
// In your own app: `import { Client, HttpStatusError } from 'harness-sdk'`.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import readline from 'node:readline'
import { fileURLToPath } from 'node:url'

import { Client, HarnessError, HttpStatusError } from '../../bindings-node/index.mjs'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const bin = process.env.HARNESS_UPSTREAM_BIN ?? path.join(repoRoot, 'target', 'x86_64-unknown-linux-gnu', 'debug', 'harness-upstream')

// The upstream prints {"addr":...} and serves until its stdin closes.
const upstream = spawn(bin, [], { stdio: ['pipe', 'pipe', 'inherit'] })
const [line] = await once(readline.createInterface({ input: upstream.stdout }), 'line')
const base = `http://${JSON.parse(line).addr}`

// Script a flaky endpoint: one 503, then success.
await fetch(`${base}/__admin/script/quickstart`, {
  method: 'PUT',
  body: JSON.stringify({ steps: [{ status: 503 }, { status: 200, json: { id: 42, status: 'shipped' } }] }),
})

const client = new Client({
  client: { name: 'quickstart' },
  log: { enabled: false },
  services: {
    orders: {
      base_url: base,
      timeouts: { connect_ms: 500, response_ms: 1000, request_ms: 5000 },
      retry: { max_retries: 2, base_delay_ms: 50 },
      breaker: { failure_threshold: 5, open_ms: 30000 },
      bulkhead: { max_concurrency: 64 },
    },
  },
})

try {
  const res = await client.get('orders', '/s/quickstart/orders/42')
  console.log(`GET /orders/42 -> ${res.status} after ${res.attempts} attempts in ${res.elapsedMs.toFixed(1)} ms`, res.json())

  await fetch(`${base}/__admin/script/missing`, {
    method: 'PUT',
    body: JSON.stringify({ steps: [{ status: 404, json: { code: 'NOT_FOUND', message: 'no such order' } }] }),
  })
  try {
    await client.get('orders', '/s/missing/orders/7')
  } catch (err) {
    if (!(err instanceof HttpStatusError)) throw err
    console.log(`${err.code}: status=${err.status} errorCode=${err.errorCode} endpoint=${err.endpoint} trace=${err.traceId}`)
  }

  const ac = new AbortController()
  setTimeout(() => ac.abort(), 50)
  await fetch(`${base}/__admin/script/hang`, { method: 'PUT', body: JSON.stringify({ steps: [{ action: 'hang' }] }) })
  await client.get('orders', '/s/hang/x', { signal: ac.signal }).catch((err) => {
    if (!(err instanceof HarnessError)) throw err
    console.log(`aborted: ${err.code}, permits held afterwards: ${client.bulkheadInUse('orders')}`)
  })

  const requests = client.metrics().split('\n').filter((l) => l.startsWith('harness_requests_total'))
  console.log(requests.join('\n'))
} finally {
  client.close()
  upstream.stdin.end()
}
