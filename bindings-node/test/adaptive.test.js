'use strict'
// Adaptive resilience from Node, against the real loopback upstream: a sliding-window breaker
// and its details, a consecutive breaker on the same traffic, the half-open ramp, bulkhead
// limits (fixed, adaptive, unknown service), and hedging as config (the core tests the policy).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const { Client, CircuitOpenError, ConfigError, HttpStatusError } = require('..')
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

function config(services) {
  return { client: { name: 'node-adaptive' }, log: { enabled: false }, services }
}

// 503, 200, 200 repeated: 30% failures, never two in a row.
function thirtyPercent(rounds) {
  const steps = []
  for (let i = 0; i < rounds; i++) steps.push({ status: 503, json: { code: 'busy' } }, { status: 200, json: { ok: true } }, { status: 200, json: { ok: true } })
  return { steps }
}

// Resolves to 'ok' for an answer, or the error's class name.
async function outcome(promise) {
  try {
    await promise
    return 'ok'
  } catch (e) {
    return e.constructor.name
  }
}

const close = (a, b) => Math.abs(a - b) < 1e-9

test('a sliding-window breaker opens on a 30% failure rate; its details follow every call; a consecutive one stays closed', async () => {
  const p = '/s/node-adaptive-window/items'
  const client = new Client(
    config({
      win: {
        base_url: upstream.base,
        retry: { max_retries: 0 },
        breaker: { mode: 'sliding_window', window: { type: 'count', size: 10 }, minimum_calls: 10, failure_rate_threshold: 0.3, open_ms: 60_000 },
      },
    }),
  )
  try {
    await upstream.admin('PUT', '/__admin/script/node-adaptive-window', thirtyPercent(10))
    const fresh = client.breakerDetails('win', 'get', p)
    assert.deepEqual(fresh, {
      service: 'win',
      endpoint: p,
      method: 'GET',
      state: 'closed',
      phase: 'closed',
      admitRatio: 1,
      calls: 0,
      failureRate: 0,
      slowCallRate: 0,
    })
    let failures = 0
    // Nine calls: below minimum_calls, so no decision yet whatever the rate (3/9 is above 0.3).
    for (let i = 1; i <= 9; i++) {
      const failed = i % 3 === 1
      if (failed) {
        failures++
        await assert.rejects(client.get('win', p), (e) => e instanceof HttpStatusError && e.status === 503)
      } else {
        assert.equal((await client.get('win', p)).status, 200)
      }
      const d = client.breakerDetails('win', 'GET', p)
      assert.equal(d.state, 'closed', `after ${i} calls`)
      assert.equal(d.phase, 'closed')
      assert.equal(d.admitRatio, 1)
      assert.equal(d.calls, i)
      assert.ok(close(d.failureRate, failures / i), `after ${i} calls: ${d.failureRate}`)
      assert.equal(d.slowCallRate, 0)
      if (i === 6) {
        // The window's gauges are set when metrics are read.
        const metrics = client.metrics()
        assert.match(metrics, /harness_breaker_failure_rate\{[^}]*service="win"[^}]*\} 0\.333/)
        assert.match(metrics, /harness_breaker_slow_call_rate\{[^}]*service="win"[^}]*\} 0(\.0)?\n/)
        assert.match(metrics, /harness_breaker_admit_ratio\{[^}]*service="win"[^}]*\} 1(\.0)?\n/)
      }
    }
    assert.equal(failures, 3)

    // The tenth (a 503) makes 4/10 >= 0.3 over a full window: open.
    await assert.rejects(client.get('win', p), HttpStatusError)
    const open = client.breakerDetails('win', 'GET', p)
    assert.equal(open.state, 'open')
    assert.equal(open.phase, 'open')
    assert.equal(open.admitRatio, 0)
    assert.equal(client.breakerState('win', 'GET', p), 'open')
    await assert.rejects(client.get('win', p), (e) => {
      assert.ok(e instanceof CircuitOpenError, String(e))
      assert.equal(e.code, 'CircuitOpenError')
      assert.equal(e.service, 'win')
      return true
    })
    assert.equal((await upstream.admin('GET', '/__admin/stats/node-adaptive-window')).requests, 10)
    assert.match(client.metrics(), /harness_breaker_admit_ratio\{[^}]*service="win"[^}]*\} 0(\.0)?\n/)
  } finally {
    client.close()
  }

  // The same traffic through a consecutive breaker (3 in a row): never two failures in a row.
  const consecutive = new Client(config({ cons: { base_url: upstream.base, retry: { max_retries: 0 }, breaker: { failure_threshold: 3 } } }))
  const q = '/s/node-adaptive-consecutive/items'
  try {
    await upstream.admin('PUT', '/__admin/script/node-adaptive-consecutive', thirtyPercent(10))
    const outcomes = []
    for (let i = 0; i < 30; i++) outcomes.push(await outcome(consecutive.get('cons', q)))
    assert.equal(outcomes.filter((o) => o === 'HttpStatusError').length, 10)
    assert.equal(outcomes.filter((o) => o === 'ok').length, 20)
    const d = consecutive.breakerDetails('cons', 'GET', q)
    assert.equal(d.state, 'closed')
    assert.equal(d.phase, 'closed')
    assert.equal(d.calls, 0) // windows are for sliding_window breakers
    assert.equal((await upstream.admin('GET', '/__admin/stats/node-adaptive-consecutive')).requests, 30)
  } finally {
    consecutive.close()
  }
})

