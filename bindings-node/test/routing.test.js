'use strict'
// Routing from Node, against the shared upstream's simulated model providers: chat answers
// (content, provider, model, usage, cost), chat streams (chunks, a done chunk with usage,
// mid-stream failover in `restart` and `hold` mode, break, cancel() and AbortSignal),
// routingState, setWeight, routed plain requests, NoHealthyProviderError's providerErrors,
// events, bad input, and no secret in any error's string form.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const util = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, ChatResponse, ChatStream, HarnessError, ConfigError, CancelledError, NoHealthyProviderError, HttpStatusError, TimeoutError } = sdk
const { startUpstream } = require('./upstream')

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

const MESSAGES = [{ role: 'user', content: 'Say hello, please.' }]
const FIVE = 'one two three four five'
const SECRET = 'sk-node-routing-secret-7f3a'

let lastName = 0

// Simulated providers `<prefix>-<id>` from `specs`; resolves to their name prefix.
async function providers(specs) {
  const prefix = `node-route-${process.pid}-${++lastName}`
  for (const [id, spec] of Object.entries(specs)) await upstream.admin('POST', `/__admin/provider/${prefix}-${id}`, spec)
  return prefix
}

// A client with one service per provider id and one route `chat` over them, in this order.
function routedClient(prefix, ids, route = {}, service = {}) {
  const services = {}
  const list = []
  for (const id of ids) {
    services[id] = { base_url: `${upstream.base}/llm/${prefix}-${id}`, retry: { jitter: false, base_delay_ms: 10, max_delay_ms: 50 }, ...service }
    list.push({ id, service: id, model: `${id}-model`, weight: 1 })
  }
  const { providers: overrides = {}, ...rest } = route
  for (const p of list) Object.assign(p, overrides[p.id] || {})
  return new Client({
    client: { name: 'node-routing' },
    log: { enabled: false },
    services,
    routes: { chat: { adapter: 'openai-compatible', strategy: 'priority', providers: list, ...rest } },
  })
}

async function providerLog(prefix, id) {
  return upstream.admin('GET', `/__admin/provider-log/${prefix}-${id}`)
}

async function eventually(fn, ms = 1000) {
  const until = performance.now() + ms
  while (!fn()) {
    if (performance.now() > until) return false
    await sleep(10)
  }
  return true
}

// Every chunk of a chat stream.
async function collect(stream) {
  const chunks = []
  for await (const chunk of stream) chunks.push(chunk)
  return chunks
}

const deltas = (chunks) => chunks.filter((c) => c.kind === 'delta').map((c) => c.content).join('')

// ---------------------------------------------------------------- chat

test('chat: content, provider, model, usage and cost from the answering provider', async () => {
  const prefix = await providers({ primary: { content: 'Hello from {name} as {model}', prompt_tokens: 1000, completion_tokens: 500 } })
  const client = routedClient(prefix, ['primary'], { providers: { primary: { price: { input_per_1k: 0.5, output_per_1k: 1.5 } } } })
  try {
    const r = await client.chat('chat', { messages: MESSAGES, temperature: 0.2, max_tokens: 64 })
    assert.ok(r instanceof ChatResponse)
    assert.equal(r.content, `Hello from ${prefix}-primary as primary-model`)
    assert.equal(r.finishReason, 'stop')
    assert.equal(r.route, 'chat')
    assert.equal(r.provider, 'primary')
    assert.equal(r.model, 'primary-model')
    assert.deepEqual(r.usage, { promptTokens: 1000, completionTokens: 500, totalTokens: 1500, cachedTokens: 0, reasoningTokens: 0 })
    assert.ok(Math.abs(r.cost - 1.25) < 1e-9, `cost ${r.cost}`)
    assert.equal(r.fallback, null)
    assert.equal(r.stale, false)
    assert.equal(r.attempts, 1)
    assert.deepEqual(r.attemptsByProvider, [['primary', 1]])
    assert.match(r.traceId, /^[0-9a-f]{32}$/)
    assert.ok(r.elapsedMs > 0)
    assert.ok(Buffer.isBuffer(r.raw))
    assert.equal(JSON.parse(r.raw.toString('utf8')).choices[0].message.content, r.content)
    // The parameters reached the provider as given, with the provider's model.
    const log = await providerLog(prefix, 'primary')
    assert.equal(log.count, 1)
    const body = log.requests[0].body
    assert.deepEqual(body.messages, MESSAGES)
    assert.equal(body.model, 'primary-model')
    assert.equal(body.temperature, 0.2)
    assert.equal(body.max_tokens, 64)
    assert.ok(!body.stream)
  } finally {
    client.close()
  }
})

