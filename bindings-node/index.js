'use strict'
// harness-sdk: the public Node API. Translation only: it builds request objects for the
// native module, turns errors (which cross as data) into classes, ties AbortSignals to native
// cancellation, wraps streamed bodies as async iterables and dispatches events to listeners.
// Every behaviour (timeouts, retries, breaking, isolation, reload) lives in harness-core.

const { EventEmitter } = require('node:events')
const path = require('node:path')

// Where the prebuilt native module for this platform lives: one npm package per platform
// (`@harness-sdk/<platform>`, an optional dependency of harness-sdk), as napi-rs lays them out.
// Released: linux-x64-gnu, linux-arm64-gnu (glibc 2.17+), linux-x64-musl, linux-arm64-musl; others
// are named so the error below is exact. glibc or musl: Node's report names glibc's version only
// when it runs on glibc (what napi-rs's loaders read too).
function platformName() {
  let abi = ''
  if (process.platform === 'linux') {
    const glibc = process.report && typeof process.report.getReport === 'function' ? process.report.getReport().header.glibcVersionRuntime : undefined
    abi = glibc ? '-gnu' : '-musl'
  } else if (process.platform === 'win32') {
    abi = '-msvc'
  }
  return `${process.platform}-${process.arch}${abi}`
}

// The native module: one built from source in this folder (`node scripts/build.js`, what
// `npm install ./bindings-node` runs) wins; else the platform package's prebuilt one. Its
// version must be this package's: a module from another build is refused, not half-used.
function loadNative() {
  const version = require('./package.json').version
  const local = path.join(__dirname, 'harness-sdk.node')
  const platform = platformName()
  const prebuilt = `@harness-sdk/${platform}`
  let mod, from
  if (require('node:fs').existsSync(local)) {
    mod = require(local)
    from = local
  } else {
    try {
      mod = require(prebuilt)
      from = prebuilt
    } catch (e) {
      if (!e || e.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(prebuilt)) throw e
      throw new Error(
        `harness-sdk: no native module for this platform (${platform}): ${prebuilt} is not installed ` +
          `(prebuilt modules exist for linux-x64-gnu, linux-arm64-gnu, linux-x64-musl and linux-arm64-musl) and none was built from source in ${__dirname}. ` +
          'Install the platform package, or build from source with a Rust toolchain (`npm install ./bindings-node` from the repository).',
      )
    }
  }
  const nativeVersion = typeof mod.nativeVersion === 'function' ? mod.nativeVersion() : 'unknown'
  if (nativeVersion !== version) {
    throw new Error(`harness-sdk ${version}: its native module (${from}) is version ${nativeVersion}; reinstall harness-sdk so both come from one build`)
  }
  return mod
}

const native = loadNative()

// ---------------------------------------------------------------- OpenTelemetry (optional)

// `@opentelemetry/api` is an optional peer dependency: looked up on the first call, and when it
// is not installed (or does not load) every call goes out exactly as without it.
let otel // undefined: not looked up yet; null: absent
function otelApi() {
  if (otel === undefined) {
    try {
      const api = require('@opentelemetry/api')
      otel = typeof api.trace?.getSpanContext === 'function' && typeof api.isSpanContextValid === 'function' ? api : null
    } catch {
      otel = null
    }
  }
  return otel
}

// The W3C `traceparent` of the host's active, valid OpenTelemetry span (so the core's span is its
// child), or undefined.
function activeTraceparent() {
  const api = otelApi()
  if (api === null) return undefined
  const sc = api.trace.getSpanContext(api.context.active())
  if (sc === undefined || !api.isSpanContextValid(sc)) return undefined
  // The API accepts upper-case hex; W3C (and the core) only lower-case.
  return `00-${sc.traceId.toLowerCase()}-${sc.spanId.toLowerCase()}-${sc.traceFlags & 1 ? '01' : '00'}`
}

// One call's parent trace: the caller's own (the option, or a `traceparent` header, which the
// core reads when the option is absent), else the host's active OpenTelemetry span.
function callTraceparent(explicit, headers) {
  if (explicit !== undefined) return explicit
  if (headers !== undefined) {
    for (let i = 0; i < headers.length; i += 2) {
      if (headers[i].toLowerCase() === 'traceparent') return undefined
    }
  }
  return activeTraceparent()
}

// ---------------------------------------------------------------- errors

// The classes (one per kind of the core) and `errorFrom` (the core's error view as its class)
// are generated from the core's kinds and ErrorView into errors.js (`harness types`).
const { errorFrom, ConfigError, CancelledError, HarnessError } = require('./errors')

// A synchronous native call's error (`{ view, body }`) as the error view `errorFrom` takes.
function errorView(e) {
  const view = JSON.parse(e.view)
  if (e.body != null) view.body = e.body
  return view
}

// A synchronous native call's error as its class.
function nativeError(e) {
  return errorFrom(errorView(e))
}

function configError(message) {
  return new ConfigError(message)
}

// The core's error for a value JS cannot hand over faithfully (`lone_surrogate`, `too_deep`, `non_finite`).
function hostInputError(kind, field) {
  return nativeError(native.hostInputError(kind, field))
}

// Strings cross napi as UTF-8, which would replace a lone surrogate with U+FFFD silently.
const LONE_SURROGATE = /\p{Surrogate}/u
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function' ? (s) => s.isWellFormed() : (s) => !LONE_SURROGATE.test(s)

// A fallible synchronous native call returns its value or a NativeError (the error as data):
// `isValue` tells them apart, and the error becomes its class here.
function unwrap(result, isValue) {
  if (isValue) return result
  throw nativeError(result)
}

// One of the core's views: camelCased JSON text, the shape types.d.ts declares.
function view(nativeClient, name, args) {
  const r = nativeClient.view(name, args)
  return JSON.parse(unwrap(r, typeof r === 'string'))
}

const camelCase = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

// A view method: its arguments are strings (an optional one may be left out), passed as they are.
function viewMethod(spec) {
  const args = spec.args.map((a) => ({ name: a.replace(/\?$/, ''), optional: a.endsWith('?') }))
  return function (...given) {
    const out = []
    for (let i = 0; i < args.length; i++) {
      const { name, optional } = args[i]
      if (optional) {
        const v = optString(given[i], name)
        if (v !== undefined) out.push(v)
      } else {
        out.push(reqString(given[i], name))
      }
    }
    return view(this._native, spec.name, out)
  }
}

// ---------------------------------------------------------------- responses

// What a buffered and a streamed response share: status, headers, attempts and trace id.
class ResponseHead {
  constructor(status, rawHeaders, attempts, traceId) {
    /** The HTTP status code. */
    this.status = status
    /** Attempts made (for a stream: before the head arrived). */
    this.attempts = attempts
    /** The W3C trace id of the call. */
    this.traceId = traceId
    // Header text as sent by the native side (`name\0value\0...`), split on first use.
    this._rawHeaders = rawHeaders
    this._headers = undefined
  }

  /** Response headers by lower-case name, repeated ones joined with ", "; `getAll(name)` and `getSetCookie()` keep every value. */
  get headers() {
    if (this._headers === undefined) this._headers = new ResponseHeaders(this._rawHeaders)
    return this._headers
  }

  /** True for a 2xx status. */
  get ok() {
    return this.status >= 200 && this.status < 300
  }
}

// The cache outcomes that mean "served from a store" (the core's `CacheStamp::from_cache`).
const FROM_CACHE = new Set(['hit', 'revalidated', 'stale', 'exact', 'semantic'])

/** A buffered response. */
class Response extends ResponseHead {
  constructor(status, rawHeaders, body, elapsedMs, attempts, traceId, routed, cache) {
    super(status, rawHeaders, attempts, traceId)
    /** The response body. */
    this.body = body
    /** Wall time of the whole call (all attempts), in milliseconds. */
    this.elapsedMs = elapsedMs
    /** What a cache did for this answer (`{ outcome, similarity, savedCost }`), or null when no cache had a part in it. */
    this.cache = cache ?? null
    // What routing did (the core's `Routed` view), when the request named a route; read through the getters.
    this._routed = routed
  }

  /** True when served from a store, not fetched for this call (`cache.outcome` `hit`, `revalidated` or `stale`). */
  get fromCache() {
    return this.cache !== null && FROM_CACHE.has(this.cache.outcome)
  }

  /** True for a stored answer the origin confirmed with a 304 (the caller sees the stored 200). */
  get revalidated() {
    return this.cache !== null && this.cache.outcome === 'revalidated'
  }

  /** The route the request named, or null. */
  get route() {
    return this._routed?.route ?? null
  }

  /** The provider that answered (null when not routed, or for a static fallback). */
  get provider() {
    return this._routed?.provider ?? null
  }

  /** The model that answered (the provider's report, else its configured model), or null. */
  get model() {
    return this._routed?.model ?? null
  }

  /** Attempts each provider got, as `[id, n]` pairs in the order first tried; null when not routed. */
  get attemptsByProvider() {
    const r = this._routed
    return r === undefined ? null : r.attemptsByProvider.slice()
  }

  /** `cache` or `static` when no provider could answer and a degraded answer was served; else null. */
  get fallback() {
    return this._routed?.fallback ?? null
  }

  /** True for a cached answer served because no provider could answer now. */
  get stale() {
    return this._routed?.fallback === 'cache'
  }

  /** The answer's cost from the provider's prices and reported usage, or null. */
  get cost() {
    return this._routed?.cost ?? null
  }

