'use strict'
// The live engine from Node: reload (object, path, watched file), streaming bodies (early
// break, cancel, AbortSignal, no leaked permit), event listeners (one that throws, process
// exit with one registered) and synchronous errors as real error objects.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, StreamResponse, HarnessError, ConfigError, CancelledError, HttpStatusError } = sdk
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

function config(svc = {}, extra = {}) {
  return { client: { name: 'node-live' }, log: { enabled: false }, services: { svc: { base_url: upstream.base, ...svc } }, ...extra }
}

async function script(name, steps) {
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
}

// Polls `fn` until it returns true, for up to `ms`.
async function eventually(fn, ms = 1000) {
  const until = performance.now() + ms
  while (!fn()) {
    if (performance.now() > until) return false
    await sleep(10)
  }
  return true
}

function tmpFile(name) {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'harness-node-live-')), name)
}

// ---------------------------------------------------------------- reload

test('reload from an object: new version, new settings, invalid keeps the old config', async () => {
  await script('reload-obj', [{ status: 200 }])
  const client = new Client(config({ headers: { 'x-config': 'one' } }))
  const events = []
  client.on('event', (e) => {
    if (e.type.startsWith('config_')) events.push(e)
  })
  try {
    const v1 = client.configVersion
    assert.match(v1, /^[0-9a-f]+$/)
    await client.get('svc', '/s/reload-obj/x')
    const v2 = client.reload(config({ headers: { 'x-config': 'two' } }))
    assert.notEqual(v2, v1)
    assert.equal(client.configVersion, v2)
    await client.get('svc', '/s/reload-obj/x')
    const log = await upstream.admin('GET', '/__admin/log/reload-obj')
    assert.deepEqual(log.requests.map((r) => r.headers['x-config']), ['one', 'two'])

    assert.throws(() => client.reload(config({ retry: { max_retries: -1 } })), (e) => {
      assert.ok(e instanceof ConfigError)
      assert.equal(e.code, 'ConfigError')
      assert.match(e.message, /^services\.svc\.retry\.max_retries/)
      return true
    })
    assert.throws(() => client.reload(42), ConfigError)
    assert.equal(client.configVersion, v2, 'the old config stays')
    // The same config gives the same version.
    assert.equal(client.reload(config({ headers: { 'x-config': 'two' } })), v2)
    client.flush()
    assert.deepEqual(events.map((e) => e.type), ['config_reloaded', 'config_rejected', 'config_reloaded'])
    assert.equal(events[0].version, v2)
    assert.equal(events[0].source, 'api')
    assert.match(events[1].error, /max_retries/)
    assert.match(client.metrics(), /harness_config_reloads_total\{result="rejected"\} 1/)
  } finally {
    client.close()
  }
})

test('reload from a file path', async () => {
  const file = tmpFile('harness.json')
  fs.writeFileSync(file, JSON.stringify(config({ bulkhead: { max_concurrency: 7 } })))
  const client = new Client(config())
  try {
    const v = client.reload(file)
    assert.equal(client.configVersion, v)
    assert.equal((await client.get('svc', '/bench')).status, 200)
    assert.throws(() => client.reload(path.join(path.dirname(file), 'missing.yaml')), ConfigError)
    assert.equal(client.configVersion, v)
  } finally {
    client.close()
  }
})

test('Client.fromFile with watch reloads on an edit and keeps the old config on an invalid one', async () => {
  const file = tmpFile('harness.json')
  fs.writeFileSync(file, JSON.stringify(config()))
  const client = Client.fromFile(file, { watch: true })
  const rejected = []
  client.on('config_rejected', (e) => rejected.push(e))
  try {
    assert.ok(client instanceof Client)
    const v1 = client.configVersion
    assert.equal((await client.get('svc', '/bench')).status, 200)

    fs.writeFileSync(file, JSON.stringify(config({ bulkhead: { max_concurrency: 3 } })))
    assert.ok(await eventually(() => client.configVersion !== v1, 2500), 'the edit was applied within 2.5 s')
    const v2 = client.configVersion

    fs.writeFileSync(file, JSON.stringify(config({ retry: { max_retries: -1 } })))
    // writeFileSync truncates before it writes: the watcher may also see (and reject) the empty file.
    const invalid = () => rejected.find((e) => /max_retries/.test(e.error))
    assert.ok(await eventually(() => invalid() !== undefined, 2500), 'the invalid edit was rejected with an event')
    assert.match(invalid().source, /^file:/)
    assert.equal(client.configVersion, v2, 'the old config stays')
    assert.equal((await client.get('svc', '/bench')).status, 200)
  } finally {
    client.close()
  }
  assert.throws(() => Client.fromFile(file, { watch: 'yes' }), ConfigError)
  assert.throws(() => Client.fromFile(path.join(path.dirname(file), 'missing.json'), { watch: true }), ConfigError)
})

