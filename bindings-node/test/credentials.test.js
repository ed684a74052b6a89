'use strict'
// Credentials through the Node API: JS token providers (sync and async), single-flight
// refresh under a burst at expiry, a provider that throws, OAuth2 client credentials,
// key pools, the state API, and redaction of every token in events, logs and state.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const util = require('node:util')
const { spawn } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { Client, AuthError, ConfigError } = require('..')
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

// A service `orders` whose token comes from a JS provider; `script` answers 200 (many times).
async function callbackClient(script, auth = {}, steps = [{ status: 200, times: 10000 }]) {
  await upstream.admin('PUT', `/__admin/script/${script}`, { steps })
  return new Client({
    client: { name: 'node-credentials' },
    log: { enabled: false },
    services: { orders: { base_url: upstream.base, auth: { type: 'callback', ...auth } } },
  })
}

async function log(script) {
  return (await upstream.admin('GET', `/__admin/log/${script}`)).requests
}

test('200 concurrent requests at expiry make exactly one provider call', async () => {
  // Soft refresh from 100 ms before expiry: the first burst ends well before it.
  const client = await callbackClient('cred-burst', { refresh: { soft_ms: 100, hard_ms: 50 } })
  try {
    let calls = 0
    client.setTokenProvider('orders', async () => {
      calls++
      await sleep(50)
      return { token: `tok-${calls}`, expiresIn: 1 }
    })
    const burst = () => Promise.all(Array.from({ length: 200 }, () => client.get('orders', '/s/cred-burst/x')))
    // No token yet: one fetch for the whole burst.
    for (const r of await burst()) assert.equal(r.status, 200)
    assert.equal(calls, 1)
    // Past expiry: again exactly one.
    await sleep(1100)
    for (const r of await burst()) assert.equal(r.status, 200)
    assert.equal(calls, 2)
    const auth = (await log('cred-burst')).map((r) => r.headers.authorization)
    assert.deepEqual(auth, [...Array(200).fill('Bearer tok-1'), ...Array(200).fill('Bearer tok-2')])
  } finally {
    client.close()
  }
})

test('200 concurrent requests make exactly one OAuth2 token call', async () => {
  await upstream.admin('PUT', '/__admin/script/cred-oauth', { steps: [{ status: 200, times: 1000 }] })
  await upstream.admin('PUT', '/__admin/script/cred-oauth-token', {
    steps: [{ status: 200, delay_ms: 50, json: { access_token: 'oauth-tok-1', token_type: 'Bearer', expires_in: 3600 } }],
  })
  const client = new Client({
    log: { enabled: false },
    services: {
      billing: {
        base_url: upstream.base,
        auth: {
          type: 'oauth2_client_credentials',
          token_url: `${upstream.base}/s/cred-oauth-token/oauth/token`,
          client_id: { value: 'client-1' },
          client_secret: { value: 'client-secret-1' },
        },
      },
    },
  })
  try {
    const rs = await Promise.all(Array.from({ length: 200 }, () => client.get('billing', '/s/cred-oauth/x')))
    assert.ok(rs.every((r) => r.status === 200))
    assert.equal((await log('cred-oauth-token')).length, 1)
    assert.ok((await log('cred-oauth')).every((r) => r.headers.authorization === 'Bearer oauth-tok-1'))
  } finally {
    client.close()
  }
})

test('a sync provider works; a token without expiresIn does not expire', async () => {
  const client = await callbackClient('cred-sync')
  try {
    let calls = 0
    client.setTokenProvider('orders', () => {
      calls++
      return { token: 'sync-tok' }
    })
    assert.equal((await client.get('orders', '/s/cred-sync/x')).status, 200)
    assert.equal((await client.get('orders', '/s/cred-sync/x')).status, 200)
    assert.equal(calls, 1)
    assert.deepEqual((await log('cred-sync')).map((r) => r.headers.authorization), ['Bearer sync-tok', 'Bearer sync-tok'])
    const [state] = client.credentialsState()
    assert.equal(state.service, 'orders')
    assert.equal(state.type, 'callback')
    assert.equal(state.status, 'valid')
    assert.equal(state.expiresAtMs, null)
    assert.equal(typeof state.lastRefreshMs, 'number')
    assert.equal(state.lastError, null)
    assert.deepEqual(state.keys, [])
  } finally {
    client.close()
  }
})