  /** `{ promptTokens, completionTokens, totalTokens, cachedTokens, reasoningTokens }` as the provider reported them, or null. */
  get usage() {
    return this._routed?.usage ?? null
  }

  /** The body decoded as UTF-8. */
  text() {
    return this.body.toString('utf8')
  }

  /** The body parsed as JSON. */
  json() {
    return JSON.parse(this.text())
  }
}

/**
 * Response headers: each lower-case name is a property whose value is every value joined with
 * ", " (as fetch's `get`); `getAll(name)` and `getSetCookie()` keep every value, in order.
 */
class ResponseHeaders {
  // `name, value, name, value...` as the core received them, repeats included.
  #parts

  constructor(raw) {
    const parts = raw.length > 0 ? raw.split('\0') : []
    this.#parts = parts
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const k = parts[i]
      // A header named like a method (or `__proto__`) is read with get(); it cannot replace the method.
      if (k === 'get' || k === '__proto__') continue
      const v = Object.hasOwn(this, k) ? this[k] : undefined
      this[k] = v === undefined ? parts[i + 1] : `${v}, ${parts[i + 1]}`
    }
  }

  /** Every value of `name` (case-insensitive) joined with ", ", or null when absent (as fetch). */
  get(name) {
    const all = this.getAll(name)
    return all.length === 0 ? null : all.join(', ')
  }

  /** Every value of `name` (case-insensitive), in the order received; [] when absent. */
  getAll(name) {
    const k = String(name).toLowerCase()
    const parts = this.#parts
    const out = []
    for (let i = 0; i + 1 < parts.length; i += 2) if (parts[i] === k) out.push(parts[i + 1])
    return out
  }

  /** Every `Set-Cookie` value, in order (as fetch's `Headers.getSetCookie`). */
  getSetCookie() {
    return this.getAll('set-cookie')
  }
}

// StreamResponse's internal methods (the completion queue and signal watches call them).
const READ = Symbol('read')
const SETTLE = Symbol('settle')
const ABORT = Symbol('abort')

/**
 * A streamed response: the head (status, headers, attempts, trace id) has arrived; `body` is an
 * async iterable of Buffer chunks pulled from the core one at a time (the core reads at most a
 * small buffer ahead). Breaking out of `for await`, `cancel()` or the call's AbortSignal releases
 * the connection and the bulkhead permit at once.
 */
// What a streamed response and a streamed chat answer hold: the native stream, the caller's
// AbortSignal, and one read at a time through the completion queue. `service` and `method`
// fill an error that lacks them; `last(chunk)` says a chunk ends the stream without another read.
class NativeReader {
  #stream
  #signal
  #service
  #method
  #chunks = undefined
  // 'open', 'ended' (end, error or cancel()), or 'aborted' (the signal fired).
  #state = 'open'

  #last

  constructor(stream, signal, service, method, last) {
    this.#last = last
    this.#stream = stream
    this.#signal = signal
    this.#service = service
    this.#method = method
    if (signal !== null) watchSignal(signal, this)
  }

