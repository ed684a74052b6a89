'use strict'
// The Node API beyond the shared vectors: cancellation, concurrency, error classes,
// bad input, the response object and process lifetime.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, HarnessError, ConfigError, CancelledError, HttpStatusError, TimeoutError, RateLimitedError } = sdk
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

function config(svc = {}) {
  return { client: { name: 'node-tests' }, log: { enabled: false }, services: { svc: { base_url: upstream.base, ...svc } } }
}

async function script(name, steps) {
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
}

test('1,000 aborted requests leave no bulkhead permit held', async () => {
  await script('abort', [{ action: 'hang' }])
  const client = new Client(config({ bulkhead: { max_concurrency: 1000 }, retry: { max_retries: 0 } }))
  try {
    let aborted = 0
    // Half are aborted while in flight (holding a permit, waiting on the upstream)...
    for (let round = 0; round < 5; round++) {
      const controllers = []
      const calls = []
      for (let i = 0; i < 100; i++) {
        const ac = new AbortController()
        controllers.push(ac)
        calls.push(client.get('svc', '/s/abort/x', { signal: ac.signal }).then(() => null, (e) => e))
      }
      await sleep(50)
      assert.ok(client.bulkheadInUse('svc') > 0, 'requests should hold permits while in flight')
      for (const ac of controllers) ac.abort()
      for (const e of await Promise.all(calls)) {
        assert.ok(e instanceof CancelledError, `expected CancelledError, got ${e}`)
        assert.equal(e.code, 'CancelledError')
        aborted++
      }
    }
    // ...and half the moment they start, racing the first poll of the Rust future.
    const calls = []
    for (let i = 0; i < 500; i++) {
      const ac = new AbortController()
      calls.push(client.get('svc', '/s/abort/x', { signal: ac.signal }).then(() => null, (e) => e))
      ac.abort(new Error('caller gave up'))
    }
    for (const e of await Promise.all(calls)) {
      assert.ok(e instanceof CancelledError, `expected CancelledError, got ${e}`)
      aborted++
    }
    assert.equal(aborted, 1000)
    assert.equal(client.bulkheadInUse('svc'), 0)
    assert.equal(client.breakerState('svc', 'GET', '/s/abort/x'), 'closed')
  } finally {
    client.close()
  }
})

test('an already-aborted signal rejects at once with CancelledError carrying the reason', async () => {
  const client = new Client(config())
  const reason = new Error('too late')
  await assert.rejects(client.get('svc', '/bench', { signal: AbortSignal.abort(reason) }), (e) => {
    assert.ok(e instanceof CancelledError)
    assert.equal(e.cause, reason)
    return true
  })
  client.close()
})

test('256 concurrent requests on one client', async () => {
  const client = new Client(config({ bulkhead: { max_concurrency: 512 } }))
  try {
    const responses = await Promise.all(Array.from({ length: 256 }, (_, i) => client.get('svc', '/bench', { query: { i } })))
    assert.equal(responses.length, 256)
    for (const r of responses) {
      assert.equal(r.status, 200)
      assert.deepEqual(r.json(), { ok: true })
    }
    assert.equal(client.bulkheadInUse('svc'), 0)
  } finally {
    client.close()
  }
})

test('the response object', async () => {
  await script('resp', [{ status: 201, json: { id: 7 }, headers: { 'x-a': '1' } }])
  const client = new Client(config())
  try {
    const r = await client.post('svc', '/s/resp/orders', { json: { sku: 'a' }, headers: { 'x-b': '2' }, idempotencyKey: 'k1' })
    assert.equal(r.status, 201)
    assert.ok(r.ok)
    assert.ok(Buffer.isBuffer(r.body))
    assert.deepEqual(r.json(), { id: 7 })
    assert.equal(r.text(), '{"id":7}')
    assert.equal(r.headers['x-a'], '1')
    assert.equal(r.headers['content-type'], 'application/json')
    assert.equal(r.attempts, 1)
    assert.match(r.traceId, /^[0-9a-f]{32}$/)
    assert.equal(typeof r.elapsedMs, 'number')
    const log = await upstream.admin('GET', '/__admin/log/resp')
    assert.equal(log.requests[0].body, '{"sku":"a"}')
    assert.equal(log.requests[0].headers['x-b'], '2')
    assert.equal(log.requests[0].headers['idempotency-key'], 'k1')
    assert.match(client.metrics(), /harness_/)
    for (const m of ['get', 'put', 'patch', 'delete']) {
      assert.equal((await client[m]('svc', '/bench')).status, 200, m)
    }
    assert.equal((await client.request({ service: 'svc', method: 'POST', path: '/bench', body: 'raw' })).status, 200)
  } finally {
    client.close()
  }
})