// ---------------------------------------------------------------- streaming

const slowTail = [{ chunks: [{ data: 'one;' }, { data: 'two;', delay_ms: 20 }, { data: 'three;', delay_ms: 3000 }] }]

test('a stream reads chunk by chunk; its head is a StreamResponse', async () => {
  await script('stream-all', [
    { chunks: [{ data: 'alpha;' }, { data: 'beta;', delay_ms: 20 }, { data: 'gamma' }], headers: { 'x-a': '1' } },
    { body: 'plain', header_list: [['set-cookie', 'a=1'], ['set-cookie', 'b=2']] },
  ])
  const client = new Client(config())
  try {
    const r = await client.stream('svc', 'GET', '/s/stream-all/x')
    assert.ok(r instanceof StreamResponse)
    assert.equal(r.status, 200)
    assert.ok(r.ok)
    assert.equal(r.attempts, 1)
    assert.match(r.traceId, /^[0-9a-f]{32}$/)
    assert.equal(r.headers['x-a'], '1')
    assert.equal(r.headers.get('X-A'), '1')
    assert.equal(r.headers['transfer-encoding'], 'chunked')
    assert.equal(client.bulkheadInUse('svc'), 1, 'an open stream holds its permit')
    const chunks = []
    for await (const c of r.body) {
      assert.ok(Buffer.isBuffer(c))
      chunks.push(c.toString())
    }
    assert.equal(chunks.join(''), 'alpha;beta;gamma')
    assert.ok(chunks.length >= 2, `read in pieces: ${JSON.stringify(chunks)}`)
    assert.equal(client.bulkheadInUse('svc'), 0)
    // Read once: iterating again gives nothing.
    for await (const c of r.body) assert.fail(`unexpected chunk ${c}`)

    // Repeated headers, on a plain (not chunked) body.
    const r2 = await client.stream('svc', 'GET', '/s/stream-all/x')
    assert.deepEqual(r2.headers.getSetCookie(), ['a=1', 'b=2'])
    assert.deepEqual(r2.headers.getAll('Set-Cookie'), ['a=1', 'b=2'])
    assert.equal(r2.headers.get('set-cookie'), 'a=1, b=2')
    const parts = []
    for await (const c of r2.body) parts.push(c)
    assert.equal(Buffer.concat(parts).toString(), 'plain')
    assert.equal(client.bulkheadInUse('svc'), 0)
  } finally {
    client.close()
  }
})

test('a large streamed body arrives whole', async () => {
  await script('stream-large', [{ body_bytes: 300000, chunked: true }])
  const client = new Client(config())
  try {
    const r = await client.stream({ service: 'svc', path: '/s/stream-large/x' })
    let n = 0
    for await (const c of r.body) {
      assert.ok(c.every((b) => b === 0x78))
      n += c.length
    }
    assert.equal(n, 300000)
  } finally {
    client.close()
  }
})

test('breaking out of for-await releases the permit at once', async () => {
  await script('stream-break', slowTail)
  const client = new Client(config())
  try {
    const t0 = performance.now()
    const r = await client.stream('svc', 'GET', '/s/stream-break/x')
    let got = ''
    for await (const c of r.body) {
      got += c
      break
    }
    assert.equal(got, 'one;')
    assert.ok(await eventually(() => client.bulkheadInUse('svc') === 0), 'permit released')
    assert.ok(performance.now() - t0 < 2000, 'did not wait for the slow tail')
    assert.equal(client.breakerState('svc', 'GET', '/s/stream-break/x'), 'closed', 'a consumer stop is not a failure')
  } finally {
    client.close()
  }
})