  // Stops reading: the connection and permits are released now; the iteration ends.
  cancel() {
    if (this.#state !== 'open') return
    this.#end('ended')
    this.#stream.cancel()
  }

  // The chunks as an async iterable (read once); leaving the loop early cancels the stream.
  chunks() {
    if (this.#chunks === undefined) this.#chunks = chunksOf(this)
    return this.#chunks
  }

  // Called by the signal's watch when it aborts: reads reject with CancelledError from now on.
  [ABORT]() {
    if (this.#state !== 'open') return
    this.#end('aborted')
    this.#stream.cancel()
  }

  #end(state) {
    this.#state = state
    if (this.#signal !== null) unwatchSignal(this.#signal, this)
  }

  // The next chunk, or null at the end.
  [READ]() {
    if (this.#state === 'ended') return Promise.resolve(null)
    if (this.#state === 'aborted') return Promise.reject(cancelledError(this.#service, this.#method, this.#signal.reason))
    const id = nextId()
    this.#stream.read(queue, id)
    return new Promise((resolve, reject) => track(id, new PendingRead(this, resolve, reject)))
  }

  // A read's outcome (from the completion queue).
  [SETTLE](read, chunk, error) {
    if (error === undefined) {
      if (this.#last(chunk) && this.#state === 'open') this.#end('ended')
      read.resolve(chunk)
      return
    }
    const state = this.#state
    if (state === 'open') this.#end('ended')
    // A read waiting when cancel() was called ends the iteration like any later read.
    if (state === 'ended' && error.kind === 'CancelledError') {
      read.resolve(null)
      return
    }
    const cause = state === 'aborted' && error.kind === 'CancelledError' ? this.#signal.reason : undefined
    read.reject(errorFrom({ ...error, service: error.service ?? this.#service, method: error.method ?? this.#method }, cause))
  }
}

// A reader's async iterator: leaving the loop early (break, return, throw) cancels the stream.
async function* chunksOf(reader) {
  try {
    for (;;) {
      const chunk = await reader[READ]()
      if (chunk === null) return
      yield chunk
    }
  } finally {
    reader.cancel()
  }
}

const endsAtNull = (chunk) => chunk === null

class StreamResponse extends ResponseHead {
  #reader

  constructor(status, rawHeaders, attempts, traceId, stream, service, method, signal) {
    super(status, rawHeaders, attempts, traceId)
    this.#reader = new NativeReader(stream, signal, service, method, endsAtNull)
  }

  /** The body: an async iterable of Buffer chunks (read it once). */
  get body() {
    return this.#reader.chunks()
  }

  /** Stops reading: the connection and permit are released now; the body iteration ends. */
  cancel() {
    this.#reader.cancel()
  }
}

// One chunk read in flight.
class PendingRead {
  constructor(response, resolve, reject) {
    this.response = response
    this.resolve = resolve
    this.reject = reject
  }

  succeed(chunk) {
    this.response[SETTLE](this, chunk, undefined)
  }

  fail(error) {
    this.response[SETTLE](this, null, error)
  }
}

// ---------------------------------------------------------------- chat

/** A chat answer on a route: the same shape from every provider. */
class ChatResponse {
  // `r` is the core's ChatResponse view; `raw` the provider's answer as received.
  constructor(r, raw) {
    /** The assistant's answer. */
    this.content = r.content
    /** The tools the model asked to call: `[{ id, name, arguments }]`, `arguments` the JSON text the provider sent. */
    this.toolCalls = r.toolCalls
    /** `stop`, `length`, `tool_calls`, ... (null when the provider gave none). */
    this.finishReason = r.finishReason
    /** `{ promptTokens, completionTokens, totalTokens, cachedTokens, reasoningTokens }`, or null when the provider reported none. */
    this.usage = r.usage
    /** The route called. */
    this.route = r.route
    /** The provider that answered (null for a static fallback). */
    this.provider = r.provider
    /** The model that answered. */
    this.model = r.model
    /** From the provider's prices and the usage it reported; null without both. */
    this.cost = r.cost
    /** `cache` or `static` when no provider could answer; else null. */
    this.fallback = r.fallback
    /** True for a cached answer served because no provider could answer now. */
    this.stale = r.fallback === 'cache'
    /** Attempts made across every provider. */
    this.attempts = r.attempts
    /** Attempts each provider got, as `[id, n]` pairs in the order first tried. */
    this.attemptsByProvider = r.attemptsByProvider
    /** The W3C trace id of the call. */
    this.traceId = r.traceId
    /** Wall time of the whole call, in milliseconds. */
    this.elapsedMs = r.elapsedMs
    /**
     * What a cache did: `{ outcome, similarity, savedCost }` with outcome `exact` (a stored
     * answer, no provider called) or `coalesced` (an identical chat's answer, shared); else null.
     */
    this.cache = r.cache ?? null
    /** True for an answer served from the route's exact or semantic answer cache (no provider was called for it). */
    this.fromCache = this.cache !== null && FROM_CACHE.has(this.cache.outcome)
    /** The provider's whole answer, as received. */
    this.raw = raw
  }
}

/**
 * A streamed chat answer: an async iterable of chunks `{ kind, content, provider, model,
 * toolCall, toolCalls, finishReason, usage, cost, reason }`, pulled from the core one at a time.
 * `kind` is `delta` (more text), `tool_call` (a piece of a tool call: `toolCall` is `{ index, id,
 * name, arguments }`), `restart` (the answer so far is void; a new one follows from another
 * provider) or `done` (the last: finish reason, the assembled `toolCalls`, usage, cost). Breaking out of `for await`, `cancel()` or
 * the call's AbortSignal stops the answer and releases its connection and permits at once.
 */
// `done` is the last chunk of an answer: the iteration ends after it without another read.
const endsAtDone = (chunk) => chunk === null || chunk.kind === 'done'

class ChatStream {
  #reader

  constructor(stream, signal) {
    /** The route called. */
    this.route = stream.route
    /** The W3C trace id of the call. */
    this.traceId = stream.traceId
    this.#reader = new NativeReader(stream, signal, stream.route, 'POST', endsAtDone)
  }

  /** The chunks (iterate once); leaving the loop early cancels the answer. */
  [Symbol.asyncIterator]() {
    return this.#reader.chunks()
  }

  /** Stops the answer: the connection and permits are released now; the iteration ends. */
  cancel() {
    this.#reader.cancel()
  }

  toString() {
    return `[ChatStream ${this.route}]`
  }
}

// ---------------------------------------------------------------- embeddings

/**
 * The vectors of an embeddings call, in input order: `vectors[i]` is input `i`'s, a Float32Array
 * view over one ArrayBuffer that holds them all (the core's buffer, handed over once).
 */
class EmbedResponse {
  // `r` is the core's EmbedResponse view; `all` every vector, one after another.
  constructor(r, all) {
    const count = r.count
    const dimensions = r.dimensions
    const vectors = new Array(count)
    for (let i = 0; i < count; i++) vectors[i] = new Float32Array(all.buffer, all.byteOffset + i * dimensions * 4, dimensions)
    /** One Float32Array per input, in input order, all views over one ArrayBuffer. */
    this.vectors = vectors
    /** How many vectors (one per input). */
    this.count = count
    /** The length of every vector. */
    this.dimensions = dimensions
    /** `{ promptTokens, completionTokens, totalTokens, ... }` summed over every batch, or null when no provider reported it. */
    this.usage = r.usage ?? null
    /** From the providers' prices and the usage they reported; null without both. */
    this.cost = r.cost ?? null
    /** The route called. */
    this.route = r.route
    /** The provider that answered the first batch. */
    this.provider = r.provider ?? null
    /** The model that answered the first batch. */
    this.model = r.model ?? null
    /** How many calls the inputs were split into. */
    this.batches = r.batches
    /** Attempts across every batch. */
    this.attempts = r.attempts
    /** The first batch's W3C trace id. */
    this.traceId = r.traceId
    /** Wall time of the whole call, in milliseconds. */
    this.elapsedMs = r.elapsedMs
  }
}

// Checks and translates one embeddings call, stages it natively and returns its promise.
function sendEmbed(nativeClient, route, inputs, opts) {
  let request, token
  try {
    route = routeName(route)
    if (!Array.isArray(inputs)) throw configError(`inputs: expected an array of strings, got ${inputs === null ? 'null' : typeof inputs}`)
    for (let i = 0; i < inputs.length; i++) {
      const t = inputs[i]
      if (typeof t !== 'string') throw configError(`inputs[${i}]: expected a string, got ${t === null ? 'null' : typeof t}`)
      if (!isWellFormed(t)) throw hostInputError('lone_surrogate', `inputs[${i}]`)
    }
    if (opts === null || typeof opts !== 'object') throw configError('embed: expected an options object')
    const dimensions = opts.dimensions ?? undefined
    if (dimensions !== undefined && (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > 0xffffffff)) {
      throw configError(`dimensions: expected an integer >= 1, got ${typeof dimensions === 'number' ? dimensions : typeof dimensions}`)
    }
    const flat = flatPairs(opts.headers, 'headers')
    const headers = []
    if (flat !== undefined) for (let i = 0; i < flat.length; i += 2) headers.push([flat[i], flat[i + 1]])
    const traceparent = callTraceparent(optString(opts.traceparent, 'traceparent'), flat)
    const principal = optString(opts.principal, 'principal')
    const timeoutMs = optMillis(opts.timeoutMs)
    // JSON.stringify would write NaN or an infinity as null (no timeout): refused instead.
    if (timeoutMs !== undefined && !Number.isFinite(timeoutMs)) throw hostInputError('non_finite', 'request.timeout_ms')
    // The core's EmbedRequest (`EmbedRequest::from_host`); absent fields are left out.
    request = JSON.stringify({ inputs, dimensions, headers, timeout_ms: timeoutMs, traceparent, principal })
    token = cancelToken(opts.signal, route, 'POST')
  } catch (e) {
    return Promise.reject(e)
  }
  const id = nextId()
  let error
  try {
    error = nativeClient.embed(queue, id, route, request, token)
  } catch (e) {
    return Promise.reject(configError(`embed: ${e.message}`))
  }
  return settleLater(id, error, route, 'POST', opts.signal, token)
}

// ---------------------------------------------------------------- requests

// `scope` prefixes the field in errors: `request.path`, `mock.path`.
function optString(v, field, scope = 'request') {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw configError(`${scope}.${field}: expected a string, got ${typeof v}`)
  if (!isWellFormed(v)) throw hostInputError('lone_surrogate', `${scope}.${field}`)
  return v
}

function reqString(v, field, scope = 'request') {
  if (typeof v !== 'string') throw configError(`${scope}.${field}: expected a string, got ${v === undefined ? 'nothing' : typeof v}`)
  if (!isWellFormed(v)) throw hostInputError('lone_surrogate', `${scope}.${field}`)
  return v
}

// Accepts a plain object, a Map, a Headers/URLSearchParams or an array of pairs; returns flat pairs.
function flatPairs(v, field, scope = 'request') {
  if (v === undefined || v === null) return undefined
  const out = []
  const push = (k, val, where) => {
    if (Array.isArray(val)) {
      for (const item of val) push(k, item, where)
      return
    }
    if (val === undefined || val === null) return
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean') {
      throw configError(`${scope}.${field}.${where}: expected a string, number or boolean`)
    }
    const name = String(k)
    // The name is not repeated in this message: it is the malformed part.
    if (!isWellFormed(name) || (typeof val === 'string' && !isWellFormed(val))) {
      throw hostInputError('lone_surrogate', `${scope}.${field}`)
    }
    out.push(name, String(val))
  }
  if (Array.isArray(v)) {
    v.forEach((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw configError(`${scope}.${field}[${i}]: expected a [name, value] pair`)
      push(pair[0], pair[1], String(pair[0]))
    })
  } else if (typeof v === 'object' && typeof v[Symbol.iterator] === 'function' && typeof v.entries === 'function') {
    for (const [k, val] of v.entries()) push(k, val, String(k))
  } else if (typeof v === 'object') {
    for (const k of Object.keys(v)) push(k, v[k], k)
  } else {
    throw configError(`${scope}.${field}: expected an object of name/value pairs`)
  }
  return out
}

const MAX_DEPTH = native.jsonMaxDepth()

// JSON text as JSON.stringify writes it (key order kept), or a ConfigError naming `field` where
// stringify would lose data silently (NaN, ±Infinity as null) or fails (BigInt, cycles, a stack
// overflow on deep nesting). The core checks the text itself: nesting, lone surrogate escapes.
function jsonText(v, field) {
  let text
  try {
    text = JSON.stringify(v)
  } catch (e) {
    if (e instanceof RangeError && nestedDeeperThan(v, MAX_DEPTH)) throw hostInputError('too_deep', field)
    throw configError(`${field}: not serialisable as JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (text === undefined) throw configError(`${field}: not serialisable as JSON`)
  // NaN and infinities come out as `null`: only text with a null can hide one.
  if (text.includes('null') && hasNonFinite(v)) throw hostInputError('non_finite', field)
  return text
}

// Whether a value JSON.stringify wrote holds a NaN or an infinity (after toJSON). Iterative; the
// value serialised, so it has no cycle.
function hasNonFinite(root) {
  const stack = [root]
  try {
    while (stack.length > 0) {
      let v = stack.pop()
      if (typeof v === 'number') {
        if (!Number.isFinite(v)) return true
        continue
      }
      if (v === null || typeof v !== 'object') continue
      if (typeof v.toJSON === 'function') {
        v = v.toJSON()
        if (typeof v === 'number') {
          if (!Number.isFinite(v)) return true
          continue
        }
        if (v === null || typeof v !== 'object') continue
      }
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) stack.push(v[i])
      } else if (v instanceof Number) {
        if (!Number.isFinite(+v)) return true
      } else {
        for (const k of Object.keys(v)) stack.push(v[k])
      }
    }
  } catch {
    // A getter or toJSON that fails the second time: the text stands as serialised.
  }
  return false
}

// Whether arrays and objects in `root` nest deeper than `max` levels (the root is level 1).
// Iterative and bounded, for telling a deep value from another stack overflow.
function nestedDeeperThan(root, max) {
  const values = [root]
  const levels = [0]
  let budget = 1_000_000
  try {
    while (values.length > 0) {
      const v = values.pop()
      const level = levels.pop()
      if (v === null || typeof v !== 'object') continue
      if (level >= max) return true
      const children = Array.isArray(v) ? v : Object.values(v)
      for (let i = 0; i < children.length; i++) {
        if (--budget < 0) return false
        values.push(children[i])
        levels.push(level + 1)
      }
    }
  } catch {
    // An exotic object whose getters throw: not shown to be deep.
  }
  return false
}

function bodyBytes(b, field = 'request.body') {
  if (typeof b === 'string') {
    if (!isWellFormed(b)) throw hostInputError('lone_surrogate', field)
    return Buffer.from(b, 'utf8')
  }
  if (Buffer.isBuffer(b)) return b
  if (ArrayBuffer.isView(b)) return Buffer.from(b.buffer, b.byteOffset, b.byteLength)
  if (b instanceof ArrayBuffer) return Buffer.from(b)
  throw configError(`${field}: expected a Buffer, Uint8Array, ArrayBuffer or string`)
}

const NO_OPTIONS = Object.freeze({})

// Checks and translates one call's fields, stages it natively and returns its promise (of a
// Response, or with `streaming` of a StreamResponse). `opts` carries every field but service,
// method and path (already taken from it or the shortcut).
function send(nativeClient, streaming, service, method, path, opts) {
  let endpoint, query, headers, idempotencyKey, traceparent, principal, json, body, timeoutMs, token
  try {
    service = reqString(service, 'service')
    method = reqString(method, 'method')
    path = reqString(path, 'path')
    endpoint = optString(opts.endpoint, 'endpoint')
    query = flatPairs(opts.query, 'query')
    headers = flatPairs(opts.headers, 'headers')
    idempotencyKey = optString(opts.idempotencyKey, 'idempotencyKey')
    traceparent = callTraceparent(optString(opts.traceparent, 'traceparent'), headers)
    principal = optString(opts.principal, 'principal')
    if (opts.json !== undefined) json = jsonText(opts.json, 'json')
    if (opts.body !== undefined && opts.body !== null) body = bodyBytes(opts.body)
    timeoutMs = optMillis(opts.timeoutMs)
    token = cancelToken(opts.signal, service, method)
  } catch (e) {
    return Promise.reject(e)
  }
  const id = nextId()
  let error
  try {
    error = nativeClient.request(
      queue, id, streaming, service, method, path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, principal, token,
    )
  } catch (e) {
    // A napi conversion failure; the checks above make this unreachable for typed input.
    return Promise.reject(configError(`request: ${e.message}`))
  }
  return settleLater(id, error, service, method, opts.signal, token)
}

// `timeoutMs` as given (its value is the core's rule, `request.timeout_ms`); null is absent.
function optMillis(v) {
  if (v === null || v === undefined) return undefined
  if (typeof v !== 'number') throw configError(`request.timeoutMs: expected a number, got ${typeof v}`)
  return v
}

// The call's cancel token when it has an AbortSignal (null without one); a signal that is not
// one, or has already fired, throws.
function cancelToken(signal, service, method) {
  if (signal === undefined || signal === null) return null
  if (typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw configError('request.signal: expected an AbortSignal')
  }
  if (signal.aborted) throw cancelledError(service, method, signal.reason)
  return new native.CancelToken()
}

// The promise of a call staged natively under `id` (or refused at once with `error`), settled
// from the completion queue; its signal, if any, cancels it through `token`.
function settleLater(id, error, service, method, signal, token) {
  if (error) return Promise.reject(nativeError(error))
  return new Promise((resolve, reject) => {
    if (token !== null) watchSignal(signal, token)
    track(id, new PendingCall(resolve, reject, service, method, signal ?? null, token))
  })
}

function routeName(route) {
  if (typeof route !== 'string') throw configError(`route: expected a string, got ${route === undefined ? 'nothing' : typeof route}`)
  if (!isWellFormed(route)) throw hostInputError('lone_surrogate', 'route')
  return route
}

// Checks and translates one chat call (`request` is `{ messages, ...params }`), stages it
// natively and returns its promise (of a ChatResponse, or with `streaming` of a ChatStream).
function sendChat(nativeClient, streaming, route, request, opts) {
  let messages, params, headers, traceparent, principal, timeoutMs, token
  try {
    route = routeName(route)
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      throw configError('chat: expected { messages, ...params }')
    }
    if (opts === null || typeof opts !== 'object') throw configError('chat: expected an options object')
    const { messages: m, ...rest } = request
    // Absent messages reach the core as null, which names what is expected.
    messages = m === undefined ? 'null' : jsonText(m, 'messages')
    if (Object.keys(rest).length > 0) params = jsonText(rest, 'params')
    headers = flatPairs(opts.headers, 'headers')
    traceparent = callTraceparent(optString(opts.traceparent, 'traceparent'), headers)
    principal = optString(opts.principal, 'principal')
    timeoutMs = optMillis(opts.timeoutMs)
    token = cancelToken(opts.signal, route, 'POST')
  } catch (e) {
    return Promise.reject(e)
  }
  const id = nextId()
  let error
  try {
    error = nativeClient.chat(queue, id, streaming, route, messages, params, headers, timeoutMs, traceparent, principal, token)
  } catch (e) {
    return Promise.reject(configError(`chat: ${e.message}`))
  }
  return settleLater(id, error, route, 'POST', opts.signal, token)
}

// One 'abort' listener per signal, however many calls share it (a fan-out would otherwise
// pass the listener limit and warn): it cancels the signal's pending requests (their cancel
// tokens) and open streams.
const signalWatches = new WeakMap()

class SignalWatch {
  constructor(signal) {
    this.tokens = new Set()
    this.onAbort = () => {
      signalWatches.delete(signal)
      const tokens = [...this.tokens]
      this.tokens.clear()
      for (const token of tokens) {
        // An open stream (StreamResponse, ChatStream), or a pending call's cancel token.
        if (typeof token[ABORT] === 'function') token[ABORT]()
        else token.cancel()
      }
    }
  }
}

function watchSignal(signal, token) {
  let watch = signalWatches.get(signal)
  if (watch === undefined) {
    watch = new SignalWatch(signal)
    signalWatches.set(signal, watch)
    signal.addEventListener('abort', watch.onAbort, { once: true })
  }
  watch.tokens.add(token)
}

function unwatchSignal(signal, token) {
  const watch = signalWatches.get(signal)
  if (watch === undefined || !watch.tokens.delete(token) || watch.tokens.size > 0) return
  signalWatches.delete(signal)
  signal.removeEventListener('abort', watch.onAbort)
}

function cancelledError(service, method, reason) {
  return new CancelledError('the request was cancelled', {
    service,
    method,
    cause: reason,
  })
}

// ---------------------------------------------------------------- completions

// The one completion pattern (see README.md): calls in flight (requests, stream opens, chunk
// reads), by id. Calls made in one tick are staged natively and started together by one flush
// (a microtask); everything that comes back (results, opened streams, chunks, events) is drained
// in batches behind one weak threadsafe function. While any call is pending a plain timer holds
// the event loop, so an idle process (closed client or not) exits on its own.
const pending = new Map()
let lastId = 0
let hold = null
let flushQueued = false
const noop = () => {}
const LAYOUT = native.completionLayout()
const FIELDS = LAYOUT.fields
const ERROR = LAYOUT.error
const CHUNK = LAYOUT.chunk
const END = LAYOUT.end
const CHAT = LAYOUT.chat
const CHAT_STREAM = LAYOUT.chatStream
const CHAT_CHUNK = LAYOUT.chatChunk
const LEASE = LAYOUT.lease
const STORED = LAYOUT.stored
const SETTLED = LAYOUT.settled
const EMBED = LAYOUT.embed
const BODY_LARGE = LAYOUT.bodyLarge
const BODY_STREAM = LAYOUT.bodyStream
const BODY_NONE = LAYOUT.bodyNone
const VIEW_ROUTED = LAYOUT.viewRouted
const VIEW_CACHE = LAYOUT.viewCache
const NO_VIEWS = Object.freeze([])

function flush() {
  flushQueued = false
  queue.flush()
}

// Where the drain is in the batch's bodies (one object for every drain: no closure per batch).
const cursor = { bodies: null, large: null, at: 0, nLarge: 0 }

// A row's body: copied out of the batch's shared buffer (small ones land in Node's Buffer pool,
// so a response kept alive does not keep the whole batch alive), a large one as it crossed, or
// null when the row has none.
function takeBody(len) {
  if (len === BODY_NONE) return null
  if (len === BODY_LARGE) return cursor.large[cursor.nLarge++]
  const body = Buffer.allocUnsafe(len)
  cursor.bodies.copy(body, 0, cursor.at, cursor.at + len)
  cursor.at += len
  return body
}

// One row per outcome (see src/completion.rs): a response or an opened stream (status > 0),
// else the row's kind. Views (chat answers and chunks, routing records, errors) are the core's
// JSON, parsed once per batch.
function drain() {
  const { meta, text, bodies, large, views: viewText, handles, floats, events } = queue.drain()
  const views = viewText.length > 0 ? JSON.parse(`[${viewText}]`) : NO_VIEWS
  cursor.bodies = bodies
  cursor.large = large
  cursor.at = 0
  cursor.nLarge = 0
  let at = 0
  let nView = 0
  let nHandle = 0
  let nFloats = 0
  for (let i = 0; i < meta.length; i += FIELDS) {
    const id = meta[i]
    const status = meta[i + 1]
    const call = pending.get(id)
    if (call !== undefined) pending.delete(id)
    if (status > 0) {
      const headersEnd = at + meta[i + 4]
      const traceEnd = headersEnd + meta[i + 5]
      const bodyLen = meta[i + 6]
      if (bodyLen === BODY_STREAM) {
        const stream = handles[nHandle++]
        if (call !== undefined) call.opened(status, text.slice(at, headersEnd), meta[i + 3], text.slice(headersEnd, traceEnd), stream)
        else stream.cancel()
      } else {
        const b = takeBody(bodyLen)
        // Which views follow, as bits: the routing record, then the cache stamp.
        const has = meta[i + 7]
        const routed = has & VIEW_ROUTED ? views[nView++] : undefined
        const cache = has & VIEW_CACHE ? views[nView++] : undefined
        if (call !== undefined) {
          call.succeed(new Response(status, text.slice(at, headersEnd), b, meta[i + 2], meta[i + 3], text.slice(headersEnd, traceEnd), routed, cache))
        }
      }
      at = traceEnd
      continue
    }
    switch (status) {
      case CHUNK: {
        const b = takeBody(meta[i + 6])
        if (call !== undefined) call.succeed(b)
        break
      }
      case END:
        if (call !== undefined) call.succeed(null)
        break
      case ERROR: {
        const error = views[nView++]
        const b = takeBody(meta[i + 6])
        if (b !== null) error.body = b
        if (call !== undefined) call.fail(error)
        break
      }
      case CHAT: {
        const answer = views[nView++]
        const raw = takeBody(meta[i + 6])
        if (call !== undefined) call.succeed(new ChatResponse(answer, raw))
        break
      }
      case CHAT_CHUNK: {
        const chunk = views[nView++]
        if (call !== undefined) call.succeed(chunk)
        break
      }
      case CHAT_STREAM: {
        const stream = handles[nHandle++]
        if (call !== undefined) call.chatOpened(stream)
        else stream.cancel()
        break
      }
      case LEASE: {
        const lease = handles[nHandle++]
        if (call !== undefined) call.leased(lease)
        break
      }
      case STORED: {
        const stored = takeBody(meta[i + 6])
        if (call !== undefined) call.stored(stored.toString('utf8'))
        break
      }
      case SETTLED:
        if (call !== undefined) call.succeed(undefined)
        break
      case EMBED: {
        const answer = views[nView++]
        const all = floats[nFloats++]
        if (call !== undefined) call.succeed(new EmbedResponse(answer, all))
        break
      }
    }
  }
  cursor.bodies = null
  cursor.large = null
  if (pending.size === 0 && hold !== null) {
    clearInterval(hold)
    hold = null
  }
  if (events.length > 0) dispatchEvents(events)
}

const queue = new native.CompletionQueue(drain)

function nextId() {
  do {
    lastId = (lastId + 1) >>> 0
  } while (lastId === 0 || pending.has(lastId))
  return lastId
}

// One request or stream open in flight: how to settle its promise, and its AbortSignal and
// cancel token (if any).
class PendingCall {
  constructor(resolve, reject, service, method, signal, token) {
    this.resolve = resolve
    this.reject = reject
    this.service = service
    this.method = method
    this.signal = signal
    this.token = token
  }

  succeed(response) {
    if (this.signal !== null) unwatchSignal(this.signal, this.token)
    this.resolve(response)
  }

  // A stream's head arrived: its body now answers to the same signal.
  opened(status, rawHeaders, attempts, traceId, stream) {
    const signal = this.signal
    if (signal !== null) {
      unwatchSignal(signal, this.token)
      if (signal.aborted) {
        stream.cancel()
        this.reject(cancelledError(this.service, this.method, signal.reason))
        return
      }
    }
    this.resolve(new StreamResponse(status, rawHeaders, attempts, traceId, stream, this.service, this.method, signal))
  }

  // A chat stream opened (a provider answered): its chunks now answer to the same signal.
  chatOpened(stream) {
    const signal = this.signal
    if (signal !== null) {
      unwatchSignal(signal, this.token)
      if (signal.aborted) {
        stream.cancel()
        this.reject(cancelledError(this.service, this.method, signal.reason))
        return
      }
    }
    this.resolve(new ChatStream(stream, signal))
  }

  fail(e) {
    if (this.signal === null) {
      this.reject(errorFrom(e))
      return
    }
    const signal = this.signal
    unwatchSignal(signal, this.token)
    // A cancel made by this signal: carry its reason, and the call's context.
    const cause = e.kind === 'CancelledError' && signal.aborted ? signal.reason : undefined
    this.reject(errorFrom({ ...e, service: e.service ?? this.service, method: e.method ?? this.method }, cause))
  }
}

function track(id, call) {
  pending.set(id, call)
  if (hold === null) hold = setInterval(noop, 0x7fffffff)
  if (!flushQueued) {
    flushQueued = true
    queueMicrotask(flush)
  }
}

// ---------------------------------------------------------------- events

// Clients with listeners, by the key their native sink tags events with. Weak: a client
// dropped without close() is collected (its late events are then dropped).
const listening = new Map()
let lastKey = 0
const forgetClient = new FinalizationRegistry((key) => listening.delete(key))
// EventEmitter's own bookkeeping events, which are not Harness events.
const META_EVENTS = new Set(['newListener', 'removeListener'])

// `text` is `[key,{event}]` entries joined with commas: parsed once per batch.
function dispatchEvents(text) {
  const entries = JSON.parse(`[${text}]`)
  for (let i = 0; i < entries.length; i++) {
    const [key, event] = entries[i]
    const client = listening.get(key)?.deref()
    if (client !== undefined) client[DISPATCH](event)
  }
}

// A listener that throws (or returns a promise that rejects) is reported once, with a
// process warning; it never fails a request and keeps receiving events.
function listenerFailed(client, listener, type, error) {
  const reported = client[REPORTED]
  const fn = listener.listener ?? listener
  if (reported.has(fn)) return
  reported.add(fn)
  const why = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  process.emitWarning(`a Harness event listener threw while handling '${type}': ${why} (reported once per listener; it keeps receiving events)`, {
    type: 'HarnessListenerWarning',
    code: 'HARNESS_LISTENER_FAILED',
  })
}

const DISPATCH = Symbol('dispatch')
const REPORTED = Symbol('reported')
const KEY = Symbol('key')
const ADOPT = Symbol('adopt')

// ---------------------------------------------------------------- token providers

// Runs a JS token provider for the core's fetch `id` (on the JS thread, through a weak
// threadsafe function) and settles `id` with its answer. Never throws; never puts the token
// in a message.
function runProvider(provider, id) {
  let result
  try {
    result = provider()
  } catch (e) {
    native.tokenReject(id, providerMessage(e))
    return
  }
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    Promise.resolve(result).then(
      (v) => settleToken(id, v),
      (e) => native.tokenReject(id, providerMessage(e)),
    )
  } else {
    settleToken(id, result)
  }
}

function settleToken(id, v) {
  let token, expiresIn
  try {
    if (v === null || typeof v !== 'object') {
      throw new TypeError(`expected { token, expiresIn }, got ${v === null ? 'null' : typeof v}`)
    }
    token = v.token
    expiresIn = v.expiresIn ?? null
    if (typeof token !== 'string' || token.length === 0) throw new TypeError('token: expected a non-empty string')
    if (!isWellFormed(token)) throw new TypeError('token: not well-formed Unicode (a lone surrogate)')
    // The range (a positive number of seconds, saturated) is the core's rule.
    if (expiresIn !== null && typeof expiresIn !== 'number') {
      throw new TypeError('expiresIn: expected a number of seconds')
    }
  } catch (e) {
    native.tokenReject(id, `token provider: ${providerMessage(e)}`)
    return
  }
  native.tokenResolve(id, token, expiresIn)
}

function providerMessage(e) {
  try {
    // A lone surrogate crosses as U+FFFD: fine for a message.
    return e instanceof Error ? String(e.message) : String(e)
  } catch {
    return 'the token provider failed'
  }
}

// ---------------------------------------------------------------- host adapters

// The core's step names and the JS methods that implement them.
const ADAPTER_METHODS = Object.freeze({ build_request: 'buildRequest', parse_response: 'parseResponse', parse_stream_event: 'parseStreamEvent' })

// Runs a JS adapter's method for the core's call `id` (on the JS thread, through a weak
// threadsafe function): `input` is JSON text, parsed for the method; its result (a value or a
// Promise) is stringified back. Never throws: a throw or a rejection settles `id` with
// `<Name>: <message>`, which the core turns into an error naming the adapter and the step.
function runAdapter(methods, self, id, step, input) {
  let result
  try {
    const method = methods[step]
    if (method === undefined) throw new TypeError(`no method for the step ${step}`)
    result = method.call(self, JSON.parse(input))
  } catch (e) {
    native.hostReject(id, hostErrorMessage(e))
    return
  }
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    Promise.resolve(result).then(
      (v) => settleAdapter(id, v),
      (e) => native.hostReject(id, hostErrorMessage(e)),
    )
  } else {
    settleAdapter(id, result)
  }
}

function settleAdapter(id, v) {
  let text
  try {
    // `undefined` (no answer, e.g. an event with nothing for the caller) is `null`.
    text = v === undefined ? 'null' : JSON.stringify(v)
    if (text === undefined) throw new TypeError(`expected a plain object, got ${typeof v}`)
  } catch (e) {
    native.hostReject(id, hostErrorMessage(e))
    return
  }
  native.hostResolve(id, text)
}

// `<Name>: <message>` for an Error (`TypeError: x`), else the thrown value as text.
function hostErrorMessage(e) {
  try {
    if (e instanceof Error) return `${e.name || 'Error'}: ${String(e.message)}`
    return `Error: ${String(e)}`
  } catch {
    return 'Error: the adapter failed'
  }
}

// ---------------------------------------------------------------- interceptors

/**
 * What an interceptor's `after` throws to fail the answer it saw: `retryable` sends it through
 * the retry rules as a 503 would (a route fails over); `code` becomes the InterceptorError's
 * `errorCode` (default `rejected`). Thrown from `before`, it refuses the call as any throw does.
 */
class Reject extends Error {
  constructor(message, options) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    Object.defineProperty(this, 'name', { value: 'Reject', enumerable: false, configurable: true, writable: true })
    const retryable = options?.retryable ?? false
    const code = options?.code ?? undefined
    if (typeof retryable !== 'boolean') throw new TypeError(`Reject: retryable: expected a boolean, got ${typeof retryable}`)
    if (code !== undefined && typeof code !== 'string') throw new TypeError(`Reject: code: expected a string, got ${typeof code}`)
    this.retryable = retryable
    this.code = code
  }
}

// The core's `InterceptedRequest` (snake_case JSON) as the object `before` gets.
function interceptedRequest(v) {
  return {
    name: v.name,
    level: v.level,
    method: v.method,
    service: v.service,
    endpoint: v.endpoint,
    path: v.path,
    query: v.query,
    headers: v.headers,
    body: v.body_base64 == null ? null : Buffer.from(v.body_base64, 'base64'),
    json: v.json ?? null,
    attempt: v.attempt ?? null,
    provider: v.provider ?? null,
    traceId: v.trace_id,
  }
}

// The core's `InterceptedResponse` as the object `after` gets.
function interceptedResponse(v) {
  return {
    name: v.name,
    level: v.level,
    method: v.method,
    service: v.service,
    endpoint: v.endpoint,
    status: v.status,
    headers: v.headers,
    elapsedMs: v.elapsed_ms,
    attempt: v.attempt ?? null,
    provider: v.provider ?? null,
    traceId: v.trace_id,
    body: v.body_base64 == null ? null : Buffer.from(v.body_base64, 'base64'),
    json: v.json ?? null,
  }
}

// A Map or Headers of changed headers or query parameters as the plain object the core reads.
const plainPairs = (v) => (v instanceof Map || (v !== null && typeof v === 'object' && !Array.isArray(v) && typeof v.entries === 'function') ? Object.fromEntries(v.entries()) : v)

// What `before` returned as the core's `RequestChanges` JSON text: `body` (bytes) crosses as
// `body_base64`; everything else as given, for the core to check (an unknown key, a number...).
function changesText(v) {
  if (v === undefined || v === null) return 'null'
  let out = v
  if (typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v)) {
    const { body, headers, query, ...rest } = v
    out = rest
    if (headers !== undefined) out.headers = plainPairs(headers)
    if (query !== undefined) out.query = plainPairs(query)
    if (body !== undefined && body !== null) {
      if (!ArrayBuffer.isView(body) && !(body instanceof ArrayBuffer)) {
        throw new TypeError(`body: expected a Buffer or Uint8Array, got ${typeof body}`)
      }
      const bytes = body instanceof ArrayBuffer ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
      out.body_base64 = bytes.toString('base64')
    }
  }
  const text = JSON.stringify(out)
  if (text === undefined) throw new TypeError(`expected changes as an object, got ${typeof v}`)
  return text
}

// Runs an interceptor's `before` or `after` for the core's call `id` (on the JS thread, through
// a weak threadsafe function). Never throws: a `Reject` from `after` crosses as `{"fail": ...}`,
// any other throw or rejection as `<Name>: <message>`; the core makes either an InterceptorError.
function runInterceptor(fns, id, phase, input) {
  let result
  try {
    const v = JSON.parse(input)
    result = phase === 'before' ? fns.before.call(fns.self, interceptedRequest(v)) : fns.after.call(fns.self, interceptedResponse(v))
  } catch (e) {
    interceptorThrew(id, phase, e)
    return
  }
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    Promise.resolve(result).then(
      (v) => settleInterceptor(id, phase, v),
      (e) => interceptorThrew(id, phase, e),
    )
  } else {
    settleInterceptor(id, phase, result)
  }
}

function settleInterceptor(id, phase, v) {
  let text
  try {
    // What `after` returns is ignored (`(r) => log.push(r.status)` is not a rejection).
    text = phase === 'before' ? changesText(v) : 'null'
  } catch (e) {
    native.hostReject(id, hostErrorMessage(e))
    return
  }
  native.hostResolve(id, text)
}

function interceptorThrew(id, phase, e) {
  if (phase === 'after' && e instanceof Reject) {
    let fail
    try {
      fail = JSON.stringify({ fail: { message: String(e.message), retryable: e.retryable === true, code: typeof e.code === 'string' ? e.code : null } })
    } catch (err) {
      native.hostReject(id, hostErrorMessage(err))
      return
    }
    native.hostResolve(id, fail)
    return
  }
  native.hostReject(id, hostErrorMessage(e))
}

const UNNAMED = Symbol('unnamed')

// The name `use` gives an interceptor registered without one: its function's own name (as
// Python's default is), unless that is only the key it was given under (`{ before() {} }`) or
// empty; then `interceptor-<n>`, counted per client.
function interceptorName(client, before, after) {
  const fn = typeof before === 'function' ? before : after
  const own = typeof fn === 'function' && typeof fn.name === 'string' ? fn.name.replace(/^bound /, '').replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 64) : ''
  if (own !== '' && own !== 'before' && own !== 'after' && own !== '_') return own
  client[UNNAMED] = (client[UNNAMED] ?? 0) + 1
  return `interceptor-${client[UNNAMED]}`
}


// ---------------------------------------------------------------- client

function openClient(config) {
  if (typeof config === 'string') {
    if (!isWellFormed(config)) throw hostInputError('lone_surrogate', 'config')
    const r = native.clientFromFile(config, false)
    return unwrap(r, r instanceof native.NativeClient)
  }
  if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
    const r = native.clientFromJson(jsonText(config, 'config'))
    return unwrap(r, r instanceof native.NativeClient)
  }
  throw configError('config: expected a config object or a path to a config file')
}

/**
 * A Harness client: one per process (or per config) is enough; it is safe to share.
 * It is an EventEmitter: `client.on('event', fn)` gets every event (a plain object with a `type`
 * field), `client.on('request_finished', fn)` (or any other type) only that kind.
 */
class Client extends EventEmitter {
  /**
   * @param config a config object (same shape as the YAML/JSON/TOML file) or a path to a config file.
   */
  constructor(config, adopted) {
    super()
    this._native = config === ADOPT ? adopted : openClient(config)
    this[KEY] = 0
    this[REPORTED] = new WeakSet()
  }

  /**
   * A client from a `.yaml`, `.json` or `.toml` file; with `{ watch: true }` it reloads within a
   * second of the file changing (an invalid edit is rejected with a `config_rejected` event and
   * the old config stays).
   */
  static fromFile(file, options) {
    const watch = options?.watch ?? false
    if (typeof file !== 'string') throw configError(`config: expected a path to a config file, got ${typeof file}`)
    if (!isWellFormed(file)) throw hostInputError('lone_surrogate', 'config')
    if (typeof watch !== 'boolean') throw configError(`options.watch: expected a boolean, got ${typeof watch}`)
    const r = native.clientFromFile(file, watch)
    return new Client(ADOPT, unwrap(r, r instanceof native.NativeClient))
  }

  /** Sends one request through the pipeline; resolves to a Response, rejects with a HarnessError. */
  request(opts) {
    if (opts === null || typeof opts !== 'object') return Promise.reject(configError('request: expected an options object'))
    return send(this._native, false, opts.service, opts.method ?? 'GET', opts.path, opts)
  }

  /** `request` with method GET. */
  get(service, path, options) {
    return send(this._native, false, service, 'GET', path, options ?? NO_OPTIONS)
  }

  /** `request` with method POST. */
  post(service, path, options) {
    return send(this._native, false, service, 'POST', path, options ?? NO_OPTIONS)
  }

  /** `request` with method PUT. */
  put(service, path, options) {
    return send(this._native, false, service, 'PUT', path, options ?? NO_OPTIONS)
  }

  /** `request` with method PATCH. */
  patch(service, path, options) {
    return send(this._native, false, service, 'PATCH', path, options ?? NO_OPTIONS)
  }

  /** `request` with method DELETE. */
  delete(service, path, options) {
    return send(this._native, false, service, 'DELETE', path, options ?? NO_OPTIONS)
  }

  /**
   * Sends one request and resolves at its response head to a StreamResponse whose `body` is an
   * async iterable of Buffer chunks. `stream(service, method, path, options)` or `stream(options)`.
   * An error status rejects (as `request` does).
   */
  stream(service, method, path, options) {
    if (service !== null && typeof service === 'object') {
      return send(this._native, true, service.service, service.method ?? 'GET', service.path, service)
    }
    return send(this._native, true, service, method, path, options ?? NO_OPTIONS)
  }

  /**
   * One chat answer on an `openai-compatible` route: `chat(route, { messages, ...params }, options)`.
   * The core picks the provider, fails over and prices the answer; resolves to a ChatResponse.
   * `options`: `headers`, `timeoutMs`, `traceparent`, `principal`, `signal`.
   */
  chat(route, request, options) {
    return sendChat(this._native, false, route, request, options ?? NO_OPTIONS)
  }

  /**
   * A streamed chat answer: resolves, once a provider answers, to a ChatStream, an async
   * iterable of `delta`, `restart` and `done` chunks. Same arguments as `chat`.
   */
  chatStream(route, request, options) {
    return sendChat(this._native, true, route, request, options ?? NO_OPTIONS)
  }

  /**
   * Embeds `inputs` (non-empty strings) on a route of `kind: embeddings`: one vector per input, in
   * order, split into batches per the providers' `max_batch`, each batch routed (failover, breakers,
   * cost). Resolves to an EmbedResponse whose `vectors` are Float32Arrays over one ArrayBuffer.
   * `options`: `dimensions`, `headers`, `timeoutMs`, `traceparent`, `principal`, `signal`.
   */
  embed(route, inputs, options) {
    return sendEmbed(this._native, route, inputs, options ?? NO_OPTIONS)
  }

  /**
   * Registers a host adapter under `name` (a provider with `adapter: name` reaches it): an object
   * with `buildRequest`, `parseResponse` and `parseStreamEvent`, functions or async functions
   * taking and returning plain objects (the shapes are the core's, see README.md). A second
   * registration under a name replaces the first.
   * @throws ConfigError naming a missing method, or for a bad or built-in name.
   */
  registerAdapter(name, adapter) {
    name = reqString(name, 'name', 'registerAdapter')
    if (adapter === null || typeof adapter !== 'object' && typeof adapter !== 'function') {
      throw configError('registerAdapter: expected an object with buildRequest, parseResponse and parseStreamEvent')
    }
    const methods = {}
    for (const [step, method] of Object.entries(ADAPTER_METHODS)) {
      const fn = adapter[method]
      if (typeof fn !== 'function') throw configError(`registerAdapter: adapter.${method}: expected a function, got ${fn === null ? 'null' : typeof fn}`)
      methods[step] = fn
    }
    const error = this._native.registerAdapter(name, (id, step, input) => runAdapter(methods, adapter, id, step, input))
    if (error) throw nativeError(error)
  }

  /**
   * Registers an interceptor: `{ name, before, after, services, level, wantBody }`. `before(request)`
   * may return changes (`{ headers, query, path, json, body, secret }`), `after(response)` may throw
   * a `Reject`; either may be async. Runs on the JS thread, within `interceptors.timeout_ms`.
   * Returns the name (given, or the function's own name, or `interceptor-<n>`); a second
   * registration under a name replaces the first in its place.
   * @throws ConfigError for a bad name, level or service list, or neither function.
   */
  use(interceptor) {
    if (interceptor === null || typeof interceptor !== 'object') {
      throw configError('use: expected an object with before and/or after (functions)')
    }
    const { before, after } = interceptor
    for (const [key, fn] of [['before', before], ['after', after]]) {
      if (fn !== undefined && fn !== null && typeof fn !== 'function') throw configError(`use.${key}: expected a function, got ${typeof fn}`)
    }
    const name = interceptor.name === undefined ? interceptorName(this, before, after) : reqString(interceptor.name, 'name', 'use')
    const level = optString(interceptor.level, 'level', 'use')
    let services
    if (interceptor.services !== undefined && interceptor.services !== null) {
      if (!Array.isArray(interceptor.services)) throw configError(`use.services: expected an array of service or route names, got ${typeof interceptor.services}`)
      services = interceptor.services.map((s, i) => reqString(s, `services[${i}]`, 'use'))
    }
    const wantBody = interceptor.wantBody ?? false
    if (typeof wantBody !== 'boolean') throw configError(`use.wantBody: expected a boolean, got ${typeof wantBody}`)
    const fns = { before, after, self: interceptor }
    const ask = (id, phase, input) => runInterceptor(fns, id, phase, input)
    const error = this._native.addInterceptor(name, level, services, typeof before === 'function', typeof after === 'function', wantBody, ask)
    if (error) throw nativeError(error)
    return name
  }

  /** Removes the interceptor `name` (calls already in it finish); whether there was one. */
  removeInterceptor(name) {
    return this._native.removeInterceptor(reqString(name, 'name', 'removeInterceptor'))
  }

  /**
   * Sets a provider's weight on a route at runtime (0 stops its traffic), validated and versioned
   * as a reload; returns the new `configVersion`.
   * @throws ConfigError for an unknown route or provider.
   */
  setWeight(route, provider, weight) {
    route = routeName(route)
    if (typeof provider !== 'string') throw configError(`provider: expected a string, got ${provider === undefined ? 'nothing' : typeof provider}`)
    if (!isWellFormed(provider)) throw hostInputError('lone_surrogate', 'provider')
    if (!Number.isInteger(weight) || weight < 0 || weight > 0xffffffff) {
      throw configError(`weight: expected an integer from 0 to 4294967295, got ${typeof weight === 'number' ? weight : typeof weight}`)
    }
    const r = this._native.setWeight(route, provider, weight)
    return unwrap(r, typeof r === 'string')
  }

  /**
   * Replaces the config (an object, or a path to a config file) if it is valid, and returns the
   * new `configVersion`. Throws a ConfigError naming the field otherwise; the old config stays.
   */
  reload(config) {
    if (typeof config === 'string') {
      if (!isWellFormed(config)) throw hostInputError('lone_surrogate', 'config')
      const r = this._native.reloadPath(config)
      return unwrap(r, typeof r === 'string')
    }
    if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
      const r = this._native.reloadJson(jsonText(config, 'config'))
      return unwrap(r, typeof r === 'string')
    }
    throw configError('config: expected a config object or a path to a config file')
  }

  /** A short hash of the active config (the same config gives the same version in every language). */
  get configVersion() {
    return this._native.configVersion()
  }

  /** The Prometheus text exposition of this client's metrics. */
  metrics() {
    return this._native.metrics()
  }

  /** The breaker state (`closed`, `open`, `half_open`) for (service, endpoint, method). */
  breakerState(service, method, path, endpoint) {
    return this._native.breakerState(
      reqString(service, 'service'),
      reqString(method, 'method'),
      reqString(path, 'path'),
      optString(endpoint, 'endpoint') ?? null,
    )
  }

  /**
   * A service's bulkhead limit now (`max_concurrency`, or where `bulkhead.adaptive` has moved it).
   * @throws ConfigError for an unknown service.
   */
  bulkheadLimit(service) {
    const r = this._native.bulkheadLimit(reqString(service, 'service'))
    return unwrap(r, typeof r === 'number')
  }

  /** Bulkhead permits currently held on a service. */
  bulkheadInUse(service) {
    const r = this._native.bulkheadInUse(reqString(service, 'service'))
    return unwrap(r, typeof r === 'number')
  }

  /**
   * Makes `provider` the token source of `service` (whose `auth.type` is `callback`): a function,
   * sync or async, returning `{ token, expiresIn }` (`expiresIn` in seconds; omit it for a token
   * that does not expire). The core calls it once per refresh, however many requests wait; a
   * provider that throws or rejects gives those requests an AuthError with its message.
   */
  setTokenProvider(service, provider) {
    service = reqString(service, 'service')
    if (typeof provider !== 'function') throw configError('setTokenProvider: expected a function returning { token, expiresIn }')
    const error = this._native.setTokenProvider(service, (id) => runProvider(provider, id))
    if (error) throw nativeError(error)
  }

  /**
   * From now on answers `service`'s requests that match `method` (`''` or `'*'`: any) and `path`
   * (a template relative to the service's base URL, `/orders/{id}`, or `'*'`) with `response`:
   * `{ status = 200, json, body, headers, latencyMs = 0 }`, `{id}` captured from the path and
   * substituted into the answer's strings. The latest mock is tried first; the whole pipeline
   * (timeouts, retries, breaker, metrics, events) still runs, and a request no mock matches
   * rejects with a ConfigError naming its method and path. For unit tests: nothing is sent.
   * @throws ConfigError naming the field (an unknown service, a path not starting with `/`...).
   */
  mock(service, method, path, response) {
    service = reqString(service, 'service', 'mock')
    method = reqString(method, 'method', 'mock')
    path = reqString(path, 'path', 'mock')
    const r = response ?? NO_OPTIONS
    if (typeof r !== 'object' || Array.isArray(r)) throw configError('mock.response: expected an object { status, json, body, headers, latencyMs }')
    const status = r.status ?? 200
    if (!Number.isInteger(status) || status < 0 || status > 0xffffffff) {
      throw configError(`mock.status: expected an HTTP status from 200 to 999, got ${typeof status === 'number' ? status : typeof status}`)
    }
    const json = r.json === undefined ? undefined : jsonText(r.json, 'mock.json')
    const body = optString(r.body, 'body', 'mock')
    const headers = flatPairs(r.headers, 'headers', 'mock')
    const latencyMs = r.latencyMs ?? 0
    if (typeof latencyMs !== 'number') throw configError(`mock.latencyMs: expected a number, got ${typeof latencyMs}`)
    const error = this._native.mock(service, method, path, status, json, body, headers, latencyMs)
    if (error) throw nativeError(error)
  }

  /** Removes the mocks set with `mock()` on `service` (or on every service): it reaches the network again. */
  clearMocks(service) {
    const error = this._native.clearMocks(optString(service, 'service', 'clearMocks') ?? null)
    if (error) throw nativeError(error)
  }

  /**
   * Drops the stored answers of `name`, a service or a route (its HTTP cache entries, or its exact
   * chat answers), or of every service and route when left out; returns how many were dropped.
   * The next call fetches again.
   * @throws ConfigError for an unknown name.
   */
  cacheClear(name) {
    const r = this._native.cacheClear(optString(name, 'name', 'cacheClear') ?? null)
    return unwrap(r, typeof r === 'number')
  }

  /** Delivers this client's queued log records and events now (listeners run before it returns). */
  flush() {
    this._native.flush()
    if (this[KEY] !== 0) drain()
  }

  /** Refuses new requests; requests in flight finish or are cancelled by their callers. Queued events are delivered. */
  close() {
    this._native.close()
    if (this[KEY] !== 0) drain()
  }

  /** Whether `close()` was called. */
  get closed() {
    return this._native.isClosed()
  }

  toString() {
    return '[Client harness-sdk]'
  }

  // EventEmitter: the native event sink is added with the first listener and paused without any.
  addListener(name, listener) {
    super.addListener(name, listener)
    this.#listeners()
    return this
  }

  on(name, listener) {
    return this.addListener(name, listener)
  }

  once(name, listener) {
    super.once(name, listener)
    this.#listeners()
    return this
  }

  prependListener(name, listener) {
    super.prependListener(name, listener)
    this.#listeners()
    return this
  }

  prependOnceListener(name, listener) {
    super.prependOnceListener(name, listener)
    this.#listeners()
    return this
  }

  removeListener(name, listener) {
    super.removeListener(name, listener)
    this.#listeners()
    return this
  }

  off(name, listener) {
    return this.removeListener(name, listener)
  }

  removeAllListeners(name) {
    if (name === undefined) super.removeAllListeners()
    else super.removeAllListeners(name)
    this.#listeners()
    return this
  }

  // Starts or pauses the native sink to match whether any Harness event has a listener.
  #listeners() {
    let any = false
    for (const name of this.eventNames()) {
      if (!META_EVENTS.has(name)) {
        any = true
        break
      }
    }
    const key = this[KEY]
    if (any && (key === 0 || !listening.has(key))) {
      let k = key
      if (k === 0) {
        k = this[KEY] = ++lastKey
        forgetClient.register(this, k)
      }
      listening.set(k, new WeakRef(this))
      this._native.listen(queue, k)
    } else if (!any && key !== 0 && listening.has(key)) {
      listening.delete(key)
      this._native.unlisten()
    }
  }

  // Calls the listeners of 'event' and of the event's own type, each on its own.
  [DISPATCH](event) {
    this.#call('event', event)
    this.#call(event.type, event)
  }

  #call(name, event) {
    if (this.listenerCount(name) === 0) return
    for (const listener of this.rawListeners(name)) {
      try {
        const r = listener.call(this, event)
        if (r !== undefined && r !== null && typeof r.then === 'function') {
          r.then(undefined, (e) => listenerFailed(this, listener, event.type, e))
        }
      } catch (e) {
        listenerFailed(this, listener, event.type, e)
      }
    }
  }
}

// The core's read-only views, one method each (`routingState`, `credentialsState`, `breakerDetails`,
// `breakers`, `describe`, ...): types.d.ts's `ClientViews`, generated from the same list.
for (const spec of native.viewSpecs()) {
  Object.defineProperty(Client.prototype, camelCase(spec.name), { value: viewMethod(spec), writable: true, configurable: true })
}

// ---------------------------------------------------------------- the idempotent receiver

// A handler's result as the text the core stores: the same JSON path as request bodies
// (`undefined`, which JSON cannot carry, is stored as `null`).
function resultText(value) {
  return value === undefined ? 'null' : jsonText(value, 'result')
}

function receiverString(v, field) {
  if (typeof v !== 'string') throw configError(`${field}: expected a string, got ${v === undefined ? 'nothing' : typeof v}`)
  if (!isWellFormed(v)) throw hostInputError('lone_surrogate', field)
  return v
}

const NATIVE = Symbol('native')

/**
 * The idempotent receiver: a handler runs at most once per message key, across every process
 * sharing its store (Redis with `redis_url`, else this process's memory). Every decision
 * (claims, leases, fencing, the TTL, what happens when the store is down) is the core's.
 */
class Idempotency {
  #native

  /**
   * @param config `{ prefix, ttl_ms, lease_ms, retry_failed, redis_url, on_store_down, signature }`
   * (every key optional; none at all keeps state in this process's memory).
   */
  constructor(config) {
    if (config === undefined || config === null) config = {}
    if (typeof config !== 'object' || Array.isArray(config)) throw configError('config: expected a receiver config object')
    const r = native.idempotencyFromJson(jsonText(config, 'config'))
    this.#native = unwrap(r, r instanceof native.NativeIdempotency)
  }

  /** `{prefix}{tenant}:{eventType}:{msgId}`; a ConfigError names a bad part. */
  key(tenant, eventType, msgId) {
    const r = this.#native.key(
      receiverString(tenant, 'tenant'),
      receiverString(eventType, 'event_type'),
      receiverString(msgId, 'msg_id'),
    )
    return unwrap(r, typeof r === 'string')
  }

  /**
   * Claims `key` for this delivery. Resolves to `{ done: true, result }` when the key was
   * processed already (do not run the handler), or to a `Lease` (`done: false`): run the
   * handler, then `await lease.complete(value)` or `await lease.fail()`. Rejects with
   * `DuplicateInFlightError` while another delivery holds the key, or a `HarnessError` with
   * `errorCode` `failed_before` (`retry_failed: false`) or `store_unavailable`.
   */
  claim(key) {
    try {
      key = receiverString(key, 'key')
    } catch (e) {
      return Promise.reject(e)
    }
    const id = nextId()
    this.#native.claim(queue, id, key)
    return receipt(id, this)
  }

  /**
   * Runs `handler` (sync or async) at most once for `key` and resolves to its value; a
   * duplicate of a processed key resolves to the stored value (JSON, parsed) without running
   * it. A handler that throws marks the key failed (a redelivery may run it again with
   * `retry_failed`) and its error is re-thrown.
   */
  async run(key, handler) {
    if (typeof handler !== 'function') throw configError('run: expected a handler function')
    const claim = await this.claim(key)
    if (claim.done) return claim.result
    let value, text
    try {
      value = await handler()
      text = resultText(value)
    } catch (e) {
      await claim.fail().catch(noop)
      throw e
    }
    await claim[COMPLETE](text)
    return value
  }

  /**
   * Checks a signed delivery: `signature` is the hex HMAC-SHA256 of `${timestamp}.${body}`
   * (optionally `sha256=`-prefixed), `timestamp` Unix seconds within `signature.max_skew_ms`.
   * Throws `AuthError` (`errorCode` `bad_signature` or `stale_signature`); run nothing then.
   */
  verify(timestamp, body, signature) {
    const error = this.#native.verify(
      receiverString(timestamp, 'timestamp'),
      bodyBytes(body, 'body'),
      receiverString(signature, 'signature'),
    )
    if (error) throw nativeError(error)
  }

  /** The hex signature `verify` expects for `timestamp` and `body` (for senders and tests). */
  sign(timestamp, body) {
    const r = this.#native.sign(receiverString(timestamp, 'timestamp'), bodyBytes(body, 'body'))
    return unwrap(r, typeof r === 'string')
  }

  /** `harness_idempotency_total{outcome}`, Prometheus text. */
  metricsText() {
    return this.#native.metricsText()
  }

  toString() {
    // The core's description: prefix and backend; a configured secret shows as `***`.
    return `[${this.#native.describe()}]`
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString()
  }

  get [NATIVE]() {
    return this.#native
  }
}

const COMPLETE = Symbol('complete')

/** A claim to run the handler for `key`: finish it with `complete(value)` or `fail()`, once. */
class Lease {
  #idem
  #native

  constructor(idem, nativeLease) {
    this.#idem = idem
    this.#native = nativeLease
    /** Always false: the handler should run (a processed key resolves to `{ done: true }`). */
    this.done = false
  }

  /** The claimed key. */
  get key() {
    return this.#native.key
  }

  /** False when the store was down and `on_store_down: 'process'` let this run without dedup. */
  get deduplicated() {
    return this.#native.deduplicated
  }

  /**
   * Stores the handler's result (serialised as JSON: duplicates get it parsed back). Rejects
   * with `errorCode` `lease_lost` when the lease expired and another delivery took the key
   * over (this result is not stored).
   */
  complete(value) {
    let text
    try {
      text = resultText(value)
    } catch (e) {
      return Promise.reject(e)
    }
    return this[COMPLETE](text)
  }

  [COMPLETE](text) {
    const id = nextId()
    const error = this.#idem[NATIVE].complete(queue, id, this.#native, text)
    if (error) return Promise.reject(nativeError(error))
    return receipt(id, this.#idem)
  }

  /** Marks the claim failed: with `retry_failed` (the default) a redelivery runs the handler again. */
  fail() {
    const id = nextId()
    this.#idem[NATIVE].fail(queue, id, this.#native)
    return receipt(id, this.#idem)
  }

  toString() {
    return `[Lease ${this.key}]`
  }
}

function receipt(id, idem) {
  return new Promise((resolve, reject) => track(id, new PendingReceipt(resolve, reject, idem)))
}

// One receiver call in flight (claim, complete, fail).
class PendingReceipt {
  constructor(resolve, reject, idem) {
    this.resolve = resolve
    this.reject = reject
    this.idem = idem
  }

  leased(nativeLease) {
    this.resolve(new Lease(this.idem, nativeLease))
  }

  stored(text) {
    let result
    try {
      result = JSON.parse(text)
    } catch (e) {
      this.reject(new HarnessError('the stored result is not JSON text', { cause: e }))
      return
    }
    this.resolve({ done: true, result })
  }

  succeed(v) {
    this.resolve(v)
  }

  fail(e) {
    this.reject(errorFrom(e))
  }
}

/** Every error class name, base first. */
const ERROR_NAMES = native.errorNames()

// Plain names and one `...require()` spread: the forms Node's ESM loader reads a CommonJS
// module's exports from, so `index.mjs` re-exports them all without listing them.
module.exports = {
  Client,
  Response,
  StreamResponse,
  ChatResponse,
  ChatStream,
  EmbedResponse,
  Idempotency,
  Lease,
  Reject,
  ERROR_NAMES,
  ...require('./errors'),
}
