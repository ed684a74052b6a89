'use strict'
// Interceptors from Node (`client.use` / `removeInterceptor`), against the shared upstream: what
// `before` changes (headers, query, JSON and byte bodies) reaches the upstream; an attempt
// interceptor runs on every retry and an application one once; `after` turns a 200 carrying an
// error code into a retried failure with a `Reject`; raising, hanging and hostile interceptors are
// InterceptorErrors that send nothing and leave the client healthy; a slow interceptor (sync or
// async) holds only its own calls; a secret an interceptor adds stays out of errors.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const util = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')

const { Client, Reject, InterceptorError, HttpStatusError, ConfigError, HarnessError } = require('..')
const { startUpstream } = require('./upstream')

let upstream
// A rejection nobody handled would mean an interceptor's error escaped the binding.
const unhandled = []
const onUnhandled = (e) => unhandled.push(e)
before(async () => {
  process.on('unhandledRejection', onUnhandled)
  upstream = await startUpstream()
})
after(async () => {
  process.off('unhandledRejection', onUnhandled)
  await upstream.stop()
})

let lastScript = 0

// A fresh script name with these steps; requests go to `/s/<name>/...`.
async function script(steps) {
  const name = `node-icpt-${process.pid}-${++lastScript}`
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
  return name
}

async function log(name) {
  return (await upstream.admin('GET', `/__admin/log/${name}`)).requests
}

function client(extra = {}) {
  const base = {
    log: { enabled: false },
    services: {
      svc: { base_url: upstream.base, retry: { max_retries: 3, base_delay_ms: 1, max_delay_ms: 5, jitter: false } },
      other: { base_url: upstream.base },
    },
  }
  const merge = (a, b) => {
    for (const [k, v] of Object.entries(b)) a[k] = v !== null && typeof v === 'object' && !Array.isArray(v) && typeof a[k] === 'object' ? merge({ ...a[k] }, v) : v
    return a
  }
  return new Client(merge(base, extra))
}

const rejected = (p) => p.then((r) => assert.fail(`expected an error, got status ${r.status}`), (e) => e)

test('before changes headers, query and the JSON body as the upstream sees them; after sees the answer', async () => {
  const s = await script([{ json: { ok: true } }])
  const c = client()
  try {
    const seen = { before: [], after: [] }
    const name = c.use({
      name: 'tenant',
      before(r) {
        seen.before.push(r)
        return { headers: { 'x-tenant': 'acme', 'x-drop': null }, query: { region: 'eu' }, json: { ...r.json, tenant: 'acme' } }
      },
      after(r) {
        seen.after.push(r)
        return 'ignored'
      },
    })
    assert.equal(name, 'tenant')
    const r = await c.post('svc', `/s/${s}/orders`, { json: { order: 7 }, headers: { 'x-drop': '1' }, query: { page: 2 } })
    assert.equal(r.status, 200)

    const [req] = seen.before
    assert.deepEqual(
      { name: req.name, level: req.level, method: req.method, service: req.service, path: req.path, attempt: req.attempt, provider: req.provider },
      { name: 'tenant', level: 'application', method: 'POST', service: 'svc', path: `/s/${s}/orders`, attempt: null, provider: null },
    )
    assert.deepEqual(req.json, { order: 7 })
    assert.ok(Buffer.isBuffer(req.body) && req.body.toString() === '{"order":7}', util.inspect(req.body))
    assert.ok(req.headers.some(([k, v]) => k === 'x-drop' && v === '1'), util.inspect(req.headers))
    assert.deepEqual(req.query, [['page', '2']])
    assert.equal(req.traceId, r.traceId)

    const [sent] = await log(s)
    assert.equal(sent.headers['x-tenant'], 'acme')
    assert.ok(!('x-drop' in sent.headers))
    assert.equal(sent.path, `/s/${s}/orders?page=2&region=eu`)
    assert.deepEqual(JSON.parse(sent.body), { order: 7, tenant: 'acme' })

    // `after` saw the answer, without its body (not asked for); what it returned is ignored.
    const [resp] = seen.after
    assert.equal(resp.status, 200)
    assert.equal(resp.body, null)
    assert.equal(resp.json, null)
    assert.equal(resp.traceId, r.traceId)
    assert.ok(typeof resp.elapsedMs === 'number' && resp.elapsedMs >= 0)
    assert.ok(resp.headers.some(([k]) => k === 'content-type'), util.inspect(resp.headers))
  } finally {
    c.close()
  }
})

