'use strict'
// The views cross as the core's serde JSON, camelCased: at run time every view has exactly the
// keys ./types.d.ts (generated from the core's schema) declares, and a typed usage file
// compiles against those declarations with tsc --strict.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { Client, ChatResponse, HarnessError, NoHealthyProviderError } = require('..')
const { startUpstream } = require('./upstream')

const pkg = path.resolve(__dirname, '..')

// The keys of `export interface <name>` in types.d.ts, in order.
function declared(name) {
  const text = fs.readFileSync(path.join(pkg, 'types.d.ts'), 'utf8')
  const start = text.indexOf(`export interface ${name} {`)
  assert.ok(start >= 0, `types.d.ts declares ${name}`)
  const body = text.slice(text.indexOf('{', start) + 1, text.indexOf('\n}', start))
  return [...body.matchAll(/^ {2}'?([A-Za-z_][A-Za-z0-9_]*)'?\??:/gm)].map((m) => m[1])
}

function sameKeys(value, name) {
  assert.deepEqual(Object.keys(value).sort(), declared(name).sort(), `${name}: ${JSON.stringify(value)}`)
}

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

async function chatClient(specs) {
  const prefix = `node-views-${process.pid}-${Date.now()}`
  const services = {}
  const providers = []
  for (const [id, spec] of Object.entries(specs)) {
    await upstream.admin('POST', `/__admin/provider/${prefix}-${id}`, spec)
    services[id] = { base_url: `${upstream.base}/llm/${prefix}-${id}`, retry: { max_retries: 0 }, auth: { type: 'header', header: 'x-api-key', keys: [{ value: 'k-1', name: 'first' }] } }
    providers.push({ id, service: id, model: `${id}-model`, weight: 1 })
  }
  return new Client({ log: { enabled: false }, services, routes: { chat: { adapter: 'openai-compatible', strategy: 'priority', max_attempts: 2, providers } } })
}

test('every view has exactly the keys types.d.ts declares, camelCased', async () => {
  const client = await chatClient({ a: { content: 'hello', prompt_tokens: 3, completion_tokens: 2 } })
  try {
    const r = await client.chat('chat', { messages: [{ role: 'user', content: 'hi' }] })
    assert.ok(r instanceof ChatResponse)
    const { stale, raw, fromCache, ...view } = r
    sameKeys(view, 'ChatResponse')
    sameKeys(r.usage, 'Usage')
    assert.equal(stale, false)
    assert.equal(fromCache, false)
    assert.ok(Buffer.isBuffer(raw) && raw.length > 0)
    assert.deepEqual(r.attemptsByProvider, [['a', 1]])

    const stream = await client.chatStream('chat', { messages: [{ role: 'user', content: 'hi' }] })
    for await (const chunk of stream) sameKeys(chunk, 'ChatChunk')

    const state = client.routingState('chat')
    sameKeys(state, 'RouteState')
    sameKeys(state.providers[0], 'ProviderState')
    const [cred] = client.credentialsState()
    sameKeys(cred, 'CredentialState')
    sameKeys(cred.keys[0], 'KeyStatus')
    sameKeys(client.breakerDetails('a', 'POST', '/v1/chat/completions'), 'BreakerInfo')
    const breakers = client.breakers()
    assert.ok(breakers.length > 0)
    for (const b of breakers) sameKeys(b, 'BreakerInfo')
    const d = client.describe()
    sameKeys(d, 'Description')
    assert.equal(d.configVersion, client.configVersion)
    sameKeys(d.services[0], 'ServiceSummary')
    sameKeys(d.routes[0], 'RouteSummary')
  } finally {
    client.close()
  }
})

test('the client has one method per view the core declares (ClientViews), and checks their arguments', () => {
  const text = fs.readFileSync(path.join(pkg, 'types.d.ts'), 'utf8')
  const body = text.slice(text.indexOf('export interface ClientViews {'))
  const methods = [...body.slice(0, body.indexOf('\n}')).matchAll(/^ {2}([a-zA-Z]+)\(/gm)].map((m) => m[1])
  assert.ok(methods.includes('routingState') && methods.includes('describe'), methods.join())
  const client = new Client({ log: { enabled: false }, services: { s: { base_url: 'http://127.0.0.1:9' } } })
  try {
    for (const m of methods) assert.equal(typeof client[m], 'function', m)
    assert.throws(() => client.breakerDetails('s', 'GET'), (e) => e.name === 'ConfigError' && /^request\.path: expected a string/.test(e.message))
    assert.throws(() => client.routingState('nope'), (e) => e.name === 'ConfigError' && e.message.includes('unknown route `nope`'))
    assert.throws(() => client.configSourceState(), (e) => e.name === 'ConfigError' && e.message.includes('this client has no config_source'))
  } finally {
    client.close()
  }
})

test('configSourceState says what this instance runs from its config source', () => {
  // Redis at a closed port: the bootstrap config runs, and the state says so.
  const configSource = { redis_url: 'redis://127.0.0.1:1/0', name: 'shop', instance_id: 'node-1', poll_ms: 100 }
  const client = new Client({ log: { enabled: false }, services: {}, config_source: configSource })
  try {
    const s = client.configSourceState()
    sameKeys(s, 'ConfigSourceState')
    assert.deepEqual([s.name, s.instance, s.version, s.appliedFrom, s.connected, s.target], ['shop', 'node-1', 0, 'bootstrap', false, 0])
    assert.ok(!JSON.stringify(s).includes('127.0.0.1:1'))
  } finally {
    client.close()
  }
})

test('an error is the core ErrorView: its text is the message, its provider errors are data', async () => {
  const client = await chatClient({ a: { fail_rate: 1.0, fail_status: 503 }, b: { fail_rate: 1.0, fail_status: 502 } })
  try {
    const e = await client.chat('chat', { messages: [{ role: 'user', content: 'hi' }] }).catch((x) => x)
    assert.ok(e instanceof NoHealthyProviderError, String(e))
    assert.ok(e instanceof HarnessError)
    assert.ok(!e.message.startsWith('NoHealthyProviderError'), e.message)
    assert.deepEqual(Object.keys(e.providerErrors[0]).sort(), declared('ProviderError').sort())
    assert.deepEqual(e.providerErrors.map((p) => p.provider), ['a', 'b'])
  } finally {
    client.close()
  }
})

test('a config, the views and a chat response typecheck against the generated types (tsc --strict)', () => {
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  // No --skipLibCheck: index.d.ts and types.d.ts are checked too.
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--types', 'node', path.join(__dirname, 'views-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
