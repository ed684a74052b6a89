'use strict'
// Runs every shared scenario vector (tests/vectors/scenarios.json) through the Node API
// (a scenario's `interceptors` through `client.use`).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')
const util = require('node:util')

const { Client, HarnessError, Reject } = require('..')
const { startUpstream, repoRoot } = require('./upstream')

const { scenarios } = JSON.parse(fs.readFileSync(path.join(repoRoot, 'tests', 'vectors', 'scenarios.json'), 'utf8'))

let upstream
before(async () => {
  upstream = await startUpstream()
})
after(async () => {
  await upstream.stop()
})

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function deepMerge(a, b) {
  if (!isObject(a) || !isObject(b)) return b
  const out = { ...a }
  for (const [k, v] of Object.entries(b)) out[k] = k in a ? deepMerge(a[k], v) : v
  return out
}

function substitute(v, name) {
  if (typeof v === 'string') {
    return v
      .replaceAll('{token_url}', '{upstream}/s/{name}-token/oauth/token')
      .replaceAll('{llm}', '{upstream}/llm/{name}-')
      .replaceAll('{name}', name ?? '{name}')
      .replaceAll('{upstream}', `http://${upstream.addr}`)
      .replaceAll('{blackhole}', `http://${upstream.blackhole}`)
      .replaceAll('{closed}', `http://${upstream.closed}`)
      .replaceAll('{vectors}', path.join(repoRoot, 'tests', 'vectors'))
  }
  if (Array.isArray(v)) return v.map((x) => substitute(x, name))
  if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, name)]))
  return v
}

const BASE = { client: { name: 'vectors' }, log: { enabled: false }, services: { svc: { base_url: '{upstream}' } } }

// N nested arrays around 0, built without recursion.
function nestedArrays(n) {
  let v = 0
  for (let i = 0; i < n; i++) v = [v]
  return v
}

// The core's message: err.message is followed by the call's context, ` (service=..., trace_id=...)`,
// which the core writes from the error's own fields (the Rust runner measures the message alone).
function coreMessage(e) {
  const ctx = []
  if (e.service !== undefined) ctx.push(`service=${e.service}`)
  if (e.method !== undefined && e.endpoint !== undefined) ctx.push(`endpoint=${e.method} ${e.endpoint}`)
  if (e.status !== undefined) ctx.push(`status=${e.status}`)
  if (e.attempts > 0) ctx.push(`attempts=${e.attempts}`)
  if (e.traceId !== undefined) ctx.push(`trace_id=${e.traceId}`)
  const suffix = ctx.length > 0 ? ` (${ctx.join(', ')})` : ''
  return suffix !== '' && e.message.endsWith(suffix) ? e.message.slice(0, -suffix.length) : e.message
}

// One call: resolves to { response } or { error } and the wall time.
async function runOne(client, scenario, call) {
  if ('chat' in call) return runChat(client, call)
  const opts = {
    service: call.route ?? call.service ?? 'svc',
    method: call.method,
    // A call naming a route sends its path as is (the route's providers are not scripts).
    path: 'route' in call ? call.path : `/s/${scenario.name}${call.path}`,
    endpoint: call.endpoint,
    headers: call.headers,
    idempotencyKey: call.idempotency_key,
    timeoutMs: call.timeout_ms,
    traceparent: call.traceparent,
  }
  if ('json' in call) opts.json = call.json
  if ('json_depth' in call) opts.json = nestedArrays(call.json_depth)
  if ('body' in call) opts.body = call.body
  let timer
  if (call.cancel_after_ms !== undefined) {
    const ac = new AbortController()
    opts.signal = ac.signal
    timer = setTimeout(() => ac.abort(), call.cancel_after_ms)
  }
  const t0 = performance.now()
  try {
    const response = call.stream ? await readStream(client, opts, call.read_chunks) : await client.request(opts)
    return { response, ms: performance.now() - t0 }
  } catch (error) {
    assert.ok(error instanceof HarnessError, `not a HarnessError: ${error && error.stack}`)
    return { error, ms: performance.now() - t0 }
  } finally {
    clearTimeout(timer)
  }
}

