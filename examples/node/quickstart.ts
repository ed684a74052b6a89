// Quickstart in TypeScript: typed requests, typed errors.
//
//   cargo build -p harness-upstream && npm install ./bindings-node
//   bash bindings-node/run-ts-example.sh      (tsc, then node)
//
// In your own app: `import { Client, HttpStatusError, type Response } from 'harness-sdk'`.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import readline from 'node:readline'

import { Client, HarnessError, HttpStatusError, TimeoutError, type Response } from '../../bindings-node/index.js'

interface Order {
  id: number
  status: string
}

async function main(): Promise<void> {
  const repoRoot = path.resolve(__dirname, '..', '..')
  const bin = process.env.HARNESS_UPSTREAM_BIN ?? path.join(repoRoot, 'target', 'x86_64-unknown-linux-gnu', 'debug', 'harness-upstream')
  const upstream = spawn(bin, [], { stdio: ['pipe', 'pipe', 'inherit'] })
  const [line] = (await once(readline.createInterface({ input: upstream.stdout! }), 'line')) as [string]
  const base = `http://${(JSON.parse(line) as { addr: string }).addr}`

  await fetch(`${base}/__admin/script/quickstart-ts`, {
    method: 'PUT',
    body: JSON.stringify({ steps: [{ status: 503 }, { status: 201, json: { id: 7, status: 'created' } }] }),
  })

  const client = new Client({
    client: { name: 'quickstart-ts' },
    log: { enabled: false },
    services: { orders: { base_url: base, retry: { max_retries: 2, base_delay_ms: 50 } } },
  })
  try {
    const res: Response = await client.post('orders', '/s/quickstart-ts/orders', {
      json: { sku: 'abc', qty: 1 },
      idempotencyKey: 'order-abc-1',
    })
    const order = res.json<Order>()
    console.log(`POST /orders -> ${res.status} (${res.attempts} attempts): order ${order.id} is ${order.status}`)

    await fetch(`${base}/__admin/script/slow`, { method: 'PUT', body: JSON.stringify({ steps: [{ delay_ms: 500 }] }) })
    try {
      await client.get('orders', '/s/slow/orders/7', { timeoutMs: 100 })
    } catch (err) {
      if (err instanceof TimeoutError) console.log(`${err.code} (phase ${err.phase}) after ${err.attempts} attempt(s)`)
      else if (err instanceof HttpStatusError) console.log(`status ${err.status}`)
      else if (err instanceof HarnessError) console.log(err.code)
      else throw err
    }
  } finally {
    client.close()
    upstream.stdin!.end()
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
