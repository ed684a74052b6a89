'use strict'
// Hostile input and hostile upstreams, as far as the Node binding translates them: JSON bodies as
// JSON.stringify writes them (and refused where it would lose data), lone surrogates, nesting,
// the new error kinds, repeated response headers and one AbortSignal shared by many requests.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, HarnessError, ConfigError, CancelledError, ProtocolError, ResponseTooLargeError } = sdk
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

function config(svc = {}) {
  return { client: { name: 'node-security' }, log: { enabled: false }, services: { svc: { base_url: upstream.base, ...svc } } }
}

async function script(name, steps) {
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
}

async function received(name) {
  return (await upstream.admin('GET', `/__admin/log/${name}`)).requests
}

function nestedArrays(n) {
  let v = 0
  for (let i = 0; i < n; i++) v = [v]
  return v
}

function nestedObjects(n) {
  const root = {}
  let at = root
  for (let i = 1; i < n; i++) at = at.a = {}
  return root
}

// Rejects with a ConfigError whose message matches `re`.
async function refused(promise, re, what) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof ConfigError, `${what}: expected ConfigError, got ${e && e.stack}`)
    assert.equal(e.code, 'ConfigError')
    assert.match(e.message, re, what)
    return true
  })
}

test('a JSON body keeps the key order JS gives it, byte for byte', async () => {
  await script('order', [{ status: 200 }])
  const client = new Client(config())
  try {
    const body = { z: 1, a: 2, m: { y: [3, { q: 1, b: 2 }], b: null }, '10': 'x', '2': 'y', s: 'é \u{1F600} "q"' }
    assert.equal((await client.post('svc', '/s/order/x', { json: body })).status, 200)
    const [r] = await received('order')
    assert.equal(r.body, JSON.stringify(body))
    assert.ok(r.body.startsWith('{"2":"y","10":"x","z":1,"a":2,'), r.body)
    assert.equal(r.headers['content-type'], 'application/json')
  } finally {
    client.close()
  }
})

test('NaN and infinities anywhere in a JSON body are a ConfigError, not null', async () => {
  await script('nan', [{ status: 200 }])
  const client = new Client(config())
  try {
    const cases = [
      NaN,
      Infinity,
      { a: -Infinity },
      { a: [1, 2, { b: NaN }] },
      [null, Number.POSITIVE_INFINITY],
      { when: { toJSON: () => NaN } },
      { boxed: new Number(Infinity) },
    ]
    for (const json of cases) await refused(client.post('svc', '/s/nan/x', { json }), /^json: NaN and Infinity/, String(json))
    // A null that is a null, and an invalid Date (whose toJSON gives null), are sent as they are.
    assert.equal((await client.post('svc', '/s/nan/x', { json: { a: null, d: new Date(NaN), n: 1.5 } })).status, 200)
    const requests = await received('nan')
    assert.equal(requests.length, 1)
    assert.equal(requests[0].body, '{"a":null,"d":null,"n":1.5}')
  } finally {
    client.close()
  }
})

test('a BigInt or a cycle in a JSON body is a ConfigError naming json', async () => {
  const client = new Client(config())
  try {
    await refused(client.post('svc', '/bench', { json: { id: 2n ** 64n } }), /^json: .*BigInt/, 'BigInt')
    const cyclic = { a: 1 }
    cyclic.self = cyclic
    await refused(client.post('svc', '/bench', { json: cyclic }), /^json: .*circular/, 'cycle')
    await refused(client.post('svc', '/bench', { json: () => 1 }), /^json: not serialisable/, 'function')
  } finally {
    client.close()
  }
})