// A chat call on a route (`client.chat(route, { messages, ...params })`), or with `stream` a
// chat stream read to its end, folded into one object: the content after the last `restart`,
// the chunk kinds (runs of `delta` or `tool_call` collapsed) and the `done` chunk's fields.
async function runChat(client, call) {
  const request = { messages: call.chat.messages, ...(call.chat.params || {}) }
  const t0 = performance.now()
  try {
    let response
    if (!call.stream) {
      response = await client.chat(call.route, request)
    } else {
      const stream = await client.chatStream(call.route, request)
      const kinds = []
      let content = ''
      let done = null
      for await (const chunk of stream) {
        if (!((chunk.kind === 'delta' || chunk.kind === 'tool_call') && kinds.at(-1) === chunk.kind)) kinds.push(chunk.kind)
        if (chunk.kind === 'restart') content = ''
        else if (chunk.kind === 'delta') content += chunk.content
        else if (chunk.kind === 'done') done = chunk
      }
      assert.ok(done !== null, 'a chat stream ends with a done chunk')
      response = {
        content,
        chunkKinds: kinds,
        provider: done.provider,
        model: done.model,
        finishReason: done.finishReason,
        toolCalls: done.toolCalls,
        usage: done.usage,
        cost: done.cost,
        traceId: stream.traceId,
      }
    }
    return { response, ms: performance.now() - t0 }
  } catch (error) {
    assert.ok(error instanceof HarnessError, `not a HarnessError: ${error && error.stack}`)
    return { error, ms: performance.now() - t0 }
  }
}

const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

// A `routing_state` call: each given field of each given provider (snake_case in the vector).
function checkRoutingState(client, scenario, call, i) {
  const where = `${scenario.name} call ${i} (routing_state)`
  const state = client.routingState(call.routing_state)
  assert.equal(state.route, call.routing_state, `${where}: route`)
  for (const [id, want] of Object.entries((call.expect || {}).providers || {})) {
    const p = state.providers.find((x) => x.id === id)
    assert.ok(p, `${where}: no provider ${id} in ${JSON.stringify(state)}`)
    for (const [k, v] of Object.entries(want)) {
      if (k === 'last_error_contains') {
        assert.ok(typeof p.lastError === 'string' && p.lastError.includes(v), `${where}: ${id}.lastError ${JSON.stringify(p.lastError)} lacks ${JSON.stringify(v)}`)
      } else {
        assert.deepEqual(p[camel(k)], v, `${where}: ${id}.${camel(k)}`)
      }
    }
  }
}

// A `set_weight` call: `{}` (it must succeed and give a new version) or an error.
function checkSetWeight(client, scenario, call, i) {
  const where = `${scenario.name} call ${i} (set_weight)`
  const ex = call.expect || {}
  const versionBefore = client.configVersion
  let version, error
  try {
    version = client.setWeight(...call.set_weight)
  } catch (e) {
    error = e
  }
  if (!('error' in ex)) {
    assert.ok(error === undefined, `${where}: expected success, got ${error && `${error.name}: ${error.message}`}`)
    assert.equal(client.configVersion, version, `${where}: the returned version is in force`)
    return
  }
  assert.ok(error instanceof HarnessError, `${where}: expected ${ex.error}, got ${error === undefined ? 'success' : error}`)
  assert.equal(error.name, ex.error, `${where}: ${error.message}`)
  if ('message' in ex) assert.ok(error.message.includes(ex.message), `${where}: ${JSON.stringify(ex.message)} not in ${error.message}`)
  assert.equal(client.configVersion, versionBefore, `${where}: the old config stays`)
}

