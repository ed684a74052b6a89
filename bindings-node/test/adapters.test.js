'use strict'
// Embeddings and host adapters from Node, against the shared upstream's simulated providers:
// `client.embed` (batches, vectors in order as Float32Array views over one buffer, usage and
// cost, bad input), and `client.registerAdapter` with an in-house format written in JS (sync and
// async methods; answers, streams, failover to Gemini on a 503, a throwing or rejecting method
// named with its step, built-in names refused), and no secret in errors or inspected results.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const util = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')

const { Client, EmbedResponse, ConfigError, NoHealthyProviderError } = require('..')
const { startUpstream } = require('./upstream')

const OA_SECRET = 'sk-node-embed-secret-4b1d'
const GEM_SECRET = 'AIza-node-gemini-secret-9c2e'
const HOUSE_SECRET = 'sk-node-house-secret-0e7a'

let upstream
// A rejection nobody handled would mean an adapter's error escaped the binding.
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

let lastName = 0

// Simulated providers `<prefix>-<id>` from `specs`; resolves to their name prefix.
async function providers(specs) {
  const prefix = `node-adapters-${process.pid}-${++lastName}`
  for (const [id, spec] of Object.entries(specs)) await upstream.admin('POST', `/__admin/provider/${prefix}-${id}`, spec)
  return prefix
}

async function setProvider(prefix, id, spec) {
  await upstream.admin('POST', `/__admin/provider/${prefix}-${id}`, spec)
}

async function providerLog(prefix, id) {
  return upstream.admin('GET', `/__admin/provider-log/${prefix}-${id}`)
}

function service(prefix, id, auth) {
  return { base_url: `${upstream.base}/llm/${prefix}-${id}`, retry: { jitter: false, base_delay_ms: 5, max_delay_ms: 20 }, auth }
}

// The upstream's deterministic vector for `text` (tests/upstream/src/formats/embeddings.rs), as float32.
function expected(text, dims) {
  const out = []
  for (let k = 0; k < dims; k++) out.push(Math.fround((text.length + k * 0.25) / 8))
  return out
}

function noSecret(texts) {
  for (const text of texts) {
    for (const secret of [OA_SECRET, GEM_SECRET, HOUSE_SECRET]) assert.ok(!String(text).includes(secret), `a secret in ${text}`)
  }
}

// ---------------------------------------------------------------- embeddings

function embedClient(prefix) {
  return new Client({
    client: { name: 'node-embed' },
    log: { enabled: false },
    services: {
      oa: service(prefix, 'oa', { type: 'bearer', token: { value: OA_SECRET } }),
      chatsvc: service(prefix, 'chat', undefined),
    },
    routes: {
      embed: {
        kind: 'embeddings',
        adapter: 'openai-compatible',
        providers: [{ id: 'oa', service: 'oa', model: 'e', weight: 1, max_batch: 2, price: { input_per_1k: 0.1, output_per_1k: 0 } }],
      },
      chat: { adapter: 'openai-compatible', providers: [{ id: 'chat', service: 'chatsvc', model: 'm', weight: 1 }] },
    },
  })
}

test('embed splits the inputs into batches and gives Float32Array vectors in input order over one buffer', async () => {
  // The provider refuses more than 2 inputs a request; the config says so and the call is split.
  const prefix = await providers({ oa: { reset: true, max_batch: 2, dimensions: 6 }, chat: { reset: true } })
  const client = embedClient(prefix)
  try {
    const texts = ['a', 'bb', 'ccc', 'dddd', 'eeeee']
    const r = await client.embed('embed', texts, { dimensions: 3, headers: { 'x-tenant': 't1' }, timeoutMs: 5000, principal: 'u-1' })
    assert.ok(r instanceof EmbedResponse)
    assert.equal(r.count, 5)
    assert.equal(r.dimensions, 3)
    assert.equal(r.batches, 3)
    assert.equal(r.attempts, 3)
    assert.equal(r.route, 'embed')
    assert.equal(r.provider, 'oa')
    assert.match(r.traceId, /^[0-9a-f]{32}$/)
    assert.equal(typeof r.elapsedMs, 'number')
    assert.equal(r.vectors.length, 5)
    const buffer = r.vectors[0].buffer
    texts.forEach((t, i) => {
      const v = r.vectors[i]
      assert.ok(v instanceof Float32Array, `vector ${i} is a Float32Array`)
      assert.equal(v.length, 3)
      assert.equal(v.buffer, buffer, `vector ${i} shares the one buffer`)
      assert.equal(v.byteOffset, i * 3 * 4)
      assert.deepEqual(Array.from(v), expected(t, 3), `input ${i}`)
    })
    assert.equal(buffer.byteLength, 5 * 3 * 4)
    // ceil(chars / 4) per text, summed over every batch: 1+1+1+1+2.
    assert.equal(r.usage.promptTokens, 6)
    assert.equal(r.usage.totalTokens, 6)
    assert.ok(Math.abs(r.cost - (6 * 0.1) / 1000) < 1e-12, `cost ${r.cost}`)

    const log = await providerLog(prefix, 'oa')
    assert.equal(log.count, 3)
    assert.equal(log.requests[0].path, `/llm/${prefix}-oa/v1/embeddings`)
    assert.equal(log.requests[0].body.dimensions, 3)
    // The batches may run at once: each at most 2 inputs, every input sent once.
    const sentInputs = log.requests.map((q) => q.body.input)
    assert.ok(sentInputs.every((b) => b.length <= 2), util.inspect(sentInputs))
    assert.deepEqual(sentInputs.flat().sort(), [...texts].sort())

    // Without `dimensions` the provider's own length comes back.
    const one = await client.embed('embed', ['hello'])
    assert.equal(one.dimensions, 6)
    assert.deepEqual(Array.from(one.vectors[0]), expected('hello', 6))

    noSecret([util.inspect(r, { depth: 5 }), JSON.stringify(r), String(r)])
  } finally {
    client.close()
  }
})