test('a lone surrogate in any string argument is a ConfigError naming the argument', async () => {
  await script('lone', [{ status: 200 }])
  const client = new Client(config())
  const bad = 'a\ud800b'
  try {
    const base = { service: 'svc', method: 'POST', path: '/s/lone/x' }
    const cases = [
      [{ ...base, json: { k: bad } }, /^json: contains a lone surrogate/],
      [{ ...base, json: { [bad]: 1 } }, /^json: contains a lone surrogate/],
      [{ ...base, json: ['\udc00'] }, /^json: contains a lone surrogate/],
      [{ ...base, path: `/s/lone/${bad}` }, /^request\.path: contains a lone surrogate/],
      [{ ...base, service: bad }, /^request\.service: contains a lone surrogate/],
      [{ ...base, method: `GE${bad}` }, /^request\.method: contains a lone surrogate/],
      [{ ...base, endpoint: bad }, /^request\.endpoint: contains a lone surrogate/],
      [{ ...base, headers: { 'x-a': bad } }, /^request\.headers: contains a lone surrogate/],
      [{ ...base, headers: [[`x-${bad}`, '1']] }, /^request\.headers: contains a lone surrogate/],
      [{ ...base, query: { q: bad } }, /^request\.query: contains a lone surrogate/],
      [{ ...base, idempotencyKey: bad }, /^request\.idempotencyKey: contains a lone surrogate/],
      [{ ...base, traceparent: bad }, /^request\.traceparent: contains a lone surrogate/],
      [{ ...base, body: bad }, /^request\.body: contains a lone surrogate/],
    ]
    for (const [opts, re] of cases) await refused(client.request(opts), re, JSON.stringify(opts))
    assert.throws(() => client.breakerState('svc', 'GET', `/${bad}`), /^ConfigError: request\.path: contains a lone surrogate/)
    assert.throws(() => new Client(`/tmp/${bad}.yaml`), (e) => e instanceof ConfigError && /^config: contains a lone surrogate/.test(e.message))
    assert.throws(
      () => new Client(config({ headers: { 'x-a': bad } })),
      (e) => e instanceof ConfigError && /^config: contains a lone surrogate/.test(e.message),
    )
    // Well-formed text outside the BMP (a surrogate pair) is fine everywhere.
    const ok = 'smile \u{1F600}'
    assert.equal((await client.request({ ...base, path: '/s/lone/%F0%9F%98%80', json: { ok }, headers: { 'x-b': 'plain' }, query: { q: ok } })).status, 200)
    const requests = await received('lone')
    assert.equal(requests.length, 1)
    assert.equal(requests[0].body, JSON.stringify({ ok }))
  } finally {
    client.close()
  }
})

test('JSON bodies nest up to 512 levels: 500 is sent, 513 and 600 are refused, 20,000 is refused without a crash', async () => {
  await script('deep', [{ status: 200 }])
  const client = new Client(config())
  try {
    assert.equal((await client.post('svc', '/s/deep/x', { json: nestedArrays(500) })).status, 200)
    assert.equal((await client.post('svc', '/s/deep/x', { json: nestedArrays(512) })).status, 200)
    for (const depth of [513, 600]) {
      await refused(client.post('svc', '/s/deep/x', { json: nestedArrays(depth) }), /^json: nested deeper than 512 levels/, `${depth} arrays`)
    }
    for (const json of [nestedArrays(20_000), nestedObjects(20_000), { a: [nestedObjects(100_000)] }]) {
      await refused(client.post('svc', '/s/deep/x', { json }), /^json: nested deeper than 512 levels/, 'very deep')
    }
    const requests = await received('deep')
    assert.equal(requests.length, 2)
    assert.equal(requests[0].body, JSON.stringify(nestedArrays(500)))
  } finally {
    client.close()
  }
})

test('a config nested 100,000 deep is a ConfigError at once, as is one nested 600 deep', () => {
  for (const depth of [600, 100_000]) {
    const cfg = config()
    cfg.services.svc.extra = nestedObjects(depth)
    const t0 = performance.now()
    assert.throws(() => new Client(cfg), (e) => {
      assert.ok(e instanceof ConfigError, String(e))
      assert.match(e.message, /^config: nested deeper than 512 levels/)
      return true
    })
    assert.ok(performance.now() - t0 < 1000, `${depth}: took ${performance.now() - t0} ms`)
  }
  // NaN in a config is refused too (JSON.stringify would write null).
  assert.throws(() => new Client(config({ retry: { max_retries: NaN } })), /^ConfigError: config: NaN and Infinity/)
})