// Regression: a lifetime of ~9.2e18 s or more panicked the refresh task and every request failed.
test('a lifetime past any clock is held, not a crash', async () => {
  for (const lifetime of [9223372036854775807, 1e19, Number.MAX_VALUE, Infinity]) {
    const client = await callbackClient('cred-life')
    try {
      let calls = 0
      client.setTokenProvider('orders', () => {
        calls++
        return { token: 'long-lived-tok', expiresIn: lifetime }
      })
      for (let i = 0; i < 3; i++) assert.equal((await client.get('orders', '/s/cred-life/x')).status, 200)
      assert.equal(calls, 1, `${lifetime}`)
      assert.equal(client.credentialsState()[0].status, 'valid')
    } finally {
      client.close()
    }
  }
})

test('an async provider with expiresIn, placed in a custom header', async () => {
  const client = await callbackClient('cred-async', { header: 'x-api-key', prefix: '' })
  try {
    client.setTokenProvider('orders', async () => {
      await sleep(10)
      return { token: 'async-tok', expiresIn: 3600 }
    })
    assert.equal((await client.get('orders', '/s/cred-async/x')).status, 200)
    assert.equal((await log('cred-async'))[0].headers['x-api-key'], 'async-tok')
    const [state] = client.credentialsState()
    assert.equal(state.status, 'valid')
    assert.ok(Math.abs(state.expiresAtMs - (Date.now() + 3_600_000)) < 60_000, `expiresAtMs ${state.expiresAtMs}`)
  } finally {
    client.close()
  }
})

test('a provider that throws or rejects gives an AuthError with its message', async () => {
  const client = await callbackClient('cred-throws')
  try {
    const cases = [
      [() => { throw new Error('vault is sealed') }, 'vault is sealed'],
      [async () => { throw new Error('async vault is sealed') }, 'async vault is sealed'],
      [() => Promise.reject('a plain string'), 'a plain string'],
      [() => ({ expiresIn: 5 }), 'token provider: token: expected a non-empty string'],
      [() => 'bare-string', 'token provider: expected { token, expiresIn }'],
      [() => ({ token: 'bad-exp-tok', expiresIn: -1 }), 'expiresIn: expected a positive number of seconds, got -1'],
      [() => ({ token: 'bad-exp-tok', expiresIn: 0 }), 'expiresIn: expected a positive number of seconds, got 0'],
      [() => ({ token: 'bad-exp-tok', expiresIn: NaN }), 'expiresIn: expected a positive number of seconds, got NaN'],
      [() => ({ token: 'bad-exp-tok', expiresIn: '60' }), 'expiresIn: expected a number of seconds'],
    ]
    for (const [provider, message] of cases) {
      client.setTokenProvider('orders', provider)
      const e = await client.get('orders', '/s/cred-throws/x').then(() => assert.fail('expected an AuthError'), (e) => e)
      assert.ok(e instanceof AuthError, `${e}`)
      assert.ok(e.message.includes(message), `${JSON.stringify(message)} not in ${e.message}`)
      assert.ok(!e.message.includes('bad-exp-tok'), e.message)
      const [state] = client.credentialsState()
      assert.ok(state.lastError.includes(message), state.lastError)
    }
    // The runtime survived: a good provider works again.
    client.setTokenProvider('orders', () => ({ token: 'good-tok' }))
    assert.equal((await client.get('orders', '/s/cred-throws/x')).status, 200)
    assert.equal((await log('cred-throws')).length, 1)
  } finally {
    client.close()
  }
})

test('a provider slower than refresh.timeout_ms times out', async () => {
  const client = await callbackClient('cred-slow', { refresh: { timeout_ms: 200 } })
  try {
    client.setTokenProvider('orders', () => new Promise(() => {}))
    const t0 = performance.now()
    await assert.rejects(client.get('orders', '/s/cred-slow/x'), (e) => e instanceof AuthError && /within 200 ms/.test(e.message))
    assert.ok(performance.now() - t0 < 2000)
  } finally {
    client.close()
  }
})