test('embed refuses bad input with a ConfigError naming the field, and a chat route', async () => {
  const prefix = await providers({ oa: { reset: true }, chat: { reset: true } })
  const client = embedClient(prefix)
  try {
    const refused = async (p, starts) => {
      const e = await p.then(
        () => assert.fail('expected a ConfigError'),
        (e) => e,
      )
      assert.ok(e instanceof ConfigError, `${e}`)
      assert.ok(e.message.startsWith(starts), e.message)
      noSecret([e.message, util.inspect(e, { depth: 5 }), e.stack])
    }
    await refused(client.embed('embed', []), 'inputs: expected at least one')
    await refused(client.embed('embed', ['a', '']), 'inputs[1]: an empty text')
    await refused(client.embed('embed', 'abc'), 'inputs: expected an array of strings')
    await refused(client.embed('embed', ['a', 7]), 'inputs[1]: expected a string, got number')
    await refused(client.embed('embed', ['a', 'b\ud800']), 'inputs[1]')
    await refused(client.embed('embed', ['a'], { dimensions: 0 }), 'dimensions: expected an integer >= 1')
    await refused(client.embed('embed', ['a'], { dimensions: 1.5 }), 'dimensions: expected an integer >= 1')
    await refused(client.embed('embed', ['a'], { timeoutMs: NaN }), 'request.timeout_ms')
    await refused(client.embed('embed', ['a'], { timeoutMs: -1 }), 'request.timeout_ms')
    await refused(client.embed(7, ['a']), 'route: expected a string')
    await refused(client.embed('chat', ['a']), 'routes.chat.kind: embed needs a route of kind embeddings')
    // And the other way round.
    const e = await client.chat('embed', { messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e)
    assert.ok(e.message.includes('kind embeddings'), e.message)
    assert.equal((await providerLog(prefix, 'oa')).count, 0, 'nothing was sent')
  } finally {
    client.close()
  }
})

// ---------------------------------------------------------------- host adapters

// The in-house format (`/inhouse/generate`) written in JS, with plain (synchronous) methods.
const inhouse = {
  buildRequest({ request, provider, stream }) {
    assert.equal(typeof provider.id, 'string')
    const prompt = request.messages
      .map((m) => m.content)
      .filter((c) => typeof c === 'string')
      .join('\n')
    return { path: '/inhouse/generate', body: { prompt, stream }, headers: { 'x-tenant': 't1' } }
  },
  parseResponse({ status, body }) {
    let b = null
    try {
      b = JSON.parse(body)
    } catch {}
    if (status !== 200) {
      const kind = b?.failure?.kind ?? 'busy'
      return { error: { code: kind === 'busy' ? 'overloaded' : 'invalid_request', message: kind } }
    }
    return { content: b.output.text, finish_reason: 'stop', usage: { prompt_tokens: b.tokens.in, completion_tokens: b.tokens.out } }
  },
  parseStreamEvent({ data }) {
    const d = JSON.parse(data)
    if (d.failure) return { error: { code: 'overloaded', message: d.failure.kind } }
    if (d.end) return { done: true, finish_reason: 'stop', usage: { prompt_tokens: d.tokens.in, completion_tokens: d.tokens.out } }
    return { content: d.token }
  },
}

// The same format as a class with async methods (a Promise each; `this` is the object).
class AsyncInHouse {
  constructor() {
    this.steps = []
  }
  async buildRequest(input) {
    await sleep(1)
    this.steps.push('buildRequest')
    return inhouse.buildRequest(input)
  }
  async parseResponse(input) {
    await sleep(1)
    this.steps.push('parseResponse')
    return inhouse.parseResponse(input)
  }
  async parseStreamEvent(input) {
    this.steps.push('parseStreamEvent')
    return inhouse.parseStreamEvent(input)
  }
}

const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'hi' },
]

