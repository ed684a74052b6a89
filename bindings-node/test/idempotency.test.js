'use strict'
// Shared state from Node: the client-side rate limit error, the idempotent receiver in memory
// (run, duplicates, failures, leases, keys, signatures), one message delivered from three OS
// processes on one real redis-server, and the receiver with its store down.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile, execFileSync } = require('node:child_process')
const path = require('node:path')
const util = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, Idempotency, Lease, HarnessError, ConfigError, AuthError, RateLimitedError, DuplicateInFlightError } = sdk
const { startUpstream } = require('./upstream')
const { startRedis, freePort } = require('./redis')

let upstream
let redis
before(async () => {
  upstream = await startUpstream()
  redis = await startRedis()
})
after(async () => {
  await upstream.stop()
  await redis.stop()
})

// ---------------------------------------------------------------- rate limits

test('over the client rate limit a request fails with RateLimitedError and nothing is sent', async () => {
  await upstream.admin('PUT', '/__admin/script/node-rl', { steps: [{ status: 200 }] })
  const client = new Client({
    client: { name: 'node-idem' },
    log: { enabled: false },
    services: { svc: { base_url: upstream.base, rate_limit: { rps: 1, burst: 1, max_wait_ms: 0 } } },
  })
  try {
    const ok = await client.get('svc', '/s/node-rl/a')
    assert.equal(ok.status, 200)
    const e = await client.get('svc', '/s/node-rl/a').catch((err) => err)
    assert.ok(e instanceof RateLimitedError, String(e))
    assert.ok(e instanceof HarnessError)
    assert.equal(e.code, 'RateLimitedError')
    assert.equal(e.errorCode, 'client_rate_limited')
    assert.equal(e.status, undefined, 'nothing was sent, so there is no status')
    assert.ok(e.retryAfterMs > 0 && e.retryAfterMs <= 1000, `retryAfterMs ${e.retryAfterMs}`)
    assert.equal(e.service, 'svc')
    const log = await upstream.admin('GET', '/__admin/log/node-rl')
    assert.equal(log.requests.length, 1, 'the upstream saw only the first request')
    assert.match(client.metrics(), /harness_rate_limited_total\{service="svc"\} 1/)
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- the receiver, in memory

test('run twice: the handler runs once and the duplicate gets an equal stored result', async () => {
  const idem = new Idempotency()
  const key = idem.key('acme', 'order.paid', 'msg-1')
  assert.equal(key, 'harness:idem:acme:order.paid:msg-1')
  let runs = 0
  const value = { orderId: 42, tags: ['a', 'b'], nested: { ok: true, n: null }, text: 'π ✓' }
  const first = await idem.run(key, async () => {
    runs++
    return value
  })
  assert.equal(first, value, 'the first delivery gets the handler value itself')
  const second = await idem.run(key, async () => {
    runs++
    return 'not this'
  })
  assert.equal(runs, 1)
  assert.deepEqual(second, value)
  // A sync handler and a handler returning nothing (stored as null).
  const k2 = idem.key('acme', 'order.paid', 'msg-2')
  assert.equal(await idem.run(k2, () => undefined), undefined)
  assert.equal(await idem.run(k2, () => 'again'), null)
  // A result past the batch's shared buffer (4 KiB) crosses on its own, equally.
  const big = { rows: Array.from({ length: 500 }, (_, i) => ({ i, name: `row ${i} ✓` })) }
  const k3 = idem.key('acme', 'order.paid', 'msg-3')
  assert.equal(await idem.run(k3, () => big), big)
  assert.deepEqual(await idem.run(k3, () => 'again'), big)
  const text = idem.metricsText()
  assert.match(text, /harness_idempotency_total\{outcome="claimed"\} 3/)
  assert.match(text, /harness_idempotency_total\{outcome="duplicate_processed"\} 3/)
})

test('a duplicate while the first is still running gets DuplicateInFlightError', async () => {
  const idem = new Idempotency({ lease_ms: 60_000 })
  const key = idem.key('acme', 'order.paid', 'slow')
  let release
  const gate = new Promise((r) => (release = r))
  let runs = 0
  const first = idem.run(key, async () => {
    runs++
    await gate
    return 'done'
  })
  await sleep(20)
  const e = await idem.run(key, async () => runs++).catch((err) => err)
  assert.ok(e instanceof DuplicateInFlightError, String(e))
  assert.ok(e instanceof HarnessError)
  assert.equal(e.code, 'DuplicateInFlightError')
  assert.equal(e.name, 'DuplicateInFlightError')
  assert.equal(e.errorCode, 'duplicate_in_flight')
  assert.ok(e.retryAfterMs > 0 && e.retryAfterMs <= 60_000, `retryAfterMs ${e.retryAfterMs}`)
  release()
  assert.equal(await first, 'done')
  assert.equal(await idem.run(key, async () => runs++), 'done')
  assert.equal(runs, 1)
})

test('a handler that throws marks the key failed, rethrows, and a redelivery runs again', async () => {
  const idem = new Idempotency()
  const key = idem.key('acme', 'order.paid', 'flaky')
  const boom = new Error('downstream said no')
  let runs = 0
  await assert.rejects(
    idem.run(key, async () => {
      runs++
      throw boom
    }),
    (e) => e === boom,
  )
  assert.equal(await idem.run(key, async () => ++runs), 2)
  assert.equal(await idem.run(key, async () => ++runs), 2)
  assert.equal(runs, 2)

  // With retry_failed off, a failed key is not run again.
  const strict = new Idempotency({ retry_failed: false })
  await assert.rejects(strict.run('k', () => {
    throw new Error('no')
  }), /no/)
  const e = await strict.run('k', () => 'never').catch((err) => err)
  assert.ok(e instanceof HarnessError, String(e))
  assert.equal(e.errorCode, 'failed_before')
})

test('a result JSON cannot carry fails the claim (a redelivery runs again)', async () => {
  const idem = new Idempotency()
  let runs = 0
  await assert.rejects(
    idem.run('nan', () => {
      runs++
      return { n: NaN }
    }),
    (e) => e instanceof ConfigError && /^result: /.test(e.message),
  )
  await assert.rejects(idem.run('nan', () => (runs++, 10n)), ConfigError)
  assert.equal(await idem.run('nan', () => (runs++, 'fine')), 'fine')
  assert.equal(runs, 3)
})

test('claim, complete and fail: the lower-level form', async () => {
  const idem = new Idempotency({ lease_ms: 60_000 })
  const lease = await idem.claim('low')
  assert.ok(lease instanceof Lease)
  assert.equal(lease.done, false)
  assert.equal(lease.key, 'low')
  assert.equal(lease.deduplicated, true)
  await assert.rejects(idem.claim('low'), DuplicateInFlightError)
  assert.equal(await lease.complete([1, 'two']), undefined)
  assert.deepEqual(await idem.claim('low'), { done: true, result: [1, 'two'] })

  // fail() lets a redelivery claim again.
  const a = await idem.claim('again')
  await a.fail()
  const b = await idem.claim('again')
  assert.equal(b.done, false)
  await b.complete('ok')

  // A lease that expired and was taken over: the late result is refused, the new one stays.
  const short = new Idempotency({ lease_ms: 100 })
  const late = await short.claim('fenced')
  await sleep(300)
  const taker = await short.claim('fenced')
  assert.equal(taker.done, false)
  await taker.complete('new')
  const e = await late.complete('old').catch((err) => err)
  assert.ok(e instanceof HarnessError, String(e))
  assert.equal(e.errorCode, 'lease_lost')
  assert.deepEqual(await short.claim('fenced'), { done: true, result: 'new' })
})

test('bad key parts and bad config are ConfigErrors naming the field', async () => {
  const idem = new Idempotency({ prefix: 'p:' })
  assert.equal(idem.key('t', 'e', 'm'), 'p:t:e:m')
  for (const [args, field] of [
    [['', 'e', 'm'], 'tenant'],
    [['t', 'bad\ntype', 'm'], 'event_type'],
    [['t', 'e', 'x'.repeat(300)], 'msg_id'],
    [['t', 'e', 42], 'msg_id'],
    [['t', '\ud800', 'm'], 'event_type'],
  ]) {
    assert.throws(() => idem.key(...args), (e) => e instanceof ConfigError && e.message.startsWith(`${field}: `), `${field}`)
  }
  await assert.rejects(idem.claim(''), (e) => e instanceof ConfigError && e.message.startsWith('key: '))
  await assert.rejects(idem.claim(undefined), ConfigError)
  await assert.rejects(idem.run('k', 'not a function'), ConfigError)
  for (const [config, field] of [
    [{ ttl_ms: 0 }, 'ttl_ms'],
    [{ lease_ms: -1 }, 'lease_ms'],
    [{ on_store_down: 'maybe' }, 'on_store_down'],
    [{ redis_url: 'http://x' }, 'redis_url'],
    [{ surprise: 1 }, 'surprise'],
  ]) {
    assert.throws(() => new Idempotency(config), (e) => e instanceof ConfigError && e.message.includes(field), JSON.stringify(config))
  }
  assert.throws(() => new Idempotency('nope'), ConfigError)
})

test('signatures: good, bad and stale; the secret never shows', async () => {
  const secret = 'whsec-node-5ecret-value'
  const idem = new Idempotency({ signature: { secret: { value: secret }, max_skew_ms: 60_000 } })
  const now = String(Math.floor(Date.now() / 1000))
  const body = '{"event":"order.paid","id":"msg-1"}'
  const sig = idem.sign(now, body)
  assert.match(sig, /^[0-9a-f]{64}$/)
  idem.verify(now, body, sig)
  idem.verify(now, Buffer.from(body), `sha256=${sig}`)
  idem.verify(now, new Uint8Array(Buffer.from(body)), sig)

  const errors = []
  for (const [ts, b, s, code] of [
    [now, body + ' ', sig, 'bad_signature'],
    [now, body, sig.replace(/.$/, (c) => (c === '0' ? '1' : '0')), 'bad_signature'],
    [now, body, 'not-hex', 'bad_signature'],
    [String(Number(now) - 3600), body, idem.sign(String(Number(now) - 3600), body), 'stale_signature'],
  ]) {
    const e = (() => {
      try {
        idem.verify(ts, b, s)
      } catch (err) {
        return err
      }
    })()
    assert.ok(e instanceof AuthError, String(e))
    assert.equal(e.code, 'AuthError')
    assert.equal(e.errorCode, code)
    errors.push(e)
  }
  assert.throws(() => new Idempotency().verify(now, body, sig), ConfigError)
  assert.throws(() => idem.verify(now, 42, sig), (e) => e instanceof ConfigError && e.message.startsWith('body: '))

  const shown = [String(idem), util.inspect(idem), JSON.stringify(idem), util.inspect(idem, { showHidden: true, depth: 5 })]
  for (const e of errors) shown.push(String(e), e.stack, util.inspect(e), JSON.stringify(e))
  for (const text of shown) assert.ok(!text.includes(secret), `the secret leaked: ${text}`)
  assert.match(String(idem), /Idempotency/)
  assert.match(String(idem), /\*\*\*/)
  assert.match(idem.metricsText(), /harness_idempotency_total\{outcome="bad_signature"\} 4/)
})

test('ESM exports the receiver and DuplicateInFlightError', async () => {
  const esm = await import('../index.mjs')
  assert.equal(esm.Idempotency, Idempotency)
  assert.equal(esm.Lease, Lease)
  assert.equal(esm.DuplicateInFlightError, DuplicateInFlightError)
  assert.ok(sdk.ERROR_NAMES.includes('DuplicateInFlightError'))
})

// ---------------------------------------------------------------- across processes, on Redis

function child(args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(__dirname, 'idempotency-child.js'), ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`child failed: ${err.message}\n${stderr}`))
      resolve(JSON.parse(stdout.trim()))
    })
  })
}

