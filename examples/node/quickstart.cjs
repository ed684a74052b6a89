// Quickstart, CommonJS: a resilient call with harness-sdk against the embedded test upstream.
//
//   cargo build -p harness-upstream && npm install ./bindings-node
//   node examples/node/quickstart.cjs
//
// In your own app: `const { Client, HttpStatusError } = require('harness-sdk')`.
'use strict'
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const readline = require('node:readline')

const { Client, HttpStatusError } = require('../../bindings-node')

const bin = process.env.HARNESS_UPSTREAM_BIN ?? path.join(__dirname, '..', '..', 'target', 'x86_64-unknown-linux-gnu', 'debug', 'harness-upstream')

async function main() {
  // The upstream prints {"addr":...} and serves until its stdin closes.
  const upstream = spawn(bin, [], { stdio: ['pipe', 'pipe', 'inherit'] })
  const [line] = await once(readline.createInterface({ input: upstream.stdout }), 'line')
  const base = `http://${JSON.parse(line).addr}`
  // A flaky endpoint: one 503, then the order.
  await fetch(`${base}/__admin/script/quickstart`, {
    method: 'PUT',
    body: JSON.stringify({ steps: [{ status: 503 }, { status: 200, json: { id: 42, status: 'shipped' } }] }),
  })
  const client = new Client({
    client: { name: 'quickstart' },
    log: { enabled: false },
    services: { orders: { base_url: base, retry: { max_retries: 2, base_delay_ms: 50 } } },
  })
  try {
    const res = await client.get('orders', '/s/quickstart/orders/42')
    console.log(`GET /orders/42 -> ${res.status} after ${res.attempts} attempts`, res.json())
    await client.get('orders', '/s/none/orders/7').catch((err) => {
      if (!(err instanceof HttpStatusError)) throw err
      console.log(`${err.code}: status=${err.status}`)
    })
  } finally {
    client.close()
    upstream.stdin.end()
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
