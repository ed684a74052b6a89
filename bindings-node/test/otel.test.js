'use strict'
// The host's active OpenTelemetry span is Harness's parent: with a real SDK tracer provider and
// an AsyncLocalStorage context manager, a call made inside a span carries that span's trace
// downstream (a child span id), for plain requests, errors, streams and chat calls; outside any
// span the trace is fresh; an explicit traceparent (option or header) wins; and without
// `@opentelemetry/api` installed the module loads and calls go out as before.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')
const { promisify } = require('node:util')

const { trace, context, TraceFlags } = require('@opentelemetry/api')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')

const { Client, HttpStatusError } = require('..')
const { startUpstream } = require('./upstream')

let upstream
let provider
let tracer
before(async () => {
  upstream = await startUpstream()
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] })
  trace.setGlobalTracerProvider(provider)
  tracer = trace.getTracer('harness-node-tests')
})
after(async () => {
  trace.disable()
  context.disable()
  await provider.shutdown()
  await upstream.stop()
})

function config(svc = {}) {
  return {
    client: { name: 'node-otel' },
    log: { enabled: false },
    services: { svc: { base_url: upstream.base, retry: { max_retries: 0 }, ...svc } },
  }
}

async function script(name, steps) {
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
}

// The traceparent each request to script `name` carried, parsed.
async function sentTraceparents(name) {
  const { requests } = await upstream.admin('GET', `/__admin/log/${name}`)
  return requests.map((r) => {
    const tp = r.headers.traceparent
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(tp)
    assert.ok(m, `a W3C traceparent, got ${tp}`)
    return { traceId: m[1], spanId: m[2], flags: m[3] }
  })
}

// Runs `fn(span)` inside a new active span, ending it after.
function inSpan(name, fn) {
  return tracer.startActiveSpan(name, async (span) => {
    try {
      return await fn(span)
    } finally {
      span.end()
    }
  })
}

test('a request inside an active span continues its trace, with a child span id', async () => {
  await script('otel-req', [{ status: 200, json: { ok: true } }])
  const client = new Client(config())
  try {
    const host = await inSpan('host', async (span) => {
      const r1 = await client.get('svc', '/s/otel-req/a')
      // Still the span's context after an await (AsyncLocalStorage carries it).
      const r2 = await client.post('svc', '/s/otel-req/b', { json: { n: 1 } })
      return { sc: span.spanContext(), traceIds: [r1.traceId, r2.traceId] }
    })
    assert.equal(host.sc.traceFlags & TraceFlags.SAMPLED, TraceFlags.SAMPLED)
    assert.deepEqual(host.traceIds, [host.sc.traceId, host.sc.traceId])
    const sent = await sentTraceparents('otel-req')
    assert.equal(sent.length, 2)
    for (const tp of sent) {
      assert.equal(tp.traceId, host.sc.traceId)
      assert.notEqual(tp.spanId, host.sc.spanId, 'the core sends its own (child) span id')
      assert.equal(tp.flags, '01')
    }
  } finally {
    client.close()
  }
})

test("an error's traceId is the active span's trace", async () => {
  await script('otel-err', [{ status: 500, json: { error: 'boom' } }])
  const client = new Client(config())
  try {
    const { sc, e } = await inSpan('host', async (span) => ({
      sc: span.spanContext(),
      e: await client.get('svc', '/s/otel-err/x').then(() => null, (e) => e),
    }))
    assert.ok(e instanceof HttpStatusError, `expected HttpStatusError, got ${e}`)
    assert.equal(e.traceId, sc.traceId)
    const [tp] = await sentTraceparents('otel-err')
    assert.equal(tp.traceId, sc.traceId)
    assert.notEqual(tp.spanId, sc.spanId)
  } finally {
    client.close()
  }
})

test('a stream inside an active span continues its trace', async () => {
  await script('otel-stream', [{ chunks: [{ data: 'one;' }, { data: 'two' }] }])
  const client = new Client(config())
  try {
    const { sc, traceId, text } = await inSpan('host', async (span) => {
      const r = await client.stream('svc', 'GET', '/s/otel-stream/x')
      const parts = []
      for await (const c of r.body) parts.push(c)
      return { sc: span.spanContext(), traceId: r.traceId, text: Buffer.concat(parts).toString() }
    })
    assert.equal(text, 'one;two')
    assert.equal(traceId, sc.traceId)
    const [tp] = await sentTraceparents('otel-stream')
    assert.equal(tp.traceId, sc.traceId)
    assert.notEqual(tp.spanId, sc.spanId)
  } finally {
    client.close()
  }
})