test('chat: a failing provider fails over; headers, traceparent and the events say so', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 503 }, backup: { content: 'from backup' } })
  const client = routedClient(prefix, ['primary', 'backup'], { same_provider_retries: 0 })
  const events = []
  client.on('event', (e) => events.push(e))
  try {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    const r = await client.chat('chat', { messages: MESSAGES }, { headers: { 'x-tenant': 't-1' }, traceparent, timeoutMs: 5000 })
    assert.equal(r.content, 'from backup')
    assert.equal(r.provider, 'backup')
    assert.equal(r.attempts, 2)
    assert.deepEqual(r.attemptsByProvider, [['primary', 1], ['backup', 1]])
    assert.equal(r.traceId, '0af7651916cd43dd8448eb211c80319c')
    client.flush()
    const failover = events.find((e) => e.type === 'provider_failover')
    assert.ok(failover, JSON.stringify(events))
    assert.equal(failover.route, 'chat')
    assert.equal(failover.from, 'primary')
    assert.equal(failover.to, 'backup')
    assert.equal(failover.reason, 'HttpStatusError')
    assert.equal(failover.status, 503)
    assert.equal(failover.trace_id, r.traceId)
    const finished = events.filter((e) => e.type === 'request_finished')
    assert.ok(finished.some((e) => e.route === 'chat' && e.provider === 'backup' && e.model === 'backup-model'), JSON.stringify(finished))
  } finally {
    client.close()
  }
})

test('chat: a non-retryable provider error reaches the caller with its provider', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 400, error_code: 'content_policy_violation' }, backup: {} })
  const client = routedClient(prefix, ['primary', 'backup'])
  try {
    const err = await client.chat('chat', { messages: MESSAGES }).then(
      () => assert.fail('expected an error'),
      (e) => e,
    )
    assert.ok(err instanceof HttpStatusError, String(err))
    assert.equal(err.status, 400)
    assert.equal(err.errorCode, 'content_policy_violation')
    assert.equal(err.provider, 'primary')
    assert.deepEqual(err.providerErrors, [])
    assert.equal((await providerLog(prefix, 'backup')).count, 0)
  } finally {
    client.close()
  }
})

test('NoHealthyProviderError lists every provider and its last error; no secret in any form of it', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 502 }, backup: { fail_rate: 1.0, fail_status: 503 }, spare: {} })
  const client = routedClient(
    prefix,
    ['primary', 'backup', 'spare'],
    { same_provider_retries: 0, max_attempts: 2, providers: { spare: { weight: 0 } } },
    { auth: { type: 'bearer', token: { value: SECRET } } },
  )
  try {
    const err = await client.chat('chat', { messages: MESSAGES }).then(
      () => assert.fail('expected an error'),
      (e) => e,
    )
    assert.ok(err instanceof NoHealthyProviderError, String(err))
    assert.ok(err instanceof HarnessError)
    assert.equal(err.code, 'NoHealthyProviderError')
    assert.equal(err.attempts, 2)
    assert.deepEqual(
      err.providerErrors.map((p) => p.provider),
      ['primary', 'backup', 'spare'],
    )
    assert.match(err.providerErrors[0].error, /HttpStatusError.*502/)
    assert.match(err.providerErrors[1].error, /HttpStatusError.*503/)
    assert.match(err.providerErrors[2].error, /not tried/)
    assert.match(err.message, /primary: HttpStatusError/)
    // The token went to the providers; it shows nowhere in the error.
    const log = await providerLog(prefix, 'primary')
    assert.equal(log.count, 1)
    for (const text of [err.message, String(err), util.inspect(err, { depth: 5 }), err.stack, JSON.stringify(err), JSON.stringify(client.routingState('chat'))]) {
      assert.ok(!text.includes(SECRET), `a secret in ${text}`)
    }
  } finally {
    client.close()
  }
})