test('async before and after: a byte body (Buffer or Uint8Array), a new path and query removal; wantBody shows the answer', async () => {
  const s = await script([{ json: { answer: 42 } }])
  const c = client()
  try {
    let answer
    c.use({
      name: 'bytes',
      wantBody: true,
      async before(r) {
        await sleep(5)
        assert.equal(r.body.toString(), 'plain text')
        return { body: Buffer.from('changed bytes'), path: `/s/${s}/moved`, query: new Map([['drop', null]]), headers: new Map([['x-async', 'yes']]) }
      },
      async after(r) {
        await sleep(5)
        answer = r
      },
    })
    const r = await c.post('svc', `/s/${s}/orig`, { body: Buffer.from('plain text'), query: { drop: '1', keep: '2' } })
    assert.equal(r.status, 200)
    let [sent] = await log(s)
    assert.equal(sent.path, `/s/${s}/moved?keep=2`)
    assert.equal(sent.body, 'changed bytes')
    assert.equal(sent.headers['x-async'], 'yes')
    assert.ok(Buffer.isBuffer(answer.body))
    assert.deepEqual(JSON.parse(answer.body.toString()), { answer: 42 })
    assert.deepEqual(answer.json, { answer: 42 })

    // A Uint8Array (a view into a larger buffer) crosses as exactly its bytes.
    c.use({ name: 'bytes', before: () => ({ body: new Uint8Array(Buffer.from('xxsubyy')).subarray(2, 5) }) })
    await c.post('svc', `/s/${s}/orig`, { body: 'a' })
    sent = (await log(s))[1]
    assert.equal(sent.body, 'sub')
  } finally {
    c.close()
  }
})

test('an attempt interceptor runs on every retry, an application one once', async () => {
  const s = await script([{ status: 503, times: 2 }, { json: { ok: true } }])
  const c = client()
  try {
    const app = { before: 0, after: 0 }
    const attempts = []
    let attemptAfters = 0
    c.use({ name: 'app', before: () => void app.before++, after: () => void app.after++ })
    c.use({
      name: 'per-attempt',
      level: 'attempt',
      before(r) {
        attempts.push(r.attempt)
        return { headers: { 'x-attempt': String(r.attempt) } }
      },
      after: () => void attemptAfters++,
    })
    const r = await c.get('svc', `/s/${s}/x`)
    assert.equal(r.status, 200)
    assert.equal(r.attempts, 3)
    assert.deepEqual(app, { before: 1, after: 1 })
    assert.deepEqual(attempts, [1, 2, 3])
    assert.deepEqual((await log(s)).map((x) => x.headers['x-attempt']), ['1', '2', '3'])
    // `after` runs on the answers an attempt accepted (the 503s are errors, not answers).
    assert.equal(attemptAfters, 1)
  } finally {
    c.close()
  }

  // The config sets the level by name, over the registration's.
  const s2 = await script([{ status: 503, times: 2 }, { json: { ok: true } }])
  const c2 = client({ interceptors: { levels: { 'per-attempt': 'application' } } })
  try {
    let n = 0
    c2.use({ name: 'per-attempt', level: 'attempt', before: () => void n++ })
    assert.equal((await c2.get('svc', `/s/${s2}/x`)).attempts, 3)
    assert.equal(n, 1)
  } finally {
    c2.close()
  }
})

// A partner that answers errors with 200 and an error code in the body.
function partnerCheck(r) {
  const code = r.json && r.json.errCode
  if (code === 'BUSY') throw new Reject('partner busy', { retryable: true, code: 'BUSY' })
  if (code) throw new Reject(`partner error ${code}`, { code })
}