// The expect keys of routed calls (on a ChatResponse, a chat stream's fold, a routed Response or an error).
function checkRouted(ex, where, response, error, desc) {
  const r = response
  if ('provider' in ex) assert.equal(r ? r.provider : undefined, ex.provider, `${where}: provider (${desc})`)
  if ('model' in ex) assert.equal(r ? r.model : undefined, ex.model, `${where}: model (${desc})`)
  if ('content' in ex) assert.equal(r ? r.content : undefined, ex.content, `${where}: content (${desc})`)
  if ('fallback' in ex) assert.equal(r ? r.fallback : undefined, ex.fallback, `${where}: fallback (${desc})`)
  if ('finish_reason' in ex) assert.equal(r ? r.finishReason : undefined, ex.finish_reason, `${where}: finishReason (${desc})`)
  if ('tool_calls' in ex) assert.deepEqual(r ? r.toolCalls : undefined, ex.tool_calls, `${where}: toolCalls (${desc})`)
  if ('usage' in ex) {
    assert.ok(r && r.usage, `${where}: expected usage, got ${r ? r.usage : desc}`)
    for (const [k, v] of Object.entries(ex.usage)) assert.equal(r.usage[camel(k)], v, `${where}: usage.${camel(k)}`)
  }
  if ('cost' in ex) {
    assert.ok(r && typeof r.cost === 'number', `${where}: expected cost ${ex.cost}, got ${r ? r.cost : desc}`)
    assert.ok(Math.abs(r.cost - ex.cost) <= 1e-9, `${where}: cost ${r.cost} != ${ex.cost}`)
  }
  if ('attempts_by_provider' in ex) assert.deepEqual(r ? r.attemptsByProvider : undefined, ex.attempts_by_provider, `${where}: attemptsByProvider (${desc})`)
  if ('chunk_kinds' in ex) assert.deepEqual(r ? r.chunkKinds : undefined, ex.chunk_kinds, `${where}: chunk kinds (${desc})`)
  if ('provider_errors' in ex) {
    assert.ok(error, `${where}: expected an error with providerErrors, got ${desc}`)
    assert.deepEqual(error.providerErrors.map((p) => p.provider), ex.provider_errors, `${where}: providerErrors ${JSON.stringify(error.providerErrors)}`)
    for (const p of error.providerErrors) assert.equal(typeof p.error, 'string', `${where}: providerErrors[].error`)
  }
  if ('error_provider' in ex) assert.equal(error && error.provider, ex.error_provider, `${where}: error provider (${desc})`)
}

// `from_cache` and `cache` (the stamp's outcome, or null) on a Response or a ChatResponse.
function checkCache(ex, where, response, desc) {
  if (!('from_cache' in ex) && !('cache' in ex)) return
  assert.ok(response, `${where}: expected from_cache/cache, got ${desc}`)
  if ('from_cache' in ex) assert.equal(response.fromCache, ex.from_cache, `${where}: fromCache (cache ${JSON.stringify(response.cache)})`)
  if ('cache' in ex) assert.equal(response.cache === null ? null : response.cache.outcome, ex.cache, `${where}: cache.outcome`)
}

// A streamed call: the body read chunk by chunk (to its end, or `readChunks` chunks and then a
// break out of the loop), folded into one object so the same checks apply.
async function readStream(client, opts, readChunks) {
  const r = await client.stream(opts)
  const chunks = []
  for await (const chunk of r.body) {
    assert.ok(Buffer.isBuffer(chunk), 'a chunk is a Buffer')
    chunks.push(chunk)
    if (readChunks !== undefined && chunks.length >= readChunks) break
  }
  return { status: r.status, headers: r.headers, attempts: r.attempts, traceId: r.traceId, body: Buffer.concat(chunks) }
}

// A `reload` call: base deep-merged with the object (not with the scenario's config).
function runReload(client, scenario, call) {
  const versionBefore = client.configVersion
  try {
    const version = client.reload(substitute(deepMerge(BASE, call.reload), scenario.name))
    assert.equal(client.configVersion, version)
    return { response: { version }, versionBefore }
  } catch (error) {
    assert.ok(error instanceof HarnessError, `not a HarnessError: ${error && error.stack}`)
    return { error, versionBefore }
  }
}

function checkReload(client, scenario, call, i, { response, error, versionBefore }) {
  const ex = call.expect || {}
  const where = `${scenario.name} call ${i} (reload)`
  if (!('error' in ex)) {
    assert.ok(response, `${where}: expected the reload to succeed, got ${error && `${error.name}: ${error.message}`}`)
    return
  }
  assert.ok(error, `${where}: expected ${ex.error}, the reload succeeded`)
  assert.equal(error.name, ex.error, `${where}: ${error.message}`)
  assert.equal(error.code, ex.error, `${where}: err.code`)
  if ('message' in ex) assert.ok(error.message.includes(ex.message), `${where}: ${JSON.stringify(ex.message)} not in ${error.message}`)
  assert.equal(client.configVersion, versionBefore, `${where}: the old config stays`)
}

// Permits are freed as the calls end; poll a little in case one is released asynchronously.
async function settleBulkhead(client, call) {
  const ex = call.expect || {}
  if (!('bulkhead_in_use' in ex)) return
  const service = call.service ?? 'svc'
  const until = performance.now() + 1000
  while (client.bulkheadInUse(service) !== ex.bulkhead_in_use && performance.now() < until) await sleep(10)
}