test('a plain request may name a route: the Response carries what routing did', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 503 }, backup: { prompt_tokens: 10, completion_tokens: 4 } })
  const client = routedClient(prefix, ['primary', 'backup'], { same_provider_retries: 0, providers: { backup: { price: { input_per_1k: 1, output_per_1k: 2 } } } })
  try {
    const r = await client.request({ service: 'chat', method: 'POST', path: '/v1/chat/completions', json: { messages: MESSAGES } })
    assert.equal(r.status, 200)
    assert.equal(r.route, 'chat')
    assert.equal(r.provider, 'backup')
    assert.equal(r.model, 'backup-model')
    assert.deepEqual(r.attemptsByProvider, [['primary', 1], ['backup', 1]])
    assert.deepEqual(r.usage, { promptTokens: 10, completionTokens: 4, totalTokens: 14, cachedTokens: 0, reasoningTokens: 0 })
    assert.ok(Math.abs(r.cost - 0.018) < 1e-9, `cost ${r.cost}`)
    assert.equal(r.fallback, null)
    assert.equal(r.stale, false)
    assert.equal(r.json().choices[0].message.role, 'assistant')
  } finally {
    client.close()
  }
  // Not routed: every routing field is null.
  await upstream.admin('PUT', '/__admin/script/node-route-plain', { steps: [{ status: 200, body: 'ok' }] })
  const plain = new Client({ log: { enabled: false }, services: { svc: { base_url: upstream.base } } })
  try {
    const r = await plain.get('svc', '/s/node-route-plain/x')
    assert.equal(r.status, 200)
    for (const k of ['route', 'provider', 'model', 'attemptsByProvider', 'fallback', 'cost', 'usage']) assert.equal(r[k], null, k)
    assert.equal(r.stale, false)
  } finally {
    plain.close()
  }
})

test('a non-core route serves its static fallback when every provider fails', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 503 } })
  const client = routedClient(prefix, ['primary'], { same_provider_retries: 0, criticality: 'non-core', fallback: { static: 'Busy, try again soon.' } })
  const served = []
  client.on('fallback_served', (e) => served.push(e))
  try {
    const r = await client.chat('chat', { messages: MESSAGES })
    assert.equal(r.content, 'Busy, try again soon.')
    assert.equal(r.fallback, 'static')
    assert.equal(r.provider, null)
    assert.equal(r.stale, false)
    client.flush()
    assert.deepEqual(served.map((e) => [e.route, e.kind]), [['chat', 'static']])
  } finally {
    client.close()
  }
})