test('cancel() while a read waits ends the iteration and releases the permit', async () => {
  await script('stream-cancel', slowTail)
  const client = new Client(config())
  try {
    const r = await client.stream('svc', 'GET', '/s/stream-cancel/x')
    const it = r.body[Symbol.asyncIterator]()
    assert.equal(String((await it.next()).value), 'one;')
    assert.equal(String((await it.next()).value), 'two;')
    const waiting = it.next() // the slow third piece
    await sleep(50)
    r.cancel()
    assert.deepEqual(await waiting, { done: true, value: undefined })
    assert.ok(await eventually(() => client.bulkheadInUse('svc') === 0), 'permit released')
    assert.deepEqual(await it.next(), { done: true, value: undefined })
    r.cancel() // twice is fine

    // cancel() before reading anything.
    const r2 = await client.stream('svc', 'GET', '/s/stream-cancel/x')
    r2.cancel()
    assert.equal(client.bulkheadInUse('svc'), 0)
    for await (const c of r2.body) assert.fail(`unexpected chunk ${c}`)
  } finally {
    client.close()
  }
})

test('an AbortSignal cancels the open and the body', async () => {
  await script('stream-abort-open', [{ delay_ms: 3000 }])
  await script('stream-abort-body', slowTail)
  const client = new Client(config())
  try {
    // While waiting for the head.
    const ac = new AbortController()
    const reason = new Error('gave up')
    const opening = client.stream('svc', 'GET', '/s/stream-abort-open/x', { signal: ac.signal })
    await sleep(50)
    ac.abort(reason)
    await assert.rejects(opening, (e) => {
      assert.ok(e instanceof CancelledError)
      assert.equal(e.cause, reason)
      assert.equal(e.service, 'svc')
      return true
    })
    assert.ok(await eventually(() => client.bulkheadInUse('svc') === 0), 'permit released after an aborted open')

    // While a read waits.
    const ac2 = new AbortController()
    const r = await client.stream('svc', 'GET', '/s/stream-abort-body/x', { signal: ac2.signal })
    const seen = []
    setTimeout(() => ac2.abort(reason), 150)
    await assert.rejects(
      (async () => {
        for await (const c of r.body) seen.push(String(c))
      })(),
      (e) => {
        assert.ok(e instanceof CancelledError, String(e))
        assert.equal(e.cause, reason)
        assert.equal(e.method, 'GET')
        return true
      },
    )
    assert.deepEqual(seen, ['one;', 'two;'])
    assert.ok(await eventually(() => client.bulkheadInUse('svc') === 0), 'permit released after an aborted body')

    // Between reads: the next read rejects.
    const ac3 = new AbortController()
    const r3 = await client.stream('svc', 'GET', '/s/stream-abort-body/x', { signal: ac3.signal })
    const it = r3.body[Symbol.asyncIterator]()
    await it.next()
    ac3.abort()
    assert.equal(client.bulkheadInUse('svc'), 0)
    await assert.rejects(it.next(), CancelledError)

    // Already aborted.
    await assert.rejects(client.stream('svc', 'GET', '/s/stream-abort-body/x', { signal: AbortSignal.abort() }), CancelledError)
  } finally {
    client.close()
  }
})