test('after turns a 200 carrying an error code into a retried failure (Reject), or a final one', async () => {
  const c = client()
  try {
    c.use({ name: 'partner', level: 'attempt', wantBody: true, after: partnerCheck })
    let s = await script([{ json: { errCode: 'BUSY' } }, { json: { result: 1 } }])
    const r = await c.get('svc', `/s/${s}/x`)
    assert.equal(r.status, 200)
    assert.equal(r.attempts, 2)
    assert.equal((await log(s)).length, 2)

    // Always busy: retried up to max_retries, then the InterceptorError with the Reject's code.
    s = await script([{ json: { errCode: 'BUSY' } }])
    let e = await rejected(c.get('svc', `/s/${s}/x`))
    assert.ok(e instanceof InterceptorError, `${e}`)
    assert.equal(e.code, 'InterceptorError')
    assert.equal(e.errorCode, 'BUSY')
    assert.equal(e.status, 200)
    assert.equal(e.attempts, 4)
    assert.ok(e.message.includes('interceptor `partner` after') && e.message.includes('partner busy'), e.message)

    // Not retryable: one attempt.
    s = await script([{ json: { errCode: 'DENIED' } }])
    e = await rejected(c.get('svc', `/s/${s}/x`))
    assert.ok(e instanceof InterceptorError)
    assert.equal(e.errorCode, 'DENIED')
    assert.equal(e.attempts, 1)

    // An async after that rejects with a Reject (no code: `rejected`).
    c.use({ name: 'partner', level: 'attempt', wantBody: true, after: async () => Promise.reject(new Reject('no')) })
    e = await rejected(c.get('svc', `/s/${s}/x`))
    assert.equal(e.errorCode, 'rejected')
  } finally {
    c.close()
  }
})

test('raising, hanging and hostile interceptors are InterceptorErrors, send nothing, and the client stays healthy', async () => {
  const s = await script([{ json: { ok: true } }])
  const c = client({ interceptors: { timeout_ms: 200 }, services: { svc: { limits: { max_request_bytes: 1024 } } } })
  try {
    const cases = [
      ['raises', () => { throw new TypeError('no tenant in context') }, 'raised', 'TypeError: no tenant in context'],
      ['rejects', async () => { throw 'plain string' }, 'raised', 'Error: plain string'], // eslint-disable-line no-throw-literal
      ['reject-in-before', () => { throw new Reject('not here', { code: 'X' }) }, 'raised', 'Reject: not here'],
      ['hangs', () => new Promise(() => {}), 'timeout', 'did not return within 200 ms'],
      ['framing', () => ({ headers: { 'content-length': '5' } }), 'invalid', 'headers.content-length'],
      ['host', () => ({ headers: { Host: 'evil.example' } }), 'invalid', 'headers.Host'],
      ['escape', () => ({ path: `/s/${s}/../../__admin/log/${s}` }), 'invalid', 'path'],
      ['encoded', () => ({ path: `/s/${s}/%2e%2e/%2e%2e/x` }), 'invalid', 'path'],
      ['semicolon', () => ({ path: `/s/${s}/..;/x` }), 'invalid', 'path'],
      ['crlf', () => ({ headers: { 'x-a': '1\r\nx-b: 2' } }), 'invalid', 'headers.x-a'],
      ['huge', () => ({ json: 'x'.repeat(4096) }), 'invalid', 'limits.max_request_bytes'],
      ['huge-bytes', () => ({ body: Buffer.alloc(2048) }), 'invalid', 'limits.max_request_bytes'],
      ['number', () => 7, 'invalid', 'a number'],
      ['unknown', () => ({ bdy: 'x' }), 'invalid', 'unknown change `bdy`'],
      ['text-body', () => ({ body: 'text' }), 'raised', 'TypeError: body: expected a Buffer or Uint8Array'],
      ['bigint', () => ({ json: { n: 1n } }), 'raised', 'TypeError'],
    ]
    for (const level of ['application', 'attempt']) {
      for (const [name, fn, code, text] of cases) {
        c.use({ name, level, before: fn })
        const t0 = performance.now()
        const e = await rejected(c.get('svc', `/s/${s}/x`))
        assert.ok(e instanceof InterceptorError, `${level} ${name}: ${e}`)
        assert.equal(e.errorCode, code, `${level} ${name}: ${e.message}`)
        assert.ok(e.message.includes(`interceptor \`${name}\` before: `) && e.message.includes(text), `${level} ${name}: ${e.message}`)
        assert.equal(e.attempts, 0, `${level} ${name}: nothing was sent`)
        assert.ok(performance.now() - t0 < 2000, `${level} ${name} took ${performance.now() - t0} ms`)
        assert.equal(c.removeInterceptor(name), true)
      }
    }
    assert.deepEqual(await log(s), [], 'no refused call reached the upstream')
    // Healthy: the breaker is closed, no permit is held, the next call goes through.
    assert.equal((await c.get('svc', `/s/${s}/x`)).status, 200)
    assert.equal(c.bulkheadInUse('svc'), 0)
    assert.equal(c.breakerState('svc', 'GET', `/s/${s}/x`), 'closed')

    // A raising `after` fails the call and says so.
    c.use({ name: 'after-raises', after: () => { throw new RangeError("'x'") } })
    const e = await rejected(c.get('svc', `/s/${s}/x`))
    assert.ok(e instanceof InterceptorError)
    assert.equal(e.errorCode, 'raised')
    assert.ok(e.message.includes("interceptor `after-raises` after: raised RangeError: 'x'"), e.message)
    assert.ok(c.removeInterceptor('after-raises'))
    assert.equal((await c.get('svc', `/s/${s}/x`)).status, 200)
    await sleep(10)
    assert.deepEqual(unhandled, [], 'no unhandled rejection')
  } finally {
    c.close()
  }
})