test('chat and chat streams inside an active span continue its trace', async () => {
  const name = `node-otel-${process.pid}`
  await upstream.admin('POST', `/__admin/provider/${name}`, { content: 'one two three' })
  const client = new Client({
    client: { name: 'node-otel' },
    log: { enabled: false },
    services: { p: { base_url: `${upstream.base}/llm/${name}` } },
    routes: { chat: { adapter: 'openai-compatible', strategy: 'priority', providers: [{ id: 'p', service: 'p', model: 'm', weight: 1 }] } },
  })
  try {
    const messages = [{ role: 'user', content: 'hi' }]
    const got = await inSpan('host', async (span) => {
      const r = await client.chat('chat', { messages })
      const s = await client.chatStream('chat', { messages })
      for await (const _ of s);
      const explicit = await client.chat('chat', { messages }, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })
      return { sc: span.spanContext(), chat: r.traceId, stream: s.traceId, explicit: explicit.traceId }
    })
    assert.equal(got.chat, got.sc.traceId)
    assert.equal(got.stream, got.sc.traceId)
    assert.equal(got.explicit, '4bf92f3577b34da6a3ce929d0e0e4736')
    // Outside the span: a new trace.
    const r = await client.chat('chat', { messages })
    assert.match(r.traceId, /^[0-9a-f]{32}$/)
    assert.notEqual(r.traceId, got.sc.traceId)
  } finally {
    client.close()
  }
})

test('outside any span the trace is fresh', async () => {
  await script('otel-none', [{ status: 200 }])
  const client = new Client(config())
  try {
    const hostTrace = await inSpan('host', async (span) => span.spanContext().traceId)
    const r1 = await client.get('svc', '/s/otel-none/a')
    const r2 = await client.get('svc', '/s/otel-none/b')
    assert.equal(trace.getSpanContext(context.active()), undefined)
    for (const r of [r1, r2]) {
      assert.match(r.traceId, /^[0-9a-f]{32}$/)
      assert.notEqual(r.traceId, hostTrace)
    }
    assert.notEqual(r1.traceId, r2.traceId)
    const sent = await sentTraceparents('otel-none')
    assert.deepEqual(sent.map((t) => t.traceId), [r1.traceId, r2.traceId])
  } finally {
    client.close()
  }
})

test('an explicit traceparent wins over the active span, as an option or as a header', async () => {
  await script('otel-explicit', [{ status: 200 }])
  const client = new Client(config())
  const option = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  const header = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  try {
    const got = await inSpan('host', async (span) => ({
      sc: span.spanContext(),
      byOption: await client.get('svc', '/s/otel-explicit/a', { traceparent: option }),
      byHeader: await client.get('svc', '/s/otel-explicit/b', { headers: { TraceParent: header } }),
    }))
    assert.equal(got.byOption.traceId, '4bf92f3577b34da6a3ce929d0e0e4736')
    assert.equal(got.byHeader.traceId, '0af7651916cd43dd8448eb211c80319c')
    const sent = await sentTraceparents('otel-explicit')
    assert.deepEqual(sent.map((t) => t.traceId), ['4bf92f3577b34da6a3ce929d0e0e4736', '0af7651916cd43dd8448eb211c80319c'])
    for (const t of sent) assert.notEqual(t.traceId, got.sc.traceId)
  } finally {
    client.close()
  }
})

test('a propagated, unsampled parent is continued unsampled; an invalid span context is ignored', async () => {
  await script('otel-remote', [{ status: 200 }])
  const client = new Client(config())
  try {
    const remote = { traceId: '5c8f2a0e1b3d4f6a7b8c9d0e1f2a3b4c', spanId: '1a2b3c4d5e6f7a8b', traceFlags: TraceFlags.NONE, isRemote: true }
    const r1 = await context.with(trace.setSpanContext(context.active(), remote), () => client.get('svc', '/s/otel-remote/a'))
    assert.equal(r1.traceId, remote.traceId)
    const invalid = trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: TraceFlags.SAMPLED })
    const r2 = await context.with(trace.setSpan(context.active(), invalid), () => client.get('svc', '/s/otel-remote/b'))
    assert.match(r2.traceId, /^[0-9a-f]{32}$/)
    assert.notEqual(r2.traceId, '0'.repeat(32))
    const [a, b] = await sentTraceparents('otel-remote')
    assert.deepEqual([a.traceId, a.flags], [remote.traceId, '00'])
    assert.notEqual(a.spanId, remote.spanId)
    assert.equal(b.traceId, r2.traceId)
  } finally {
    client.close()
  }
})

test('without @opentelemetry/api installed the module loads (CommonJS and ESM) and calls go out as before', async () => {
  await script('otel-absent', [{ status: 200, json: { ok: true } }])
  const child = path.join(__dirname, 'otel-absent-child.mjs')
  const { stdout } = await promisify(execFile)(process.execPath, [child, upstream.base], { timeout: 30000 })
  const got = JSON.parse(stdout)
  assert.equal(got.otelLoadable, false, 'the child hides @opentelemetry/api')
  assert.equal(got.sameModule, true)
  assert.deepEqual(got.statuses, [200, 200])
  for (const id of got.traceIds) assert.match(id, /^[0-9a-f]{32}$/)
  assert.notEqual(got.traceIds[0], got.traceIds[1])
  const { requests } = await upstream.admin('GET', '/__admin/log/otel-absent')
  assert.deepEqual(
    requests.map((r) => r.headers.traceparent.split('-')[1]),
    got.traceIds,
  )
})