test('an error status rejects stream() with the usual error', async () => {
  await script('stream-503', [{ status: 503, json: { code: 'down', message: 'maintenance' } }])
  const client = new Client(config({ retry: { max_retries: 0 } }))
  try {
    await assert.rejects(client.stream('svc', 'GET', '/s/stream-503/x'), (e) => {
      assert.ok(e instanceof HttpStatusError)
      assert.equal(e.status, 503)
      assert.equal(e.errorCode, 'down')
      return true
    })
    await assert.rejects(client.stream('svc', 'GET', 'no-slash'), ConfigError)
    assert.equal(client.bulkheadInUse('svc'), 0)
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- events

test('listeners get structured events; by type too; once and off work', async () => {
  await script('ev', [{ status: 200 }])
  const client = new Client(config())
  try {
    const all = []
    const finished = []
    let onced = 0
    const onAll = (e) => all.push(e)
    client.on('event', onAll)
    client.on('request_finished', (e) => finished.push(e))
    client.once('request_finished', () => onced++)
    const r = await client.get('svc', '/s/ev/orders/1')
    await client.get('svc', '/s/ev/orders/2')
    client.flush()
    assert.equal(finished.length, 2)
    assert.equal(onced, 1)
    const e = finished[0]
    assert.equal(e.type, 'request_finished')
    assert.equal(e.service, 'svc')
    assert.equal(e.method, 'GET')
    assert.equal(e.endpoint, '/s/ev/orders/{id}')
    assert.equal(e.status, 200)
    assert.equal(e.trace_id, r.traceId)
    assert.equal(e.attempts, 1)
    assert.equal(typeof e.duration_ms, 'number')
    assert.deepEqual(all.filter((x) => x.type === 'request_finished'), finished)

    client.off('event', onAll)
    client.removeAllListeners('request_finished')
    assert.equal(client.listenerCount('event'), 0)
    await client.get('svc', '/s/ev/orders/3')
    client.flush()
    assert.equal(all.length, 2, 'no listener, no delivery')

    client.on('event', onAll)
    await client.get('svc', '/s/ev/orders/4')
    client.flush()
    assert.equal(all.length, 3, 'listening again')
  } finally {
    client.close()
  }
})

test('a listener that throws is reported once and never fails a request', async () => {
  await script('ev-throw', [{ status: 200 }])
  const client = new Client(config())
  const warnings = []
  const onWarning = (w) => {
    if (w.code === 'HARNESS_LISTENER_FAILED') warnings.push(w)
  }
  process.on('warning', onWarning)
  try {
    let thrown = 0
    let rejected = 0
    const seen = []
    client.on('event', () => {
      thrown++
      throw new Error('listener bug')
    })
    client.on('request_finished', async () => {
      rejected++
      throw new Error('async listener bug')
    })
    client.on('event', (e) => seen.push(e.type))
    for (let i = 0; i < 3; i++) assert.equal((await client.get('svc', '/s/ev-throw/x')).status, 200)
    client.flush()
    assert.equal(thrown, 3, 'the throwing listener keeps receiving events')
    assert.equal(rejected, 3)
    assert.deepEqual(seen, ['request_finished', 'request_finished', 'request_finished'], 'later listeners still run')
    assert.ok(await eventually(() => warnings.length === 2, 1000), `one warning per failing listener, got ${warnings.length}`)
    await sleep(50)
    assert.equal(warnings.length, 2)
    assert.match(warnings.map((w) => w.message).join('\n'), /listener bug/)
    assert.equal(warnings[0].name, 'HarnessListenerWarning')
  } finally {
    process.off('warning', onWarning)
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

test('the process exits on its own with a listener registered and the client closed', async () => {
  const { code, out } = await runChild(`
    const { Client } = require(process.env.SDK)
    const c = new Client({ log: { enabled: false }, services: { svc: { base_url: process.env.UPSTREAM } } })
    let n = 0
    c.on('event', (e) => { if (e.type === 'request_finished') n++ })
    process.on('exit', () => console.log('events', n))
    c.get('svc', '/bench').then((r) => { console.log(r.status); c.close() })
  `)
  assert.equal(code, 0)
  assert.deepEqual(out.trim().split('\n'), ['200', 'events 1'])
})

test('the process exits on its own with a watched file, a listener and an open stream', async () => {
  const file = tmpFile('harness.json')
  fs.writeFileSync(file, JSON.stringify(config()))
  const { code, out } = await runChild(`
    const { Client } = require(process.env.SDK)
    const c = Client.fromFile(${JSON.stringify(file)}, { watch: true })
    c.on('event', () => {})
    c.stream('svc', 'GET', '/bench').then((r) => console.log(r.status))
  `)
  assert.equal(code, 0)
  assert.equal(out.trim(), '200')
})

// ---------------------------------------------------------------- errors

test('synchronous errors are real error objects, with no data in the message', () => {
  const bad = { services: { svc: { base_url: 'http://x', retry: { max_retries: -1 } } } }
  const cases = [
    () => new Client(bad),
    () => Client.fromFile(path.join(os.tmpdir(), 'harness-no-such-config.yaml')),
    () => new Client(config()).reload(bad),
    () => new Client(config()).bulkheadInUse('nope'),
  ]
  for (const fn of cases) {
    assert.throws(fn, (e) => {
      assert.ok(e instanceof ConfigError, String(e))
      assert.ok(e instanceof HarnessError)
      assert.ok(e instanceof Error)
      assert.equal(e.name, 'ConfigError')
      assert.equal(e.code, 'ConfigError')
      assert.equal(e.attempts, 0)
      assert.equal(typeof e.stack, 'string')
      for (const text of [e.message, String(e), util.inspect(e)]) {
        assert.ok(!/HARNESS_ERROR|\u0001|\{"name"/.test(text), `error data in the message: ${JSON.stringify(text)}`)
      }
      return true
    })
  }
  const nativeModule = require(path.join(__dirname, '..', 'harness-sdk.node'))
  assert.equal(nativeModule.errorMarker, undefined, 'no message marker left in the native module')
})