function check(client, scenario, call, i, results) {
  const ex = call.expect || {}
  const where = `${scenario.name} call ${i}`
  const service = call.service ?? 'svc'
  if (call.parallel === undefined) {
    const [{ response, error, ms }] = results
    const desc = error ? `${error.name}: ${error.message}` : response.status !== undefined ? `status ${response.status}` : `answer ${JSON.stringify(response.content)} from ${response.provider}`
    if ('status' in ex) {
      assert.ok(response, `${where}: expected status ${ex.status}, got ${desc}`)
      assert.equal(response.status, ex.status, `${where}: status`)
    }
    if ('error' in ex) {
      assert.ok(error, `${where}: expected ${ex.error}, got ${desc}`)
      assert.equal(error.name, ex.error, `${where}: error kind (${desc})`)
      assert.equal(error.code, ex.error, `${where}: err.code`)
    }
    if ('phase' in ex) assert.equal(error && error.phase, ex.phase, `${where}: phase (${desc})`)
    if ('error_status' in ex) assert.equal(error && error.status, ex.error_status, `${where}: error status (${desc})`)
    if ('code' in ex) assert.equal(error && error.errorCode, ex.code, `${where}: errorCode (${desc})`)
    if ('message' in ex) assert.ok(error && error.message.includes(ex.message), `${where}: message ${JSON.stringify(ex.message)} in (${desc})`)
    if ('message_excludes' in ex) {
      const x = ex.message_excludes
      assert.ok(error, `${where}: expected an error, got ${desc}`)
      const shown = [['message', error.message], ['String(err)', String(error)]]
      // inspect lays an error out on several lines (stack, fields) itself: a line break is only looked for above.
      if (!x.includes('\n')) shown.push(['inspect(err)', util.inspect(error)])
      for (const [how, text] of shown) {
        assert.ok(!text.includes(x), `${where}: ${how} shows ${JSON.stringify(x)}: ${JSON.stringify(text)}`)
      }
    }
    if ('message_max_chars' in ex) {
      const n = error ? [...coreMessage(error)].length : Infinity
      assert.ok(n <= ex.message_max_chars, `${where}: message of ${n} characters > ${ex.message_max_chars} (${desc})`)
    }
    if ('error_body_len' in ex) assert.equal(error && error.body && error.body.length, ex.error_body_len, `${where}: error body length (${desc})`)
    for (const [k, want] of Object.entries(ex.headers || {})) {
      assert.deepEqual(response ? response.headers.getAll(k) : [], want, `${where}: response header ${k} (${desc})`)
    }
    if ('body' in ex) assert.equal(response ? response.body.toString('utf8') : undefined, ex.body, `${where}: body (${desc})`)
    if ('retry_after_ms' in ex) assert.equal(error && error.retryAfterMs, ex.retry_after_ms, `${where}: retryAfterMs (${desc})`)
    if ('attempts' in ex) assert.equal((response || error).attempts, ex.attempts, `${where}: attempts (${desc})`)
    if ('trace_id' in ex) assert.equal((response || error).traceId, ex.trace_id, `${where}: traceId`)
    if ('min_ms' in ex) assert.ok(ms >= ex.min_ms, `${where}: took ${ms.toFixed(1)} ms < min ${ex.min_ms} (${desc})`)
    if ('max_ms' in ex) assert.ok(ms <= ex.max_ms, `${where}: took ${ms.toFixed(1)} ms > max ${ex.max_ms} (${desc})`)
    checkRouted(ex, where, response, error, desc)
    if (!call.stream) checkCache(ex, where, response, desc)
  } else {
    const counts = {}
    for (const r of results) {
      const k = r.error ? r.error.name : String(r.response.status)
      counts[k] = (counts[k] || 0) + 1
    }
    if ('outcomes' in ex) assert.deepEqual(counts, ex.outcomes, `${where}: outcomes`)
    for (const r of results) {
      if ('min_ms' in ex) assert.ok(r.ms >= ex.min_ms, `${where}: took ${r.ms.toFixed(1)} ms < min ${ex.min_ms}`)
      if ('max_ms' in ex) assert.ok(r.ms <= ex.max_ms, `${where}: took ${r.ms.toFixed(1)} ms > max ${ex.max_ms}`)
    }
  }
  if ('breaker' in ex) {
    const state = client.breakerState(service, call.method, `/s/${scenario.name}${call.path}`, call.endpoint)
    assert.equal(state, ex.breaker, `${where}: breaker`)
  }
  if ('bulkhead_in_use' in ex) assert.equal(client.bulkheadInUse(service), ex.bulkhead_in_use, `${where}: bulkhead in use`)
  if ('rate_limit' in ex) {
    const every = client.rateLimits()
    const got = every.find((s) => s.service === service) || {}
    for (const [k, want] of Object.entries(ex.rate_limit)) {
      const value = k === 'paused' ? got.pausedMs > 0 : got[k]
      assert.equal(value, want, `${where}: rate limit ${k} (of ${JSON.stringify(every)})`)
    }
  }
}