function houseClient(prefix) {
  return new Client({
    client: { name: 'node-host-adapter' },
    log: { enabled: false },
    services: {
      house: service(prefix, 'house', { type: 'bearer', token: { value: HOUSE_SECRET } }),
      gem: service(prefix, 'gem', { type: 'header', header: 'x-goog-api-key', keys: [{ value: GEM_SECRET }] }),
    },
    routes: {
      chat: {
        adapter: 'openai-compatible',
        strategy: 'priority',
        providers: [
          { id: 'house', service: 'house', model: 'house-model', adapter: 'inhouse', weight: 1, price: { input_per_1k: 1, output_per_1k: 2 } },
          { id: 'gem', service: 'gem', model: 'gem-model', adapter: 'gemini', weight: 1 },
        ],
      },
    },
  })
}

async function streamedText(client) {
  const stream = await client.chatStream('chat', { messages: MESSAGES })
  let text = ''
  let done = null
  for await (const c of stream) {
    if (c.kind === 'delta') text += c.content
    if (c.kind === 'done') done = c
  }
  return { text, done }
}

for (const [label, make] of [
  ['sync', () => inhouse],
  ['async', () => new AsyncInHouse()],
]) {
  test(`a host adapter in JS (${label} methods) answers, streams, and fails over to gemini on a 503`, async () => {
    const prefix = await providers({ house: { reset: true, content: 'from the house model' }, gem: { reset: true, content: 'from gemini' } })
    const client = houseClient(prefix)
    try {
      // Not registered yet: the provider is refused (nothing is sent to it), the route fails over.
      let r = await client.chat('chat', { messages: MESSAGES })
      assert.equal(r.provider, 'gem')
      assert.equal((await providerLog(prefix, 'house')).count, 0)

      const adapter = make()
      client.registerAdapter('inhouse', adapter)
      r = await client.chat('chat', { messages: MESSAGES })
      assert.equal(r.provider, 'house')
      assert.equal(r.content, 'from the house model')
      assert.equal(r.finishReason, 'stop')
      assert.ok(r.usage !== null && r.usage.promptTokens > 0 && r.usage.completionTokens > 0, util.inspect(r.usage))
      assert.equal(r.usage.totalTokens, r.usage.promptTokens + r.usage.completionTokens)
      assert.equal(typeof r.cost, 'number')
      const sent = (await providerLog(prefix, 'house')).requests[0]
      assert.equal(sent.path, `/llm/${prefix}-house/inhouse/generate`)
      assert.equal(sent.format, 'inhouse')
      assert.equal(sent.body.prompt, 'Be brief.\nhi')
      assert.equal(sent.body.stream, false)

      // Streamed through the adapter's parseStreamEvent.
      const { text, done } = await streamedText(client)
      assert.equal(text, 'from the house model')
      assert.equal(done.finishReason, 'stop')
      assert.equal((await providerLog(prefix, 'house')).requests.at(-1).body.stream, true)
      if (adapter instanceof AsyncInHouse) {
        for (const step of ['buildRequest', 'parseResponse', 'parseStreamEvent']) assert.ok(adapter.steps.includes(step), step)
      }

      // The in-house server is busy: the adapter gives its error a code, and gemini answers.
      await setProvider(prefix, 'house', { reset: true, fail_rate: 1.0, fail_status: 503 })
      r = await client.chat('chat', { messages: MESSAGES })
      assert.equal(r.provider, 'gem')
      assert.equal(r.content, 'from gemini')
      assert.ok((await providerLog(prefix, 'house')).count >= 1, 'house was tried first')
      noSecret([util.inspect(r, { depth: 5 }), JSON.stringify(r)])
    } finally {
      client.close()
    }
  })
}