test('one message delivered from 3 processes, concurrently and repeatedly: the handler runs once', async () => {
  const key = `harness:idem:node:order.paid:${process.pid}-${Date.now()}`
  // Each child exits on its own once its deliveries settle (no process.exit).
  const reports = await Promise.all([0, 1, 2].map(() => child([redis.url, key, '20', '8'])))
  const runs = reports.reduce((n, r) => n + r.runs, 0)
  assert.equal(runs, 1, `the handler ran ${runs} times: ${JSON.stringify(reports.map((r) => r.runs))}`)
  const winner = reports.find((r) => r.runs === 1).pid
  let results = 0
  let inFlight = 0
  for (const r of reports) {
    assert.equal(r.outcomes.length, 160)
    for (const o of r.outcomes) {
      assert.equal(o.error, undefined, o.error)
      if (o.result !== undefined) {
        assert.deepEqual(o.result, { processedBy: winner, items: [1, 2, 3] })
        results++
      } else {
        assert.ok(o.inFlight > 0, JSON.stringify(o))
        inFlight++
      }
    }
  }
  assert.equal(results + inFlight, 480)
  assert.ok(results > 1, 'later rounds get the stored result')
  assert.ok(inFlight > 0, 'deliveries during the first handler get DuplicateInFlightError')

  // This process sees the same stored result.
  const here = new Idempotency({ redis_url: redis.url })
  assert.deepEqual(await here.run(key, () => 'never'), { processedBy: winner, items: [1, 2, 3] })
})