test('a cached answer says so (fromCache, no attempt) until cacheClear drops it', async () => {
  await script('node-cache-clear', [{ headers: { 'cache-control': 'max-age=60' }, body: 'v1' }, { body: 'v2' }])
  const client = new Client(config({ cache: { http: true } }))
  try {
    const first = await client.get('svc', '/s/node-cache-clear/r')
    assert.equal(first.fromCache, false)
    assert.equal(first.revalidated, false)
    assert.equal(first.cache.outcome, 'miss')
    const hit = await client.get('svc', '/s/node-cache-clear/r')
    assert.equal(hit.fromCache, true)
    assert.equal(hit.revalidated, false)
    assert.deepEqual(hit.cache, { outcome: 'hit', similarity: null, savedCost: null })
    assert.equal(hit.attempts, 0)
    assert.equal(hit.text(), 'v1')
    assert.equal(client.cacheClear('svc'), 1)
    const after = await client.get('svc', '/s/node-cache-clear/r')
    assert.equal(after.fromCache, false)
    assert.equal(after.attempts, 1)
    assert.equal(after.text(), 'v2')
    assert.throws(() => client.cacheClear('nope'), (e) => e instanceof ConfigError && e.message.includes('unknown service or route `nope`'))
    assert.equal(typeof client.cacheClear(), 'number')
    const log = await upstream.admin('GET', '/__admin/log/node-cache-clear')
    assert.equal(log.requests.length, 2)
    // A call no cache touched carries no stamp.
    const plain = new Client(config())
    try {
      const r = await plain.get('svc', '/s/node-cache-clear/r')
      assert.equal(r.cache, null)
      assert.equal(r.fromCache, false)
    } finally {
      plain.close()
    }
  } finally {
    client.close()
  }
})

test('error classes and their fields', async () => {
  await script('errs', [{ status: 409, json: { code: 'ORDER_EXISTS', message: 'order already exists' } }])
  const client = new Client(config({ retry: { max_retries: 0 } }))
  try {
    const err = await client.post('svc', '/s/errs/orders/123', { json: {}, headers: { authorization: 'Bearer secret-token-xyz' } }).catch((e) => e)
    assert.ok(err instanceof HttpStatusError)
    assert.ok(err instanceof HarnessError)
    assert.ok(err instanceof Error)
    assert.equal(err.name, 'HttpStatusError')
    assert.equal(err.code, 'HttpStatusError')
    assert.equal(err.status, 409)
    assert.equal(err.errorCode, 'ORDER_EXISTS')
    assert.equal(err.service, 'svc')
    assert.equal(err.method, 'POST')
    assert.equal(err.endpoint, '/s/errs/orders/{id}')
    assert.equal(err.attempts, 1)
    assert.match(err.traceId, /^[0-9a-f]{32}$/)
    assert.equal(err.phase, undefined)
    assert.match(err.message, /order already exists/)
    assert.deepEqual(JSON.parse(err.body.toString()), { code: 'ORDER_EXISTS', message: 'order already exists' })
    assert.match(String(err), /^HttpStatusError: /)
    assert.ok(!String(err).includes('secret-token-xyz'))
    assert.ok(!require('node:util').inspect(err).includes('secret-token-xyz'))

    await script('slow', [{ delay_ms: 500 }])
    const t = await client.get('svc', '/s/slow/x', { timeoutMs: 100 }).catch((e) => e)
    assert.ok(t instanceof TimeoutError)
    assert.equal(t.phase, 'total')

    await script('limited', [{ status: 429, retry_after: '2' }])
    const rl = await client.get('svc', '/s/limited/x').catch((e) => e)
    assert.ok(rl instanceof RateLimitedError)
    assert.equal(rl.retryAfterMs, 2000)

    assert.deepEqual(sdk.ERROR_NAMES, [
      'HarnessError', 'TimeoutError', 'CircuitOpenError', 'BulkheadFullError', 'RateLimitedError', 'HttpStatusError',
      'AuthError', 'SchemaError', 'ConnectError', 'CancelledError', 'NoHealthyProviderError', 'ConfigError',
      'ProtocolError', 'ResponseTooLargeError', 'DuplicateInFlightError', 'InterceptorError',
    ])
    for (const name of sdk.ERROR_NAMES) {
      assert.equal(typeof sdk[name], 'function', name)
      assert.ok(name === 'HarnessError' || sdk[name].prototype instanceof HarnessError, name)
    }
  } finally {
    client.close()
  }
})

test('ESM and CommonJS entry points share one class tree', async () => {
  const esm = await import('../index.mjs')
  assert.equal(esm.Client, Client)
  assert.equal(esm.HarnessError, HarnessError)
  assert.equal(esm.default.ConfigError, ConfigError)
  // Every CommonJS export is a named ESM export, the same object, and nothing else is.
  const cjs = require('../index.js')
  assert.deepEqual(Object.keys(esm).filter((k) => k !== 'default').sort(), Object.keys(cjs).sort())
  for (const k of Object.keys(cjs)) assert.equal(esm[k], cjs[k], k)
})

