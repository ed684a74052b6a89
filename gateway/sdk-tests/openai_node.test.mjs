// The official OpenAI Node SDK pointed at `harness serve`: chat, streaming, a failover
// mid-stream, errors in the OpenAI shape, and the model list.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import OpenAI from 'openai'
import { startWorld } from './world.mjs'

const MESSAGES = [{ role: 'user', content: 'Say hello' }]
let world

before(async () => { world = await startWorld() })
after(async () => { await world?.stop() })

const client = (key = world.keys.ann, opts = {}) => new OpenAI({ baseURL: world.baseURL, apiKey: key, timeout: 30_000, ...opts })

async function collect (stream) {
  const chunks = []
  for await (const c of stream) chunks.push(c)
  return { chunks, text: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('') }
}

test('a chat completion has content, model and usage', async () => {
  const r = await client().chat.completions.create({ model: 'chat', messages: MESSAGES })
  assert.equal(r.object, 'chat.completion')
  assert.equal(r.choices[0].message.content, world.providers['chat-a'].content)
  assert.equal(r.choices[0].finish_reason, 'stop')
  assert.equal(r.model, 'model-a')
  assert.deepEqual([r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens], [12, 8, 20])
})

test('route/model pins the model', async () => {
  const r = await client().chat.completions.create({ model: 'chat/model-b', messages: MESSAGES })
  assert.equal(r.choices[0].message.content, world.providers['chat-b'].content)
  assert.equal(r.model, 'model-b')
})

test("streamed deltas join to the provider's answer", async () => {
  const { chunks, text } = await collect(await client().chat.completions.create({ model: 'chat', messages: MESSAGES, stream: true }))
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'))
  assert.equal(text, world.providers['chat-a'].content)
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop')
})

test('a stream cut mid-answer fails over unseen', async () => {
  const cutBefore = (await world.providerLog('relay-a')).count
  // `mid_stream: hold` (the route's default) restarts on provider b before the caller sees a chunk.
  const { chunks, text } = await collect(await client().chat.completions.create({ model: 'relay', messages: MESSAGES, stream: true }))
  assert.ok(chunks.every((c) => c.harness === undefined), 'no restart chunk reached the caller')
  assert.equal(text, world.providers['relay-b'].content)
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop')
  assert.ok((await world.providerLog('relay-a')).count > cutBefore, 'provider a was tried first and cut its stream')
})

test('a wrong key is an AuthenticationError', async () => {
  const e = await client('sk-wrong').chat.completions.create({ model: 'chat', messages: MESSAGES }).then(() => null, (e) => e)
  assert.ok(e instanceof OpenAI.AuthenticationError, String(e))
  assert.equal(e.status, 401)
  assert.equal(e.code, 'invalid_api_key')
  assert.equal(e.type, 'invalid_request_error')
})

test('every provider failing is a 503 with the harness kind', async () => {
  const e = await client(undefined, { maxRetries: 0 }).chat.completions.create({ model: 'down', messages: MESSAGES }).then(() => null, (e) => e)
  assert.ok(e instanceof OpenAI.InternalServerError, String(e))
  assert.equal(e.status, 503)
  assert.equal(e.error.harness_kind, 'NoHealthyProviderError')
  assert.equal(e.type, 'service_unavailable_error')
  assert.equal(e.error.trace_id.length, 32)
})

test('a rate-limited caller gets a RateLimitError', async () => {
  const rita = client(world.keys.rita, { maxRetries: 0 })
  assert.ok((await rita.chat.completions.create({ model: 'chat', messages: MESSAGES })).choices[0].message.content)
  const e = await rita.chat.completions.create({ model: 'chat', messages: MESSAGES }).then(() => null, (e) => e)
  assert.ok(e instanceof OpenAI.RateLimitError, String(e))
  assert.equal(e.status, 429)
  assert.equal(e.error.harness_kind, 'RateLimitedError')
  assert.ok(e.headers.get('retry-after'))
})

test("models.list() lists the caller's routes and models", async () => {
  const ids = async (key) => { const out = []; for await (const m of client(key).models.list()) out.push(m.id); return out }
  assert.deepEqual(await ids(world.keys.ann), ['chat', 'chat/model-a', 'chat/model-b', 'down', 'down/down-model-a', 'down/down-model-b',
    'emb', 'emb/embed-1', 'gem', 'gem/gemini-x',
    'relay', 'relay/relay-model-a', 'relay/relay-model-b', 'tools', 'tools/tools-model'])
  assert.deepEqual(await ids(world.keys.rita), ['chat', 'chat/model-a', 'chat/model-b'])
})