// ---------------------------------------------------------------- the store down

test('Redis down: on_store_down process runs the handler, reject raises store_unavailable', async () => {
  const own = await startRedis()
  try {
    const process_ = new Idempotency({ redis_url: own.url, on_store_down: 'process' })
    const reject = new Idempotency({ redis_url: own.url })
    assert.equal(await reject.run('up', () => 'stored'), 'stored')
    assert.equal(await reject.run('up', () => 'not run'), 'stored')
    await own.stop()

    let runs = 0
    assert.equal(await process_.run('down-1', () => ++runs), 1)
    assert.equal(await process_.run('down-1', () => ++runs), 2, 'without the store there is no dedup')
    const lease = await process_.claim('down-2')
    assert.equal(lease.deduplicated, false)
    await lease.complete('x')
    assert.match(process_.metricsText(), /outcome="store_down_processed"/)

    const e = await reject.run('down-3', () => runs++).catch((err) => err)
    assert.ok(e instanceof HarnessError, String(e))
    assert.equal(e.code, 'HarnessError')
    assert.equal(e.errorCode, 'store_unavailable')
    assert.equal(runs, 2, 'reject runs nothing')
  } finally {
    await own.stop()
  }

  // A store that was never there.
  const nowhere = new Idempotency({ redis_url: `redis://127.0.0.1:${await freePort()}/0` })
  await assert.rejects(nowhere.run('k', () => 1), (e) => e.errorCode === 'store_unavailable')
})

// ---------------------------------------------------------------- types

test('the type declarations cover the receiver and rate limits (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'idempotency-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