test('setTokenProvider checks its arguments and the service', async () => {
  const client = await callbackClient('cred-args')
  try {
    assert.throws(() => client.setTokenProvider('orders', 'not a function'), ConfigError)
    assert.throws(() => client.setTokenProvider(42, () => ({})), ConfigError)
    assert.throws(() => client.setTokenProvider('nope', () => ({})), (e) => e instanceof ConfigError && e.message.includes('nope'))
    const plain = new Client({ log: { enabled: false }, services: { svc: { base_url: upstream.base } } })
    assert.throws(() => plain.setTokenProvider('svc', () => ({})), (e) => e instanceof ConfigError && e.message.includes('callback'))
    assert.deepEqual(plain.credentialsState(), [])
    plain.close()
    // Without a provider, the request fails with an AuthError saying so.
    await assert.rejects(client.get('orders', '/s/cred-args/x'), (e) => e instanceof AuthError && /no token provider/.test(e.message))
  } finally {
    client.close()
  }
})

test('a key pool shows each key by index and name in credentialsState, never the key', async () => {
  await upstream.admin('PUT', '/__admin/script/cred-pool', { steps: [{ status: 401 }, { status: 200, times: 10 }] })
  const client = new Client({
    log: { enabled: false },
    services: { llm: { base_url: upstream.base, auth: { type: 'header', header: 'x-api-key', keys: [{ value: 'pool-key-AAA', name: 'first' }, { value: 'pool-key-BBB' }] } } },
  })
  try {
    const r = await client.get('llm', '/s/cred-pool/x')
    assert.equal(r.status, 200)
    assert.equal(r.attempts, 2)
    const [state] = client.credentialsState()
    assert.equal(state.type, 'header')
    assert.deepEqual(state.keys.map((k) => [k.index, k.name, k.status]), [[0, 'first', 'quarantined'], [1, '1', 'ok']])
    const shown = JSON.stringify(state) + util.inspect(state, { depth: 5 })
    assert.ok(!shown.includes('pool-key-'), shown)
  } finally {
    client.close()
  }
})

// A child process with stderr logging on and every event captured: the token appears nowhere.
// It never closes its client, so it also shows a process with a token provider exits on its own.
test('no token appears in events, log lines or the state; the process exits on its own', async () => {
  await upstream.admin('PUT', '/__admin/script/cred-redact', { steps: [{ status: 200 }, { status: 401 }, { status: 200, times: 100 }] })
  const code = `
    const { Client } = require(process.env.SDK)
    const c = new Client({
      client: { name: 'node-redact' },
      log: { enabled: true, sink: 'stderr' },
      services: { orders: { base_url: process.env.UPSTREAM, auth: { type: 'callback' } } },
    })
    const events = []
    c.on('event', (e) => events.push(e))
    let n = 0
    c.setTokenProvider('orders', async () => ({ token: 'tok-SECRET-' + ++n + '-zq', expiresIn: 3600 }))
    ;(async () => {
      const out = []
      for (let i = 0; i < 4; i++) out.push((await c.get('orders', '/s/cred-redact/x')).status)
      c.setTokenProvider('orders', () => { throw new Error('the vault said no') })
      try { await c.get('orders', '/s/cred-redact/x') } catch (e) { out.push(e.name + ': ' + e.message) }
      c.flush()
      console.log(JSON.stringify({ out, n, events, state: c.credentialsState() }))
    })()
  `
  const { exit, stdout, stderr } = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, UPSTREAM: upstream.base, SDK: path.resolve(__dirname, '..') },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`the child process did not exit on its own; stdout: ${stdout}; stderr: ${stderr}`))
    }, 10000)
    child.on('exit', (exit) => {
      clearTimeout(timer)
      resolve({ exit, stdout, stderr })
    })
  })
  assert.equal(exit, 0, stderr)
  const result = JSON.parse(stdout)
  // tok-SECRET-1 for the first requests, then a 401 refreshes to tok-SECRET-2.
  assert.equal(result.n, 2)
  assert.deepEqual(result.out.slice(0, 4), [200, 200, 200, 200])
  assert.match(result.out[4], /^AuthError: .*the vault said no/)
  assert.ok(result.events.length >= 5, `events: ${JSON.stringify(result.events)}`)
  const logLines = stderr.split('\n').filter((l) => l.startsWith('{'))
  assert.ok(logLines.length >= 5, `log lines: ${stderr}`)
  for (const [what, text] of [['stdout (events, state, errors)', stdout], ['stderr (log lines)', stderr]]) {
    assert.ok(!text.includes('SECRET'), `${what} shows a token: ${text}`)
  }
  const auth = (await log('cred-redact')).map((r) => r.headers.authorization)
  assert.deepEqual(auth.slice(0, 3), ['Bearer tok-SECRET-1-zq', 'Bearer tok-SECRET-1-zq', 'Bearer tok-SECRET-2-zq'])
})