test('ProtocolError and ResponseTooLargeError are HarnessError subclasses with their own code', async () => {
  await script('proto', [{ raw: 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!' }])
  await script('big', [{ body_bytes: 5000 }])
  const client = new Client(config({ retry: { max_retries: 0 }, limits: { max_response_bytes: 4096 } }))
  try {
    const p = await client.get('svc', '/s/proto/x').catch((e) => e)
    assert.ok(p instanceof ProtocolError, String(p))
    assert.ok(p instanceof HarnessError)
    assert.equal(p.name, 'ProtocolError')
    assert.equal(p.code, 'ProtocolError')
    assert.equal(p.service, 'svc')
    assert.match(String(p), /^ProtocolError: /)
    const b = await client.get('svc', '/s/big/x').catch((e) => e)
    assert.ok(b instanceof ResponseTooLargeError, String(b))
    assert.ok(b instanceof HarnessError)
    assert.equal(b.code, 'ResponseTooLargeError')
    assert.match(b.message, /max_response_bytes/)
    const esm = await import('../index.mjs')
    assert.equal(esm.ProtocolError, ProtocolError)
    assert.equal(esm.ResponseTooLargeError, ResponseTooLargeError)
  } finally {
    client.close()
  }
})

test('repeated response headers: getAll, getSetCookie, get and the joined properties', async () => {
  await script('rep', [
    {
      status: 200,
      header_list: [
        ['set-cookie', 'a=1; Path=/'],
        ['x-multi', 'one'],
        ['set-cookie', 'b=2'],
        ['x-multi', 'two'],
        ['get', 'hostile'],
        ['constructor', 'c'],
      ],
    },
  ])
  const client = new Client(config())
  try {
    const r = await client.get('svc', '/s/rep/x')
    assert.deepEqual(r.headers.getAll('X-Multi'), ['one', 'two'])
    assert.deepEqual(r.headers.getAll('set-cookie'), ['a=1; Path=/', 'b=2'])
    assert.deepEqual(r.headers.getSetCookie(), ['a=1; Path=/', 'b=2'])
    assert.deepEqual(r.headers.getAll('x-absent'), [])
    assert.equal(r.headers['x-multi'], 'one, two')
    assert.equal(r.headers.get('X-MULTI'), 'one, two')
    assert.equal(r.headers.get('x-absent'), null)
    // A header cannot replace the lookup methods; it is read through them.
    assert.equal(typeof r.headers.get, 'function')
    assert.equal(r.headers.get('get'), 'hostile')
    assert.equal(r.headers.constructor, 'c')
    assert.ok(Object.keys(r.headers).includes('x-multi'))
    assert.ok(!Object.keys(r.headers).includes('getAll'))
    assert.equal(JSON.parse(JSON.stringify(r.headers))['x-multi'], 'one, two')
  } finally {
    client.close()
  }
})

test('one AbortSignal shared by 50 requests: one listener, no warning, and aborting cancels them all', async () => {
  await script('fanout', [{ action: 'hang' }])
  await script('fanout-ok', [{ status: 200 }])
  const client = new Client(config({ bulkhead: { max_concurrency: 100 }, retry: { max_retries: 0 } }))
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    // Requests that finish give their listener back.
    const shared = new AbortController()
    const done = await Promise.all(Array.from({ length: 50 }, () => client.get('svc', '/s/fanout-ok/x', { signal: shared.signal })))
    assert.ok(done.every((r) => r.status === 200))
    assert.equal(getEventListeners(shared.signal, 'abort').length, 0)

    const ac = new AbortController()
    const calls = Array.from({ length: 50 }, () => client.get('svc', '/s/fanout/x', { signal: ac.signal }).then(() => null, (e) => e))
    await sleep(50)
    assert.equal(getEventListeners(ac.signal, 'abort').length, 1)
    assert.ok(client.bulkheadInUse('svc') > 0)
    const reason = new Error('fan-out abandoned')
    ac.abort(reason)
    for (const e of await Promise.all(calls)) {
      assert.ok(e instanceof CancelledError, `expected CancelledError, got ${e}`)
      assert.equal(e.cause, reason)
    }
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0)
    for (let i = 0; i < 100 && client.bulkheadInUse('svc') > 0; i++) await sleep(10)
    assert.equal(client.bulkheadInUse('svc'), 0)
    await sleep(10) // warnings are emitted on a later tick
    assert.deepEqual(warnings.map((w) => `${w.name}: ${w.message}`), [])
  } finally {
    process.off('warning', onWarning)
    client.close()
  }
})