test('a cached answer is served, marked stale, when no provider can answer now', async () => {
  const prefix = await providers({ primary: { content: 'fresh answer' } })
  const client = routedClient(prefix, ['primary'], { same_provider_retries: 0, fallback: { cache_ttl_ms: 60000 } })
  try {
    const first = await client.chat('chat', { messages: MESSAGES })
    assert.equal(first.stale, false)
    assert.equal(first.fallback, null)
    await upstream.admin('POST', `/__admin/provider/${prefix}-primary`, { fail_rate: 1.0, fail_status: 503 })
    const again = await client.chat('chat', { messages: MESSAGES })
    assert.equal(again.content, 'fresh answer')
    assert.equal(again.fallback, 'cache')
    assert.equal(again.stale, true)
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- chat streams

test('chatStream: delta chunks, then done with finish reason, usage and cost', async () => {
  const prefix = await providers({ primary: { content: FIVE, prompt_tokens: 7 } })
  const client = routedClient(prefix, ['primary'], { providers: { primary: { price: { input_per_1k: 1, output_per_1k: 1 } } } })
  try {
    const stream = await client.chatStream('chat', { messages: MESSAGES, temperature: 0 })
    assert.ok(stream instanceof ChatStream)
    assert.equal(stream.route, 'chat')
    assert.match(stream.traceId, /^[0-9a-f]{32}$/)
    assert.equal(String(stream), '[ChatStream chat]')
    const chunks = await collect(stream)
    const kinds = chunks.map((c) => c.kind)
    assert.deepEqual(kinds, [...Array(5).fill('delta'), 'done'])
    assert.equal(deltas(chunks), FIVE)
    for (const c of chunks) {
      assert.deepEqual(Object.keys(c), ['kind', 'content', 'provider', 'model', 'toolCall', 'toolCalls', 'finishReason', 'usage', 'cost', 'reason'])
      assert.equal(c.provider, 'primary')
    }
    const done = chunks.at(-1)
    assert.equal(done.model, 'primary-model')
    assert.equal(done.finishReason, 'stop')
    assert.deepEqual(done.usage, { promptTokens: 7, completionTokens: 5, totalTokens: 12, cachedTokens: 0, reasoningTokens: 0 })
    assert.ok(Math.abs(done.cost - 0.012) < 1e-9, `cost ${done.cost}`)
    assert.equal(done.reason, null)
    // Iterated once: a second loop sees nothing more.
    assert.deepEqual(await collect(stream), [])
    const log = await providerLog(prefix, 'primary')
    assert.equal(log.requests[0].body.stream, true)
    assert.equal(client.routingState('chat').providers[0].inFlight, 0)
  } finally {
    client.close()
  }
})

test('chatStream, mid_stream restart: a cut answer gives a restart chunk, then the backup\'s full answer', async () => {
  const prefix = await providers({ primary: { content: FIVE, stream: { cut_after: 2 } }, backup: { content: FIVE } })
  const client = routedClient(prefix, ['primary', 'backup'], { stream: { mid_stream: 'restart' } })
  const events = []
  client.on('stream_restarted', (e) => events.push(e))
  try {
    const chunks = await collect(await client.chatStream('chat', { messages: MESSAGES }))
    const kinds = chunks.map((c) => c.kind)
    const restartAt = kinds.indexOf('restart')
    assert.ok(restartAt > 0, JSON.stringify(kinds))
    // Before the restart: the primary's first words; after it, the backup's whole answer.
    assert.ok(chunks.slice(0, restartAt).every((c) => c.kind === 'delta' && c.provider === 'primary'))
    assert.equal(deltas(chunks.slice(0, restartAt)), 'one two')
    const restart = chunks[restartAt]
    assert.equal(restart.provider, 'backup')
    assert.equal(typeof restart.reason, 'string')
    assert.ok(restart.reason.length > 0)
    assert.equal(deltas(chunks.slice(restartAt + 1)), FIVE)
    assert.equal(chunks.at(-1).kind, 'done')
    assert.equal(chunks.at(-1).provider, 'backup')
    client.flush()
    assert.equal(events.length, 1)
    assert.equal(events[0].from, 'primary')
    assert.equal(events[0].to, 'backup')
    assert.equal(events[0].mode, 'restart')
  } finally {
    client.close()
  }
})

test('chatStream, mid_stream hold (default): a cut answer is replaced unseen by the backup\'s', async () => {
  const prefix = await providers({ primary: { content: FIVE, stream: { cut_after: 2 } }, backup: { content: FIVE } })
  const client = routedClient(prefix, ['primary', 'backup'])
  try {
    const chunks = await collect(await client.chatStream('chat', { messages: MESSAGES }))
    assert.ok(!chunks.some((c) => c.kind === 'restart'), JSON.stringify(chunks.map((c) => c.kind)))
    assert.equal(deltas(chunks), FIVE)
    assert.ok(chunks.every((c) => c.provider === 'backup'))
    assert.equal((await providerLog(prefix, 'primary')).count, 1)
    assert.equal((await providerLog(prefix, 'backup')).count, 1)
  } finally {
    client.close()
  }
})

test('chatStream, mid_stream error: a stall rejects the loop with TimeoutError (idle) naming the provider', async () => {
  const prefix = await providers({ primary: { content: FIVE, stream: { stall_after: 2 } }, backup: {} })
  const client = routedClient(prefix, ['primary', 'backup'], { stream: { mid_stream: 'error' } }, { timeouts: { idle_ms: 300 } })
  try {
    const stream = await client.chatStream('chat', { messages: MESSAGES })
    const seen = []
    const err = await (async () => {
      for await (const c of stream) seen.push(c)
    })().then(
      () => assert.fail('expected the loop to reject'),
      (e) => e,
    )
    assert.ok(err instanceof TimeoutError, String(err))
    assert.equal(err.phase, 'idle')
    assert.equal(err.provider, 'primary')
    assert.equal(deltas(seen), 'one two')
  } finally {
    client.close()
  }
})

test('chatStream: no first chunk within ttft_ms is a TimeoutError with phase ttft', async () => {
  const prefix = await providers({ primary: { content: FIVE, stream: { ttft_ms: 3000 } } })
  const client = routedClient(prefix, ['primary'], { ttft_ms: 200, max_attempts: 1 })
  try {
    const t0 = performance.now()
    const err = await (async () => {
      for await (const _ of await client.chatStream('chat', { messages: MESSAGES })) void _
    })().then(
      () => assert.fail('expected an error'),
      (e) => e,
    )
    assert.ok(performance.now() - t0 < 2500)
    assert.ok(err instanceof TimeoutError, String(err))
    assert.equal(err.phase, 'ttft')
    assert.equal(err.provider, 'primary')
  } finally {
    client.close()
  }
})

test('chatStream: breaking out of the loop, cancel() and an AbortSignal stop the answer and free its permits', async () => {
  const prefix = await providers({ primary: { content: 'a b c d e f g h i j k l m n o p', stream: { delay_ms: 50 } } })
  const client = routedClient(prefix, ['primary'], {}, { bulkhead: { max_concurrency: 4 } })
  const idle = () => client.bulkheadInUse('primary') === 0 && client.routingState('chat').providers[0].inFlight === 0
  try {
    // break
    const s1 = await client.chatStream('chat', { messages: MESSAGES })
    let n = 0
    for await (const c of s1) {
      assert.equal(c.kind, 'delta')
      if (++n === 2) break
    }
    assert.ok(await eventually(idle), 'permits after break')

    // cancel(): the iteration ends
    const s2 = await client.chatStream('chat', { messages: MESSAGES })
    const got = []
    for await (const c of s2) {
      got.push(c)
      if (got.length === 1) s2.cancel()
    }
    assert.equal(got.length, 1)
    assert.ok(await eventually(idle), 'permits after cancel()')

    // AbortSignal while reading: the loop rejects with CancelledError carrying the reason
    const ac = new AbortController()
    const s3 = await client.chatStream('chat', { messages: MESSAGES }, { signal: ac.signal })
    const reason = new Error('user left')
    const err = await (async () => {
      for await (const _ of s3) ac.abort(reason)
    })().then(
      () => assert.fail('expected CancelledError'),
      (e) => e,
    )
    assert.ok(err instanceof CancelledError, String(err))
    assert.equal(err.cause, reason)
    assert.ok(await eventually(idle), 'permits after abort')

    // AbortSignal before the answer starts: chat and chatStream reject at once
    const aborted = AbortSignal.abort()
    await assert.rejects(client.chat('chat', { messages: MESSAGES }, { signal: aborted }), CancelledError)
    await assert.rejects(client.chatStream('chat', { messages: MESSAGES }, { signal: aborted }), CancelledError)
  } finally {
    client.close()
  }
})

test('chat: an AbortSignal cancels a pending answer', async () => {
  const prefix = await providers({ primary: { latency_ms: 5000 } })
  const client = routedClient(prefix, ['primary'])
  try {
    const t0 = performance.now()
    const err = await client.chat('chat', { messages: MESSAGES }, { signal: AbortSignal.timeout(100) }).then(
      () => assert.fail('expected CancelledError'),
      (e) => e,
    )
    assert.ok(err instanceof CancelledError, String(err))
    assert.equal(err.cause.name, 'TimeoutError')
    assert.ok(performance.now() - t0 < 2000)
    assert.ok(await eventually(() => client.bulkheadInUse('primary') === 0 && client.routingState('chat').providers[0].inFlight === 0))
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- state and weights

test('routingState shows each provider; setWeight moves traffic and versions the config', async () => {
  const prefix = await providers({ primary: { fail_rate: 1.0, fail_status: 503 }, backup: {} })
  const client = routedClient(prefix, ['primary', 'backup'], { same_provider_retries: 0 }, { breaker: { failure_threshold: 1, open_ms: 60000 } })
  const reloads = []
  client.on('config_reloaded', (e) => reloads.push(e))
  try {
    const r = await client.chat('chat', { messages: MESSAGES })
    assert.equal(r.provider, 'backup')
    const state = client.routingState('chat')
    assert.equal(state.route, 'chat')
    assert.equal(state.strategy, 'priority')
    assert.deepEqual(state.providers.map((p) => p.id), ['primary', 'backup'])
    const [primary, backup] = state.providers
    assert.deepEqual(Object.keys(primary), [
      'id', 'service', 'model', 'weight', 'effectiveWeight', 'health', 'successRate', 'latencyEwmaMs', 'breaker', 'inFlight', 'coolingMs', 'lastError',
    ])
    assert.equal(primary.service, 'primary')
    assert.equal(primary.model, 'primary-model')
    assert.equal(primary.weight, 1)
    assert.equal(primary.breaker, 'open')
    assert.equal(primary.inFlight, 0)
    assert.match(primary.lastError, /503/)
    assert.equal(backup.breaker, 'closed')
    assert.equal(backup.lastError, null)
    assert.equal(backup.coolingMs, null)
    assert.ok(backup.health > 0 && backup.health <= 1)
    assert.equal(typeof backup.effectiveWeight, 'number')

    const before = client.configVersion
    const version = client.setWeight('chat', 'backup', 0)
    assert.match(version, /^[0-9a-f]+$/)
    assert.notEqual(version, before)
    assert.equal(client.configVersion, version)
    assert.equal(client.routingState('chat').providers[1].weight, 0)
    client.flush()
    assert.deepEqual(reloads.map((e) => e.source), ['set_weight'])

    const err = await client.chat('chat', { messages: MESSAGES }).then(
      () => assert.fail('expected NoHealthyProviderError'),
      (e) => e,
    )
    assert.ok(err instanceof NoHealthyProviderError, String(err))
    assert.match(err.providerErrors.find((p) => p.provider === 'backup').error, /weight 0/)

    assert.throws(() => client.setWeight('chat', 'nobody', 1), (e) => e instanceof ConfigError && e.message.includes('unknown provider `nobody`'))
    assert.throws(() => client.setWeight('nope', 'backup', 1), (e) => e instanceof ConfigError && e.message.includes('unknown route'))
    assert.equal(client.configVersion, version, 'a refused setWeight keeps the config')
    assert.throws(() => client.routingState('nope'), (e) => e instanceof ConfigError && e.message.includes('unknown route `nope`'))
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- bad input

test('bad chat input is a ConfigError naming the field, and nothing is sent', async () => {
  const prefix = await providers({ primary: {} })
  const client = routedClient(prefix, ['primary'])
  try {
    const cases = [
      [() => client.chat('chat', { messages: [] }), 'messages: expected a non-empty list'],
      [() => client.chat('chat', {}), 'messages: expected a non-empty list'],
      [() => client.chat('chat', { messages: [{ content: 'no role' }] }), 'messages[0].role'],
      [() => client.chat('chat', { messages: [{ role: 'user', content: NaN }] }), 'messages: NaN'],
      [() => client.chat('chat', { messages: MESSAGES, temperature: Infinity }), 'params: NaN'],
      [() => client.chat('chat', { messages: MESSAGES, seed: 1n }), 'params: not serialisable'],
      [() => client.chat('chat', { messages: MESSAGES, stream: true }), 'params.stream'],
      [() => client.chat('chat', { messages: [{ role: 'user', content: 'a\ud800' }] }), 'messages: contains a lone surrogate'],
      [() => client.chat('chat', null), 'chat: expected { messages, ...params }'],
      [() => client.chat('chat', { messages: MESSAGES }, { timeoutMs: 'soon' }), 'timeoutMs'],
      [() => client.chat(42, { messages: MESSAGES }), 'route: expected a string'],
      [() => client.chat('nope', { messages: MESSAGES }), 'route: unknown route `nope` (configured: chat)'],
      [() => client.chatStream('nope', { messages: MESSAGES }), 'route: unknown route'],
    ]
    for (const [call, text] of cases) {
      await assert.rejects(call(), (e) => {
        assert.ok(e instanceof ConfigError, `${text}: ${e}`)
        assert.ok(e.message.includes(text), `${JSON.stringify(text)} not in ${e.message}`)
        return true
      })
    }
    assert.throws(() => client.setWeight('chat', 'primary', -1), (e) => e instanceof ConfigError && e.message.startsWith('weight:'))
    assert.throws(() => client.setWeight('chat', 'primary', 1.5), ConfigError)
    assert.throws(() => client.setWeight('chat', 42, 1), (e) => e instanceof ConfigError && e.message.startsWith('provider:'))
    assert.equal((await providerLog(prefix, 'primary')).count, 0)
  } finally {
    client.close()
  }
})

test('a route that is not openai-compatible refuses chat', async () => {
  const prefix = await providers({ primary: {} })
  const client = new Client({
    log: { enabled: false },
    services: { primary: { base_url: `${upstream.base}/llm/${prefix}-primary` } },
    routes: { raw: { providers: [{ id: 'primary', service: 'primary', weight: 1 }] } },
  })
  try {
    await assert.rejects(client.chat('raw', { messages: MESSAGES }), (e) => e instanceof ConfigError && e.message.includes('openai-compatible'))
    // A plain request through it still works, and says who answered.
    const r = await client.request({ service: 'raw', method: 'POST', path: '/v1/chat/completions', json: { messages: MESSAGES } })
    assert.equal(r.status, 200)
    assert.equal(r.provider, 'primary')
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- types

test('the type declarations cover the routing API (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'routing-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
