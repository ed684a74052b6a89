'use strict'
// Mock mode and fault injection from Node: `client.mock()` as a unit test would use it (no
// downstream at all), the pipeline running on a mock, bad mock input, and faults from config
// against the real loopback upstream (the error, the record's `fault`, the metric).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const { Client, ConfigError, ConnectError, HttpStatusError, TimeoutError } = require('..')
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

// Port 9 (discard) on loopback: nothing listens, so a request that reaches the network fails fast.
function nowhere(svc = {}) {
  return {
    client: { name: 'node-mock' },
    log: { enabled: false },
    services: { orders: { base_url: 'http://127.0.0.1:9', retry: { max_retries: 0 }, timeouts: { connect_ms: 1000 }, ...svc } },
  }
}

test('a mock answers with the captured id, the latest mock wins, an unmatched path and clearMocks fail', async () => {
  const client = new Client(nowhere())
  try {
    client.mock('orders', 'GET', '/orders/{id}', { json: { id: '{id}', state: 'paid' } })
    const r = await client.get('orders', '/orders/42')
    assert.equal(r.status, 200)
    assert.deepEqual(r.json(), { id: '42', state: 'paid' })
    assert.equal(r.attempts, 1)

    client.mock('orders', 'GET', '/orders/7', { status: 202, json: { id: '7', state: 'refunded' }, headers: { 'x-mock': 'yes' } })
    const seven = await client.get('orders', '/orders/7')
    assert.equal(seven.status, 202)
    assert.deepEqual(seven.json(), { id: '7', state: 'refunded' })
    assert.equal(seven.headers['x-mock'], 'yes')
    assert.deepEqual((await client.get('orders', '/orders/8')).json(), { id: '8', state: 'paid' })

    // A text body, any method.
    client.mock('orders', '*', '/notes', { status: 201, body: 'noted' })
    const note = await client.post('orders', '/notes', { json: { n: 1 } })
    assert.equal(note.status, 201)
    assert.equal(note.text(), 'noted')

    // Mocks outlive a reload.
    client.reload(nowhere({ retry: { max_retries: 1 } }))
    assert.equal((await client.get('orders', '/orders/9')).json().id, '9')

    await assert.rejects(client.get('orders', '/customers/1'), (e) => {
      assert.ok(e instanceof ConfigError, String(e))
      assert.match(e.message, /GET \/customers\/1/)
      return true
    })
    await assert.rejects(client.delete('orders', '/orders/42'), (e) => e instanceof ConfigError && /DELETE \/orders\/42/.test(e.message))

    client.clearMocks('orders')
    await assert.rejects(client.get('orders', '/orders/42'), (e) => {
      assert.ok(e instanceof ConnectError, String(e))
      return true
    })

    // clearMocks() with no service clears every one.
    client.mock('orders', 'GET', '*', { status: 204 })
    assert.equal((await client.get('orders', '/anything')).status, 204)
    client.clearMocks()
    await assert.rejects(client.get('orders', '/anything'), ConnectError)
  } finally {
    client.close()
  }
})

test('the pipeline runs on a mock: latency past response_ms is a TimeoutError after every retry', async () => {
  const client = new Client(nowhere({ retry: { max_retries: 2, base_delay_ms: 1, max_delay_ms: 2, jitter: false }, timeouts: { response_ms: 50 } }))
  const finished = []
  client.on('request_finished', (e) => finished.push(e))
  try {
    client.mock('orders', 'GET', '/slow', { json: { late: true }, latencyMs: 400 })
    await assert.rejects(client.get('orders', '/slow'), (e) => {
      assert.ok(e instanceof TimeoutError, String(e))
      assert.equal(e.phase, 'response')
      assert.equal(e.attempts, 3)
      return true
    })
    client.flush()
    assert.equal(finished.length, 1)
    assert.equal(finished[0].error_kind, 'TimeoutError')
    assert.equal(finished[0].attempts, 3)
    assert.equal('fault' in finished[0], false)
    assert.match(client.metrics(), /harness_requests_total\{[^}]*service="orders"/)
  } finally {
    client.close()
  }
})