test('after the probe the breaker ramps: admitRatio 0.5, and of the next 10 calls 5 pass and 5 are refused', async () => {
  const p = '/s/node-adaptive-ramp/items'
  const client = new Client(
    config({
      ramp: {
        base_url: upstream.base,
        retry: { max_retries: 0 },
        breaker: { failure_threshold: 1, open_ms: 200, half_open: { probes: 1, ramp: [0.5, 1.0], step_ms: 2000 } },
      },
    }),
  )
  try {
    await upstream.admin('PUT', '/__admin/script/node-adaptive-ramp', { steps: [{ status: 503 }, { status: 200, json: { ok: true } }] })
    await assert.rejects(client.get('ramp', p), HttpStatusError)
    assert.equal(client.breakerDetails('ramp', 'GET', p).state, 'open')
    await assert.rejects(client.get('ramp', p), CircuitOpenError)

    await new Promise((r) => setTimeout(r, 300))
    const probing = client.breakerDetails('ramp', 'GET', p)
    assert.equal(probing.state, 'half_open')
    assert.equal(probing.phase, 'probing')

    assert.equal((await client.get('ramp', p)).status, 200) // the probe
    const ramping = client.breakerDetails('ramp', 'GET', p)
    assert.equal(ramping.state, 'half_open')
    assert.equal(ramping.phase, 'ramping')
    assert.equal(ramping.admitRatio, 0.5)

    const outcomes = []
    for (let i = 0; i < 10; i++) outcomes.push(await outcome(client.get('ramp', p)))
    assert.equal(outcomes.filter((o) => o === 'ok').length, 5, outcomes.join(' '))
    assert.equal(outcomes.filter((o) => o === 'CircuitOpenError').length, 5, outcomes.join(' '))
    assert.equal((await upstream.admin('GET', '/__admin/stats/node-adaptive-ramp')).requests, 1 + 1 + 5)
  } finally {
    client.close()
  }
})

test('bulkheadLimit: fixed, adaptive before traffic, an unknown service; bad arguments are ConfigErrors', () => {
  const client = new Client(
    config({
      fixed: { base_url: upstream.base, bulkhead: { max_concurrency: 7 } },
      adaptive: { base_url: upstream.base, bulkhead: { adaptive: { algorithm: 'vegas', initial: 20 } } },
    }),
  )
  try {
    assert.equal(client.bulkheadLimit('fixed'), 7)
    assert.equal(client.bulkheadLimit('adaptive'), 20)
    assert.equal(client.bulkheadInUse('adaptive'), 0)
    assert.match(client.metrics(), /harness_bulkhead_limit\{service="fixed"\} 7/)
    const configError = (fn, pattern) =>
      assert.throws(fn, (e) => {
        assert.ok(e instanceof ConfigError, String(e))
        assert.equal(e.code, 'ConfigError')
        assert.match(e.message, pattern)
        assert.ok(e.stack.includes('adaptive.test.js'), e.stack)
        return true
      })
    configError(() => client.bulkheadLimit('nope'), /^service: unknown service `nope`/)
    configError(() => client.bulkheadLimit(7), /^request\.service: expected a string/)
    configError(() => client.breakerDetails('fixed', 'GET'), /^request\.path: expected a string/)
    configError(() => client.breakerDetails('fixed', 'GET', '/x', 5), /^request\.endpoint: expected a string/)
    // An explicit endpoint names the breaker; an unknown service shows a closed one, as breakerState does.
    const d = client.breakerDetails('fixed', 'post', '/orders/42', 'POST /orders/{id}')
    assert.equal(d.endpoint, 'POST /orders/{id}')
    assert.equal(d.method, 'POST')
    assert.equal(client.breakerDetails('nope', 'GET', '/x').state, client.breakerState('nope', 'GET', '/x'))
  } finally {
    client.close()
  }
})

test('hedging from config: slow GETs are hedged and counted; a POST without an idempotency key never is', async () => {
  const client = new Client(config({ hedged: { base_url: upstream.base, retry: { max_retries: 0 }, hedge: { after_ms: 20, budget_ratio: 1.0 } } }))
  const sent = () => Number((client.metrics().match(/harness_hedges_sent_total\{service="hedged"\} (\d+)/) || [0, 0])[1])
  try {
    await upstream.admin('PUT', '/__admin/script/node-adaptive-hedge', { steps: [{ status: 200, json: { ok: true }, delay_ms: 200 }] })
    let calls = 0
    for (let round = 0; round < 5; round++) {
      const batch = []
      for (let i = 0; i < 5; i++) batch.push(client.get('hedged', '/s/node-adaptive-hedge/items'))
      for (const r of await Promise.all(batch)) assert.deepEqual(r.json(), { ok: true })
      calls += batch.length
    }
    const hedges = sent()
    assert.ok(hedges > 0, client.metrics())
    const stats = await upstream.admin('GET', '/__admin/stats/node-adaptive-hedge')
    assert.ok(stats.requests > calls, JSON.stringify(stats))

    await upstream.admin('PUT', '/__admin/script/node-adaptive-post', { steps: [{ status: 200, json: { ok: true }, delay_ms: 200 }] })
    const posts = []
    for (let i = 0; i < 5; i++) posts.push(client.post('hedged', '/s/node-adaptive-post/items', { json: { i } }))
    await Promise.all(posts)
    assert.equal((await upstream.admin('GET', '/__admin/stats/node-adaptive-post')).requests, 5)
    assert.equal(sent(), hedges)
  } finally {
    client.close()
  }
})

test('the type declarations cover breakerDetails, bulkheadLimit and the breaker, bulkhead and hedge config (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'adaptive-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