test('a sync interceptor that blocks the JS thread for 1 s does not hold the core: calls to another service reach the upstream meanwhile', async () => {
  const s = await script([{ json: { ok: true } }])
  const c = client({ interceptors: { timeout_ms: 5000 } })
  try {
    const block = new Int32Array(new SharedArrayBuffer(4))
    c.use({ name: 'blocks', services: ['svc'], before: () => void Atomics.wait(block, 0, 0, 1000) })
    // Staged in one tick: the core starts all of them; the interceptor's call then blocks JS.
    const slow = c.get('svc', `/s/${s}/slow`)
    const others = Array.from({ length: 10 }, (_, i) => c.get('other', `/s/${s}/other-${i}`))
    const results = await Promise.all([slow, ...others])
    assert.ok(results.every((r) => r.status === 200))
    const entries = await log(s)
    const slowAt = entries.find((x) => x.path.endsWith('/slow')).at_ms
    const otherAt = entries.filter((x) => x.path.includes('/other-')).map((x) => x.at_ms)
    assert.equal(otherAt.length, 10)
    // The others were answered while JS was blocked, ~1 s before the slow call was sent.
    for (const at of otherAt) assert.ok(at < slowAt - 500, `another call reached the upstream at ${at} ms, the slow one at ${slowAt} ms`)
  } finally {
    c.close()
  }
})

test('an async interceptor that takes 1 s holds only its own calls, side by side', async () => {
  const s = await script([{ json: { ok: true } }])
  const c = client({ interceptors: { timeout_ms: 5000 } })
  try {
    c.use({ name: 'slow', services: ['svc'], before: async () => void (await sleep(1000)) })
    const t0 = performance.now()
    const slow = Array.from({ length: 8 }, () => c.get('svc', `/s/${s}/slow`))
    for (let i = 0; i < 20; i++) assert.equal((await c.get('other', `/s/${s}/other`)).status, 200)
    const others = performance.now() - t0
    assert.ok(others < 900, `20 calls to another service took ${others} ms`)
    for (const r of await Promise.all(slow)) assert.equal(r.status, 200)
    const all = performance.now() - t0
    assert.ok(all >= 990 && all < 3000, `the slow calls ran side by side: ${all} ms`)
  } finally {
    c.close()
  }
})