// `upstream` against the scenario's script log, `token_upstream` against its `{name}-token` script,
// `provider_upstream` against each simulated provider's log.
async function checkUpstream(scenario) {
  if (scenario.upstream) await checkLog(scenario.name, scenario.upstream)
  if (scenario.token_upstream) await checkLog(`${scenario.name}-token`, scenario.token_upstream)
  for (const [id, want] of Object.entries(scenario.provider_upstream || {})) await checkProviderLog(`${scenario.name}-${id}`, want)
}

async function checkProviderLog(pname, want) {
  const log = await upstream.admin('GET', `/__admin/provider-log/${pname}`)
  const where = `provider ${pname}`
  if ('requests' in want) assert.equal(log.count, want.requests, `${where}: request count`)
  if ('first_body' in want) {
    assert.ok(log.requests.length > 0, `${where}: no request`)
    const body = log.requests[0].body
    for (const [k, v] of Object.entries(want.first_body)) assert.deepEqual(body[k], v, `${where}: first body's ${k} (${JSON.stringify(body)})`)
  }
  if ('first_last_message' in want) {
    assert.ok(log.requests.length > 0, `${where}: no request`)
    assert.deepEqual(log.requests[0].body.messages.at(-1), want.first_last_message, `${where}: the first request's last message`)
  }
}

async function checkLog(script, up) {
  const { requests } = await upstream.admin('GET', `/__admin/log/${script}`)
  const where = `${script} upstream`
  if ('requests' in up) assert.equal(requests.length, up.requests, `${where}: request count`)
  if ('methods' in up) assert.deepEqual(requests.map((r) => r.method), up.methods, `${where}: methods`)
  for (const r of requests) {
    for (const name of up.headers_present || []) assert.ok(name in r.headers, `${where}: header ${name} missing`)
    for (const name of up.header_absent || []) assert.ok(!(name in r.headers), `${where}: header ${name} present`)
    for (const [k, v] of Object.entries(up.header_equals || {})) assert.equal(r.headers[k], v, `${where}: header ${k}`)
    for (const [k, want] of Object.entries(up.header_values || {})) {
      const got = r.header_list.filter(([name]) => name === k).map(([, value]) => value)
      assert.deepEqual(got, want, `${where}: values of header ${k}`)
    }
    for (const [k, v] of Object.entries(up.header_prefix || {})) {
      assert.ok(typeof r.headers[k] === 'string' && r.headers[k].startsWith(v), `${where}: header ${k}=${r.headers[k]} lacks prefix ${v}`)
    }
  }
  if ('bodies' in up) assert.deepEqual(requests.map((r) => r.body), up.bodies, `${where}: bodies`)
  for (const [k, want] of Object.entries(up.header_sequence || {})) {
    assert.deepEqual(requests.map((r) => r.headers[k] ?? null), want, `${where}: header ${k} by request`)
  }
  if ('min_gap_ms' in up) {
    for (let i = 1; i < requests.length; i++) {
      const gap = requests[i].at_ms - requests[i - 1].at_ms
      assert.ok(gap >= up.min_gap_ms, `${where}: gap ${gap.toFixed(1)} ms < ${up.min_gap_ms}`)
    }
  }
}

const known = new Set(['method', 'path', 'service', 'endpoint', 'headers', 'json', 'json_depth', 'body', 'idempotency_key', 'timeout_ms', 'traceparent', 'wait_ms', 'parallel', 'background', 'cancel_after_ms', 'stream', 'read_chunks', 'reload', 'expect', 'route', 'chat', 'routing_state', 'set_weight'])