test('bad mock input is a ConfigError naming the field', () => {
  const client = new Client(nowhere())
  try {
    const bad = (fn, pattern) =>
      assert.throws(fn, (e) => {
        assert.ok(e instanceof ConfigError, String(e))
        assert.match(e.message, pattern)
        assert.ok(e.stack.includes('mock.test.js'), e.stack)
        return true
      })
    bad(() => client.mock('nope', 'GET', '/orders/{id}', { json: {} }), /^mock: unknown service `nope`/)
    bad(() => client.mock('orders', 'GET', 'orders', { json: {} }), /^mock\.match\.path: .*"orders"/)
    bad(() => client.mock('orders', 'NOT A METHOD', '/x'), /^mock\.match\.method/)
    bad(() => client.mock('orders', 'GET', '/x', { status: 101 }), /^mock\.status: .*101/)
    bad(() => client.mock('orders', 'GET', '/x', { status: 70000 }), /^mock\.status: .*70000/)
    bad(() => client.mock('orders', 'GET', '/x', { status: '200' }), /^mock\.status/)
    bad(() => client.mock('orders', 'GET', '/x', { json: {}, body: 'both' }), /^mock: give `json` or `body`/)
    bad(() => client.mock('orders', 'GET', '/x', { json: { n: NaN } }), /^mock\.json: NaN/)
    bad(() => client.mock('orders', 'GET', '/x', { body: 42 }), /^mock\.body: expected a string/)
    bad(() => client.mock('orders', 'GET', '/x', { headers: { 'bad name': 'v' } }), /^mock\.headers\.bad name/)
    bad(() => client.mock('orders', 'GET', '/x', { latencyMs: -1 }), /^mock\.latency_ms: expected an integer >= 0/)
    bad(() => client.mock('orders', 'GET', '/x', { latencyMs: 1.5 }), /^mock\.latency_ms/)
    bad(() => client.mock('orders', 'GET', '/x', []), /^mock\.response/)
    bad(() => client.mock('orders', undefined, '/x'), /^mock\.method: expected a string/)
    bad(() => client.clearMocks(7), /^clearMocks\.service: expected a string/)
    // A rejected mock leaves the service on the network.
    assert.equal(client.bulkheadInUse('orders'), 0)
  } finally {
    client.close()
  }
})

test('an injected 503 from config: HttpStatusError injected_fault, the record names the fault, the metric counts it', async () => {
  const client = new Client({
    client: { name: 'node-faults' },
    log: { enabled: false },
    services: { svc: { base_url: upstream.base, retry: { max_retries: 1, base_delay_ms: 1, max_delay_ms: 2, jitter: false } } },
    faults: { enabled: true, seed: 1, rules: [{ service: 'svc', rate: 1.0, fault: 'status', status: 503 }] },
  })
  const finished = []
  client.on('request_finished', (e) => finished.push(e))
  try {
    await upstream.admin('PUT', '/__admin/script/node-faults', { steps: [{ status: 200, json: { ok: true } }] })
    await assert.rejects(client.get('svc', '/s/node-faults/x'), (e) => {
      assert.ok(e instanceof HttpStatusError, String(e))
      assert.equal(e.status, 503)
      assert.equal(e.errorCode, 'injected_fault')
      assert.equal(e.attempts, 2)
      return true
    })
    client.flush()
    assert.equal(finished.length, 1)
    assert.equal(finished[0].fault, 'status')
    assert.equal(finished[0].status, 503)
    assert.match(client.metrics(), /harness_faults_injected_total\{service="svc",fault="status"\} 2/)

    // The status fault answers without sending; reloaded off, the same call reaches the upstream.
    assert.equal((await upstream.admin('GET', '/__admin/log/node-faults')).requests.length, 0)
    client.reload({ client: { name: 'node-faults' }, log: { enabled: false }, services: { svc: { base_url: upstream.base } } })
    const ok = await client.get('svc', '/s/node-faults/x')
    assert.deepEqual(ok.json(), { ok: true })
    assert.equal((await upstream.admin('GET', '/__admin/log/node-faults')).requests.length, 1)
    client.flush()
    assert.equal(finished.length, 2)
    assert.equal('fault' in finished[1], false)
  } finally {
    client.close()
  }
})

test('the type declarations cover mock, clearMocks and the mock and faults config (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'mock-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