test('an adapter method that throws or rejects is an error naming the adapter and the step; the route fails over', async () => {
  const prefix = await providers({ house: { reset: true }, gem: { reset: true, content: 'from gemini' } })
  const client = houseClient(prefix)
  try {
    client.registerAdapter('inhouse', {
      ...inhouse,
      buildRequest() {
        throw new TypeError('the adapter is broken')
      },
    })
    const r = await client.chat('chat', { messages: MESSAGES })
    assert.equal(r.provider, 'gem')
    assert.equal((await providerLog(prefix, 'house')).count, 0, 'nothing was sent to house')

    // With gemini failing too, the route's error names what the adapter raised.
    await setProvider(prefix, 'gem', { reset: true, fail_rate: 1.0, fail_status: 503 })
    let e = await client.chat('chat', { messages: MESSAGES }).catch((e) => e)
    assert.ok(e instanceof NoHealthyProviderError, `${e}`)
    assert.ok(e.message.includes('adapter `inhouse` raised in build_request: TypeError: the adapter is broken'), e.message)
    const house = e.providerErrors.find((p) => p.provider === 'house')
    assert.ok(house !== undefined && house.error.includes('raised in build_request'), util.inspect(e.providerErrors))
    noSecret([e.message, String(e), util.inspect(e, { depth: 5 }), e.stack, JSON.stringify(e)])

    // An async method that rejects (with something that is not an Error) and one in parse_response.
    client.registerAdapter('inhouse', {
      ...inhouse,
      async buildRequest() {
        throw 'no route to the model' // eslint-disable-line no-throw-literal
      },
    })
    e = await client.chat('chat', { messages: MESSAGES }).catch((e) => e)
    assert.ok(e.message.includes('adapter `inhouse` raised in build_request: Error: no route to the model'), e.message)
    client.registerAdapter('inhouse', {
      ...inhouse,
      parseResponse: async () => Promise.reject(new RangeError('cannot read it')),
    })
    e = await client.chat('chat', { messages: MESSAGES }).catch((e) => e)
    assert.ok(e.message.includes('adapter `inhouse` raised in parse_response: RangeError: cannot read it'), e.message)
    // A result that is not JSON (a BigInt) is named too, never a crash.
    client.registerAdapter('inhouse', { ...inhouse, buildRequest: () => ({ path: '/inhouse/generate', body: { n: 1n } }) })
    e = await client.chat('chat', { messages: MESSAGES }).catch((e) => e)
    assert.ok(e.message.includes('adapter `inhouse` raised in build_request: TypeError'), e.message)
    await sleep(10)
    assert.deepEqual(unhandled, [], 'no unhandled rejection')
  } finally {
    client.close()
  }
})

test('registerAdapter refuses built-in names, bad names and adapters missing a method (ConfigError naming it)', async () => {
  const prefix = await providers({ house: { reset: true }, gem: { reset: true } })
  const client = houseClient(prefix)
  try {
    assert.throws(() => client.registerAdapter('anthropic', inhouse), (e) => e instanceof ConfigError && e.message.startsWith('name:'))
    assert.throws(() => client.registerAdapter('openai-compatible', inhouse), ConfigError)
    assert.throws(() => client.registerAdapter('in house', inhouse), (e) => e instanceof ConfigError && e.message.startsWith('name:'))
    assert.throws(() => client.registerAdapter(7, inhouse), (e) => e instanceof ConfigError && e.message.includes('name'))
    assert.throws(() => client.registerAdapter('inhouse', null), ConfigError)
    const { parseStreamEvent, ...partial } = inhouse
    void parseStreamEvent
    assert.throws(
      () => client.registerAdapter('inhouse', partial),
      (e) => e instanceof ConfigError && e.message.includes('parseStreamEvent') && e.message.includes('expected a function'),
    )
    assert.throws(() => client.registerAdapter('inhouse', { ...inhouse, buildRequest: 'x' }), (e) => e instanceof ConfigError && e.message.includes('buildRequest'))
    // None of these registered anything: house is still refused.
    const r = await client.chat('chat', { messages: MESSAGES })
    assert.equal(r.provider, 'gem')
  } finally {
    client.close()
  }
})

test('a registered adapter does not keep the process alive', () => {
  const pkg = path.resolve(__dirname, '..')
  const script = `
    const { Client } = require(${JSON.stringify(pkg)})
    const client = new Client({ log: { enabled: false }, services: { a: { base_url: 'http://127.0.0.1:9' } } })
    client.registerAdapter('inhouse', { buildRequest() {}, parseResponse() {}, parseStreamEvent() {} })
    console.log('registered')
  `
  const out = execFileSync(process.execPath, ['-e', script], { timeout: 20000, encoding: 'utf8' })
  assert.equal(out.trim(), 'registered')
})

// ---------------------------------------------------------------- types

test('the type declarations cover embed and registerAdapter (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'adapters-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
