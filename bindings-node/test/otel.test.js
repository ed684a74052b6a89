'use strict'
// The host's active OpenTelemetry span is Harness's parent: with a real SDK tracer provider and
// an AsyncLocalStorage context manager, a call made inside a span carries that span's trace
// downstream (a child span id), for plain requests, errors, streams and chat calls; outside any
// span the trace is fresh; an explicit traceparent (option or header) wins; and without
// `@opentelemetry/api` installed the module loads and calls go out as before. With `otel.endpoint`
// the core exports its span (a child of the host span) and one per attempt to the upstream's OTLP
// receiver. Audit records carry the call's `principal` to listeners and files, masked and without
// a secret; a bad principal is a ConfigError and the upstream never sees one.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { promisify } = require('node:util')

const { trace, context, TraceFlags } = require('@opentelemetry/api')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')

const { Client, ConfigError, HttpStatusError } = require('..')
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

function config(svc = {}, top = {}) {
  return {
    client: { name: 'node-otel' },
    log: { enabled: false },
    services: { svc: { base_url: upstream.base, retry: { max_retries: 0 }, ...svc } },
    ...top,
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

// ---------------------------------------------------------------- export, audit, principal

// The spans of `traceId` the upstream's OTLP receiver holds once `done(spans)` is true (it may be
// shared by other tests; spans arrive in batches), polling for up to ~5 s.
async function exportedSpans(traceId, done) {
  let spans = []
  for (let i = 0; i < 100; i++) {
    const dump = await upstream.admin('GET', '/__admin/otlp/spans')
    spans = dump.spans.filter((s) => s.trace_id === traceId)
    if (done(spans)) return spans
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.fail(`the receiver never held the expected spans of trace ${traceId}: ${JSON.stringify(spans)}`)
}

test('with otel.endpoint the core exports a client span whose parent is the host span, and a child span per attempt', async () => {
  await script('otel-export', [{ status: 503 }, { status: 200, json: { ok: true } }])
  const retry = { max_retries: 1, base_delay_ms: 1, max_delay_ms: 2, jitter: false }
  const otel = { endpoint: upstream.base, sample_ratio: 1.0, delay_ms: 50, service_name: 'node-otel-export' }
  const client = new Client(config({ retry }, { otel }))
  try {
    const { sc, res } = await inSpan('host', async (span) => ({
      sc: span.spanContext(),
      res: await client.get('svc', '/s/otel-export/42', { endpoint: '/s/otel-export/{id}', principal: 'user-otel-1' }),
    }))
    assert.deepEqual([res.status, res.attempts, res.traceId], [200, 2, sc.traceId])
    const isRoot = (s) => s.parent_span_id === sc.spanId
    const spans = await exportedSpans(sc.traceId, (all) => {
      const root = all.find(isRoot)
      return root !== undefined && all.filter((s) => s.parent_span_id === root.span_id).length >= 2
    })
    const root = spans.find(isRoot)
    assert.equal(root.trace_id, sc.traceId)
    assert.equal(root.parent_span_id, sc.spanId, "Harness's span is the host span's child")
    assert.equal(root.kind, 3, 'a CLIENT span')
    assert.equal(root.name, 'GET /s/otel-export/{id}')
    assert.equal(root.service_name, 'node-otel-export')
    assert.equal(root.attributes['harness.service'], 'svc')
    assert.equal(root.attributes['harness.endpoint'], '/s/otel-export/{id}')
    assert.equal(root.attributes['harness.attempts'], 2)
    assert.equal(root.attributes['http.request.method'], 'GET')
    assert.equal(root.attributes['http.response.status_code'], 200)

    const attempts = spans.filter((s) => s.parent_span_id === root.span_id)
    attempts.sort((a, b) => a.attributes['harness.attempt'] - b.attributes['harness.attempt'])
    assert.deepEqual(attempts.map((s) => s.attributes['harness.attempt']), [1, 2])
    assert.deepEqual(attempts.map((s) => s.attributes['http.response.status_code']), [503, 200])
    // Each attempt's span id is the one the upstream received: its spans would join this tree.
    const sent = await sentTraceparents('otel-export')
    assert.deepEqual(sent.map((t) => t.spanId), attempts.map((s) => s.span_id))
    assert.ok(!JSON.stringify(spans).includes('user-otel-1'), 'the principal is for the audit record only')
  } finally {
    client.close()
  }
})

const AUDIT_SECRET = 'tok-node-audit-secret'

function auditConfig(sink) {
  return config({ headers: { authorization: `Bearer ${AUDIT_SECRET}` } }, { audit: { enabled: true, include_bodies: true, sink } })
}

test('audit records reach listeners with the principal, masked bodies and no secret; a file sink holds them after flush()', async () => {
  // The upstream echoes the secret back in a field named `token`.
  await script('audit-node', [{ status: 200, json: { ok: true, token: `Bearer ${AUDIT_SECRET}`, phone: '555-0100' } }])
  const client = new Client(auditConfig({ listener: true }))
  const records = []
  const events = []
  client.on('audit_record', (e) => records.push(e))
  client.on('event', (e) => events.push(e))
  try {
    const r = await client.post('svc', '/s/audit-node/charge', { json: { user: 'ann', password: 'hunter2' }, principal: 'user-node-42' })
    assert.equal(r.json().token, `Bearer ${AUDIT_SECRET}`, 'the caller gets the body as sent')
    const s = await client.stream('svc', 'GET', '/s/audit-node/stream', { principal: 'user-node-stream' })
    for await (const _ of s.body);
    client.flush()
    assert.equal(records.length, 2, JSON.stringify(records))
    const rec = records.find((e) => e.method === 'POST')
    assert.equal(rec.type, 'audit_record')
    assert.equal(rec.principal, 'user-node-42')
    assert.deepEqual([rec.client, rec.service, rec.endpoint, rec.status, rec.outcome, rec.attempts], ['node-otel', 'svc', '/s/audit-node/charge', 200, 'ok', 1])
    assert.equal(rec.trace_id, r.traceId)
    assert.equal(typeof rec.ts_ms, 'number')
    assert.equal(typeof rec.duration_ms, 'number')
    assert.deepEqual(rec.request_body, { user: 'ann', password: '***' })
    assert.equal(rec.response_body.token, '***')
    assert.equal(rec.response_body.phone, '***')
    assert.equal(rec.response_body.ok, true)
    assert.equal(records.find((e) => e.method === 'GET').principal, 'user-node-stream')
    assert.ok(events.some((e) => e.type === 'request_finished'))
    for (const e of events) {
      const text = JSON.stringify(e)
      assert.ok(!text.includes(AUDIT_SECRET) && !text.includes('hunter2'), `a secret in ${text}`)
      assert.ok(e.type === 'audit_record' || !text.includes('user-node-'), `the principal outside the audit record: ${text}`)
    }
  } finally {
    client.close()
  }

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'harness-node-audit-'))
  const file = path.join(dir, 'audit.jsonl')
  const fileClient = new Client(auditConfig({ file }))
  try {
    await fileClient.post('svc', '/s/audit-node/file', { json: { password: 'hunter2' }, principal: 'user-node-43' })
    fileClient.flush()
    const text = fs.readFileSync(file, 'utf8')
    const lines = text.trim().split('\n').map((l) => JSON.parse(l))
    assert.equal(lines.length, 1, text)
    assert.deepEqual([lines[0].principal, lines[0].outcome, lines[0].status], ['user-node-43', 'ok', 200])
    assert.equal(lines[0].response_body.token, '***')
    assert.ok(!text.includes(AUDIT_SECRET) && !text.includes('hunter2'), text)
  } finally {
    fileClient.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('chat and chat streams carry the principal into the audit record', async () => {
  const name = `node-audit-${process.pid}`
  await upstream.admin('POST', `/__admin/provider/${name}`, { content: 'one two three' })
  const client = new Client({
    client: { name: 'node-otel' },
    log: { enabled: false },
    audit: { enabled: true, sink: { listener: true } },
    services: { p: { base_url: `${upstream.base}/llm/${name}` } },
    routes: { chat: { adapter: 'openai-compatible', strategy: 'priority', providers: [{ id: 'p', service: 'p', model: 'm', weight: 1 }] } },
  })
  const records = []
  client.on('audit_record', (e) => records.push(e))
  try {
    const messages = [{ role: 'user', content: 'hi' }]
    const r = await client.chat('chat', { messages }, { principal: 'tenant-chat' })
    const s = await client.chatStream('chat', { messages }, { principal: 'tenant-chat-stream' })
    for await (const _ of s);
    client.flush()
    const byPrincipal = Object.fromEntries(records.map((e) => [e.principal, e]))
    assert.deepEqual(Object.keys(byPrincipal).sort(), ['tenant-chat', 'tenant-chat-stream'])
    const rec = byPrincipal['tenant-chat']
    assert.deepEqual([rec.service, rec.provider, rec.outcome, rec.trace_id], ['chat', 'p', 'ok', r.traceId])
    assert.equal(byPrincipal['tenant-chat-stream'].trace_id, s.traceId)
    assert.equal(rec.request_body, undefined, 'bodies are off by default')

    const bad = await client.chat('chat', { messages }, { principal: 'ann\nforged' }).then(() => null, (e) => e)
    assert.ok(bad instanceof ConfigError, `expected ConfigError, got ${bad}`)
    assert.match(bad.message, /request\.principal/)
    const badStream = await client.chatStream('chat', { messages }, { principal: '' }).then(() => null, (e) => e)
    assert.ok(badStream instanceof ConfigError, `expected ConfigError, got ${badStream}`)
    assert.match(badStream.message, /request\.principal/)
  } finally {
    client.close()
  }
})

test('a principal with a newline (or empty, too long, not a string) is a ConfigError and the upstream never sees a principal', async () => {
  await script('audit-bad', [{ status: 200, json: { ok: true } }])
  const client = new Client(auditConfig({ listener: true }))
  const records = []
  client.on('audit_record', (e) => records.push(e))
  try {
    const fail = (p, opts) => p.then(() => assert.fail(`resolved with ${JSON.stringify(opts)}`), (e) => e)
    for (const principal of ['ann\nforged-line', '', 'x'.repeat(257), 'tab\there', 42]) {
      const opts = { principal }
      for (const e of [
        await fail(client.get('svc', '/s/audit-bad/x', opts), opts),
        await fail(client.stream('svc', 'GET', '/s/audit-bad/x', opts), opts),
      ]) {
        assert.ok(e instanceof ConfigError, `expected ConfigError for ${JSON.stringify(principal)}, got ${e}`)
        assert.match(e.message, /request\.principal/)
        assert.ok(!e.message.includes('\n'), 'the control character is escaped')
      }
    }
    const ok = await client.get('svc', '/s/audit-bad/ok', { principal: 'user-node-44', headers: { 'x-trace': 'plain' } })
    assert.equal(ok.status, 200)
    client.flush()
    assert.deepEqual(records.map((r) => r.principal), ['user-node-44'], 'only the sent request is audited')
    const log = await upstream.admin('GET', '/__admin/log/audit-bad')
    assert.equal(log.requests.length, 1, 'nothing was sent for a bad principal')
    const seen = JSON.stringify(log)
    for (const p of ['user-node-44', 'forged-line']) assert.ok(!seen.includes(p), `the upstream saw ${p}: ${seen}`)
  } finally {
    client.close()
  }
})

test('the type declarations cover principal, audit_record events and the otel and audit config (tsc --strict)', () => {
  const pkg = path.resolve(__dirname, '..')
  const tsc = path.join(pkg, 'node_modules', '.bin', 'tsc')
  execFileSync(
    tsc,
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--moduleResolution', 'node10', '--skipLibCheck', '--types', 'node', path.join(__dirname, 'otel-types.ts')],
    { cwd: pkg, stdio: 'pipe' },
  )
})