test('a secret an interceptor adds is scrubbed from the error when the upstream echoes it', async () => {
  const KEY = 'partner-key-node-9f8e7d6c5b4a'
  const s = await script([{ status: 400, json: { error: { message: `bad key ${KEY}`, code: 'bad_key' } } }])
  const c = client()
  try {
    c.use({ name: 'partner-auth', level: 'attempt', before: () => ({ headers: { 'x-partner-key': KEY }, secret: ['x-partner-key'] }) })
    const e = await rejected(c.get('svc', `/s/${s}/x`))
    assert.ok(e instanceof HttpStatusError, `${e}`)
    assert.equal((await log(s))[0].headers['x-partner-key'], KEY)
    for (const text of [e.message, String(e), util.inspect(e, { depth: 5 }), e.stack, JSON.stringify(e), e.body ? e.body.toString() : '']) {
      assert.ok(!text.includes(KEY), `the secret in ${text}`)
    }
  } finally {
    c.close()
  }
})

test('services filter who is intercepted; names, levels and replacement; bad registrations are ConfigErrors', async () => {
  const s = await script([{ json: { ok: true } }])
  const c = client()
  try {
    const order = []
    c.use({ name: 'only-other', services: ['other'], before: () => void order.push('only-other') })
    c.use({ name: 'first', before: () => void order.push('first') })
    c.use({ name: 'second', before: () => void order.push('second') })
    await c.get('svc', `/s/${s}/x`)
    assert.deepEqual(order, ['first', 'second'])
    // A second registration of a name replaces the first in its place.
    order.length = 0
    c.use({ name: 'first', before: () => void order.push('first again') })
    await c.get('other', `/s/${s}/x`)
    assert.deepEqual(order, ['only-other', 'first again', 'second'])
    assert.equal(c.removeInterceptor('first'), true)
    assert.equal(c.removeInterceptor('first'), false)

    // Default names: the function's own, else interceptor-<n>.
    function addTenant() {}
    assert.equal(c.use({ before: addTenant }), 'addTenant')
    assert.equal(c.use({ before: () => {} }), 'interceptor-1')
    assert.equal(c.use({ before() {} }), 'interceptor-2')
    assert.equal(c.use({ after: async function check() {} }), 'check')

    const bad = (spec, want) =>
      assert.throws(() => c.use(spec), (e) => e instanceof ConfigError && e.message.includes(want), `${util.inspect(spec)}: ${want}`)
    bad({ name: 'a b', before() {} }, 'name:')
    bad({ name: 7, before() {} }, 'name')
    bad({ name: 'x' }, 'give `before`, `after` or both')
    bad({ name: 'x', before: 'no' }, 'use.before: expected a function')
    bad({ name: 'x', before() {}, level: 'call' }, 'level')
    bad({ name: 'x', before() {}, services: 'svc' }, 'use.services')
    bad({ name: 'x', before() {}, services: [''] }, 'services[0]')
    bad({ name: 'x', before() {}, wantBody: 'yes' }, 'use.wantBody')
    assert.throws(() => c.use(null), ConfigError)
    assert.throws(() => c.removeInterceptor(1), ConfigError)
    assert.throws(() => new Reject('x', { retryable: 'yes' }), TypeError)
    const r = new Reject('busy', { retryable: true, code: 'BUSY' })
    assert.ok(r instanceof Error && !(r instanceof HarnessError))
    assert.deepEqual([r.name, r.message, r.retryable, r.code], ['Reject', 'busy', true, 'BUSY'])
    // The ESM entry exports the same class.
    assert.equal((await import('../index.mjs')).Reject, Reject)
  } finally {
    c.close()
  }
})

test('a registered interceptor does not keep the process alive', () => {
  const pkg = path.resolve(__dirname, '..')
  const script = `
    const { Client } = require(${JSON.stringify(pkg)})
    const client = new Client({ log: { enabled: false }, services: { a: { base_url: 'http://127.0.0.1:9' } } })
    client.use({ name: 'x', before() {}, after() {} })
    console.log('registered')
  `
  const out = execFileSync(process.execPath, ['-e', script], { timeout: 20000, encoding: 'utf8' })
  assert.equal(out.trim(), 'registered')
})

test('the type declarations cover use, removeInterceptor and Reject (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'interceptors-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