// A scenario whose config must be refused: the ConfigError names `config_error` and never shows `config_error_excludes`.
function checkConfigError(scenario, config) {
  let error
  try {
    new Client(config).close()
  } catch (e) {
    error = e
  }
  const where = `${scenario.name} config`
  assert.ok(error, `${where}: expected a ConfigError containing ${JSON.stringify(scenario.config_error)}, the client was built`)
  assert.equal(error.name, 'ConfigError', `${where}: ${error}`)
  assert.ok(error.message.includes(scenario.config_error), `${where}: ${JSON.stringify(scenario.config_error)} not in ${error.message}`)
  const x = scenario.config_error_excludes
  if (x !== undefined) {
    for (const text of [error.message, String(error), util.inspect(error)]) assert.ok(!text.includes(x), `${where}: shows ${JSON.stringify(x)}: ${text}`)
  }
}

// Whether `have` holds every field of `want` (objects compared field by field, the rest equal).
function containsJson(have, want) {
  if (isObject(have) && isObject(want)) return Object.entries(want).every(([k, v]) => k in have && containsJson(have[k], v))
  return util.isDeepStrictEqual(have, want)
}

// A scenario's declarative interceptor (tests/README.md, "Interceptor scenarios") as `client.use`
// takes it: a `before` that sleeps is async (an unref'd timer: a late one never holds the run).
function vectorInterceptor(spec) {
  const out = { name: spec.name, level: spec.level, services: spec.services, wantBody: spec.want_body ?? false }
  const b = spec.before
  if (b) {
    const changes = (r) => {
      if (b.raise !== undefined) throw new Error(b.raise)
      const c = {}
      const headers = { ...(b.headers || {}) }
      if (b.attempt_header !== undefined) headers[b.attempt_header] = r.attempt === null ? 'none' : String(r.attempt)
      if (Object.keys(headers).length > 0) c.headers = headers
      if ('query' in b) c.query = b.query
      if ('path' in b) c.path = b.path
      if (b.json_set !== undefined) c.json = { ...(isObject(r.json) ? r.json : {}), ...b.json_set }
      return Object.keys(c).length > 0 ? c : undefined
    }
    out.before = b.sleep_ms === undefined ? changes : async (r) => {
      await sleep(b.sleep_ms, undefined, { ref: false })
      return changes(r)
    }
  }
  const a = spec.after
  if (a) {
    out.after = (r) => {
      if (a.raise !== undefined) throw new Error(a.raise)
      if (a.reject_when_json !== undefined && containsJson(r.json, a.reject_when_json)) {
        throw new Reject('rejected by the vector', { retryable: a.retryable ?? false, code: a.code ?? undefined })
      }
    }
  }
  return out
}

test('the vector file has scenarios', () => {
  assert.ok(scenarios.length > 0)
})

for (const scenario of scenarios) {
  test(scenario.name, async () => {
    await upstream.admin('PUT', `/__admin/script/${scenario.name}`, { steps: scenario.steps })
    if (scenario.token_steps) await upstream.admin('PUT', `/__admin/script/${scenario.name}-token`, { steps: scenario.token_steps })
    for (const [id, spec] of Object.entries(scenario.providers || {})) await upstream.admin('POST', `/__admin/provider/${scenario.name}-${id}`, spec)
    const config = substitute(deepMerge(BASE, scenario.config || {}), scenario.name)
    if ('config_error' in scenario) return checkConfigError(scenario, config)
    const client = new Client(config)
    try {
      for (const spec of scenario.interceptors || []) client.use(vectorInterceptor(spec))
      const background = []
      for (const [i, call] of scenario.calls.entries()) {
        for (const k of Object.keys(call)) assert.ok(known.has(k), `${scenario.name}: unknown call key ${k}`)
        if (call.wait_ms) await sleep(call.wait_ms)
        if ('reload' in call) {
          checkReload(client, scenario, call, i, runReload(client, scenario, call))
          continue
        }
        if ('routing_state' in call) {
          checkRoutingState(client, scenario, call, i)
          continue
        }
        if ('set_weight' in call) {
          checkSetWeight(client, scenario, call, i)
          continue
        }
        const n = call.parallel ?? 1
        const run = Promise.all(Array.from({ length: n }, () => runOne(client, scenario, call)))
        if (call.background) {
          background.push(run.then(async (results) => {
            await settleBulkhead(client, call)
            return () => check(client, scenario, call, i, results)
          }))
          continue
        }
        const results = await run
        await settleBulkhead(client, call)
        check(client, scenario, call, i, results)
      }
      for (const checkLater of await Promise.all(background)) checkLater()
      await checkUpstream(scenario)
    } finally {
      client.close()
    }
  })
}