test('bad config gives a ConfigError that names the field', () => {
  const cases = [
    [{ services: { svc: { base_url: 'http://x', retry: { max_retries: -1 } } } }, /^services\.svc\.retry\.max_retries/],
    [{ services: { svc: { base_url: 'http://x', timeouts: { nope_ms: 1 } } } }, /services\.svc\.timeouts/],
    [42, /^config:/],
    [null, /^config:/],
    [path.join(os.tmpdir(), 'harness-no-such-config.yaml'), /./],
  ]
  for (const [cfg, re] of cases) {
    assert.throws(() => new Client(cfg), (e) => {
      assert.ok(e instanceof ConfigError, `${JSON.stringify(cfg)}: ${e}`)
      assert.equal(e.code, 'ConfigError')
      assert.match(e.message, re)
      return true
    })
  }
})

test('a config file path works', async () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'harness-node-')), 'harness.json')
  fs.writeFileSync(file, JSON.stringify(config()))
  const client = new Client(file)
  assert.equal((await client.get('svc', '/bench')).status, 200)
  client.close()
})

test('bad request input gives a ConfigError that names the field', async () => {
  const client = new Client(config())
  try {
    const cases = [
      [{ service: 1, method: 'GET', path: '/x' }, /^request\.service/],
      [{ service: 'svc', method: 'GET', path: 5 }, /^request\.path/],
      [{ service: 'svc', method: 'GET', path: 'no-slash' }, /^request\.path/],
      [{ service: 'svc', method: 'G E T', path: '/x' }, /^request\.method/],
      [{ service: 'svc', method: 'GET', path: '/x', timeoutMs: -1 }, /^request\.timeout/],
      [{ service: 'svc', method: 'GET', path: '/x', timeoutMs: '5' }, /^request\.timeoutMs/],
      [{ service: 'svc', method: 'GET', path: '/x', headers: 'x' }, /^request\.headers/],
      [{ service: 'svc', method: 'GET', path: '/x', body: 12 }, /^request\.body/],
      [{ service: 'svc', method: 'GET', path: '/x', signal: {} }, /^request\.signal/],
      [{ service: 'nope', method: 'GET', path: '/x' }, /service/],
    ]
    for (const [opts, re] of cases) {
      await assert.rejects(client.request(opts), (e) => {
        assert.ok(e instanceof ConfigError, `${JSON.stringify(opts)}: ${e}`)
        assert.match(e.message, re)
        return true
      })
    }
    assert.throws(() => client.bulkheadInUse('nope'), ConfigError)
    client.close()
    await assert.rejects(client.get('svc', '/bench'), HarnessError)
  } finally {
    client.close()
  }
})

test('a fractional timeoutMs is refused naming request.timeout_ms, as every *_ms the core reads; a whole one is used', async () => {
  const client = new Client(config())
  try {
    for (const timeoutMs of [1.5, 0.25, Number.NaN, Infinity, -1]) {
      await assert.rejects(client.get('svc', '/bench', { timeoutMs }), (e) => {
        assert.ok(e instanceof ConfigError, `${timeoutMs}: ${e}`)
        assert.match(e.message, /^request\.timeout_ms: expected an integer >= 0/)
        return true
      })
    }
    // The same rule in a config: the core refuses a fraction in a `*_ms`, naming the field.
    assert.throws(() => new Client({ services: { svc: { base_url: 'http://127.0.0.1:9', timeouts: { request_ms: 1.5 } } } }), (e) => {
      assert.ok(e instanceof ConfigError, String(e))
      assert.match(e.message, /request_ms/)
      return true
    })
    assert.equal((await client.get('svc', '/bench', { timeoutMs: 2000 })).status, 200)
  } finally {
    client.close()
  }
})

function runChild(code) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, UPSTREAM: upstream.base, SDK: path.resolve(__dirname, '..') },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`the child process did not exit on its own; output: ${out}`))
    }, 5000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

test('the process exits on its own after close()', async () => {
  const { code, out } = await runChild(`
    const { Client } = require(process.env.SDK)
    const c = new Client({ log: { enabled: false }, services: { svc: { base_url: process.env.UPSTREAM } } })
    c.get('svc', '/bench').then((r) => { console.log(r.status); c.close() })
  `)
  assert.equal(code, 0)
  assert.equal(out.trim(), '200')
})

test('the process exits on its own with an idle client, even one never closed', async () => {
  const { code, out } = await runChild(`
    const { Client } = require(process.env.SDK)
    const c = new Client({ log: { enabled: false }, services: { svc: { base_url: process.env.UPSTREAM } } })
    const ac = new AbortController()
    c.get('svc', '/bench', { signal: ac.signal }).then((r) => console.log(r.status))
  `)
  assert.equal(code, 0)
  assert.equal(out.trim(), '200')
})
