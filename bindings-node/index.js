'use strict'
// harness-sdk: the public Node API. Translation only: it builds request objects for the
// native module, rebuilds errors as classes and ties AbortSignals to native cancellation.
// Every behaviour (timeouts, retries, breaking, isolation) lives in harness-core.

const path = require('node:path')

function loadNative() {
  const file = path.join(__dirname, 'harness-sdk.node')
  try {
    return require(file)
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND') {
      throw new Error(`harness-sdk: the native module is not built (${file}); run \`node scripts/build.js\` in the package (it needs a Rust toolchain)`)
    }
    throw e
  }
}

const native = loadNative()

const ERROR_MARKER = native.errorMarker()

// ---------------------------------------------------------------- errors

/** Base class of every Harness error; `code` is the class name (the error kind). */
class HarnessError extends Error {
  constructor(message, fields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause })
    Object.defineProperty(this, 'name', { value: new.target.name, enumerable: false, configurable: true, writable: true })
    this.code = new.target.name
    this.service = fields.service ?? undefined
    this.endpoint = fields.endpoint ?? undefined
    this.method = fields.method ?? undefined
    this.attempts = fields.attempts ?? 0
    this.status = fields.status ?? undefined
    this.errorCode = fields.errorCode ?? undefined
    this.retryAfterMs = fields.retryAfterMs ?? undefined
    this.traceId = fields.traceId ?? undefined
    this.phase = fields.phase ?? undefined
    // The raw downstream body is data, not context: kept off the enumerable fields.
    Object.defineProperty(this, 'body', { value: fields.body ?? undefined, enumerable: false, configurable: true, writable: true })
  }
}

/** A timeout expired; `phase` is `connect`, `response` or `total`. */
class TimeoutError extends HarnessError {}
/** The circuit breaker for (service, endpoint, method) is open. */
class CircuitOpenError extends HarnessError {}
/** The service's bulkhead had no free permit. */
class BulkheadFullError extends HarnessError {}
/** Rate limited (locally or by the upstream); see `retryAfterMs`. */
class RateLimitedError extends HarnessError {}
/** The upstream answered with an error status; see `status`, `errorCode` and `body`. */
class HttpStatusError extends HarnessError {}
/** Authentication failed (401/403 or a credential provider failure). */
class AuthError extends HarnessError {}
/** The response did not match its schema. */
class SchemaError extends HarnessError {}
/** The connection could not be made (refused, reset, DNS). */
class ConnectError extends HarnessError {}
/** The request was cancelled (an AbortSignal fired). */
class CancelledError extends HarnessError {}
/** No provider of a route is healthy. */
class NoHealthyProviderError extends HarnessError {}
/** Bad config or bad input; the message starts with the field path. */
class ConfigError extends HarnessError {}
/** The server answered, but not with valid HTTP (bad status line, too many headers, conflicting lengths, a final 101). */
class ProtocolError extends HarnessError {}
/** The response was larger than the service's `limits.max_response_bytes`. */
class ResponseTooLargeError extends HarnessError {}

const errorClasses = {
  HarnessError,
  TimeoutError,
  CircuitOpenError,
  BulkheadFullError,
  RateLimitedError,
  HttpStatusError,
  AuthError,
  SchemaError,
  ConnectError,
  CancelledError,
  NoHealthyProviderError,
  ConfigError,
  ProtocolError,
  ResponseTooLargeError,
}

function errorFrom(raw, cause) {
  const Cls = errorClasses[raw.name] || HarnessError
  return new Cls(raw.message, {
    service: raw.service,
    endpoint: raw.endpoint,
    method: raw.method,
    attempts: raw.attempts,
    status: raw.status,
    errorCode: raw.code,
    retryAfterMs: raw.retryAfterMs,
    traceId: raw.traceId,
    phase: raw.phase,
    body: raw.body,
    cause,
  })
}

function configError(message) {
  return new ConfigError(message)
}

// The core's error for a value JS cannot hand over faithfully (`lone_surrogate`, `too_deep`, `non_finite`).
function hostInputError(kind, field) {
  return errorFrom(native.hostInputError(kind, field))
}

// Strings cross napi as UTF-8, which would replace a lone surrogate with U+FFFD silently.
const LONE_SURROGATE = /\p{Surrogate}/u
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function' ? (s) => s.isWellFormed() : (s) => !LONE_SURROGATE.test(s)

// Runs a synchronous native call, turning a marked native error back into its class.
function callNative(fn) {
  try {
    return fn()
  } catch (e) {
    const msg = e && typeof e.message === 'string' ? e.message : ''
    const at = msg.indexOf(ERROR_MARKER)
    if (at >= 0) {
      let raw
      try {
        raw = JSON.parse(msg.slice(at + ERROR_MARKER.length))
      } catch {
        raw = { name: 'HarnessError', message: msg.slice(at + ERROR_MARKER.length) }
      }
      throw errorFrom(raw)
    }
    // A napi type conversion failure: the wrapper checks types first, so this names no field.
    throw configError(`request: ${msg}`)
  }
}

// ---------------------------------------------------------------- responses

/** A buffered response. */
class Response {
  constructor(status, rawHeaders, body, elapsedMs, attempts, traceId) {
    /** The HTTP status code. */
    this.status = status
    /** The response body. */
    this.body = body
    /** Wall time of the whole call (all attempts), in milliseconds. */
    this.elapsedMs = elapsedMs
    /** Attempts made. */
    this.attempts = attempts
    /** The W3C trace id of the call. */
    this.traceId = traceId
    // Header text as sent by the native side (`name\0value\0...`), split on first use.
    this._rawHeaders = rawHeaders
    this._headers = undefined
  }

  /** Response headers by lower-case name, repeated ones joined with ", "; `getAll(name)` lists each value. */
  get headers() {
    if (this._headers === undefined) this._headers = new ResponseHeaders(this._rawHeaders)
    return this._headers
  }

  /** True for a 2xx status. */
  get ok() {
    return this.status >= 200 && this.status < 300
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

// ---------------------------------------------------------------- requests

function optString(v, field) {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw configError(`request.${field}: expected a string, got ${typeof v}`)
  if (!isWellFormed(v)) throw hostInputError('lone_surrogate', `request.${field}`)
  return v
}

function reqString(v, field) {
  if (typeof v !== 'string') throw configError(`request.${field}: expected a string, got ${v === undefined ? 'nothing' : typeof v}`)
  if (!isWellFormed(v)) throw hostInputError('lone_surrogate', `request.${field}`)
  return v
}

// Accepts a plain object, a Map, a Headers/URLSearchParams or an array of pairs; returns flat pairs.
function flatPairs(v, field) {
  if (v === undefined || v === null) return undefined
  const out = []
  const push = (k, val, where) => {
    if (Array.isArray(val)) {
      for (const item of val) push(k, item, where)
      return
    }
    if (val === undefined || val === null) return
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean') {
      throw configError(`request.${field}.${where}: expected a string, number or boolean`)
    }
    const name = String(k)
    // The name is not repeated in this message: it is the malformed part.
    if (!isWellFormed(name) || (typeof val === 'string' && !isWellFormed(val))) {
      throw hostInputError('lone_surrogate', `request.${field}`)
    }
    out.push(name, String(val))
  }
  if (Array.isArray(v)) {
    v.forEach((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw configError(`request.${field}[${i}]: expected a [name, value] pair`)
      push(pair[0], pair[1], String(pair[0]))
    })
  } else if (typeof v === 'object' && typeof v[Symbol.iterator] === 'function' && typeof v.entries === 'function') {
    for (const [k, val] of v.entries()) push(k, val, String(k))
  } else if (typeof v === 'object') {
    for (const k of Object.keys(v)) push(k, v[k], k)
  } else {
    throw configError(`request.${field}: expected an object of name/value pairs`)
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

function bodyBytes(b) {
  if (typeof b === 'string') {
    if (!isWellFormed(b)) throw hostInputError('lone_surrogate', 'request.body')
    return Buffer.from(b, 'utf8')
  }
  if (Buffer.isBuffer(b)) return b
  if (ArrayBuffer.isView(b)) return Buffer.from(b.buffer, b.byteOffset, b.byteLength)
  if (b instanceof ArrayBuffer) return Buffer.from(b)
  throw configError('request.body: expected a Buffer, Uint8Array, ArrayBuffer or string')
}

const NO_OPTIONS = Object.freeze({})

// Checks and translates one request's fields, stages it natively and returns its promise.
// `opts` carries every field but service, method and path (already taken from it or the shortcut).
function send(nativeClient, service, method, path, opts) {
  let endpoint, query, headers, idempotencyKey, traceparent, json, body, timeoutMs
  try {
    service = reqString(service, 'service')
    method = reqString(method, 'method')
    path = reqString(path, 'path')
    endpoint = optString(opts.endpoint, 'endpoint')
    query = flatPairs(opts.query, 'query')
    headers = flatPairs(opts.headers, 'headers')
    idempotencyKey = optString(opts.idempotencyKey, 'idempotencyKey')
    traceparent = optString(opts.traceparent, 'traceparent')
    if (opts.json !== undefined) json = jsonText(opts.json, 'json')
    if (opts.body !== undefined && opts.body !== null) body = bodyBytes(opts.body)
    timeoutMs = opts.timeoutMs
    if (timeoutMs === null) timeoutMs = undefined
    if (timeoutMs !== undefined && typeof timeoutMs !== 'number') {
      throw configError(`request.timeoutMs: expected a number, got ${typeof timeoutMs}`)
    }
  } catch (e) {
    return Promise.reject(e)
  }
  const signal = opts.signal
  let token = null
  if (signal !== undefined && signal !== null) {
    if (typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
      return Promise.reject(configError('request.signal: expected an AbortSignal'))
    }
    if (signal.aborted) return Promise.reject(cancelledError(service, method, signal.reason))
    token = new native.CancelToken()
  }
  const id = nextId()
  let error
  try {
    error = nativeClient.request(
      queue, id, service, method, path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, token,
    )
  } catch (e) {
    // A napi conversion failure; the checks above make this unreachable for typed input.
    return Promise.reject(configError(`request: ${e.message}`))
  }
  if (error) return Promise.reject(errorFrom(error))
  return new Promise((resolve, reject) => {
    if (token !== null) watchSignal(signal, token)
    track(id, new PendingCall(resolve, reject, service, method, signal ?? null, token))
  })
}

// One 'abort' listener per signal, however many requests share it (a fan-out would otherwise
// pass the listener limit and warn): it cancels the tokens of the signal's pending requests.
const signalWatches = new WeakMap()

class SignalWatch {
  constructor(signal) {
    this.tokens = new Set()
    this.onAbort = () => {
      signalWatches.delete(signal)
      for (const token of this.tokens) token.cancel()
      this.tokens.clear()
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

// Requests in flight, by id. Requests made in one tick are staged natively and started together
// by one flush (a microtask); finished ones come back in batches behind one weak threadsafe
// function. While any request is pending a plain timer holds the event loop, so an idle process
// (closed client or not) exits on its own.
const pending = new Map()
let lastId = 0
let hold = null
let flushQueued = false
const noop = () => {}
const FIELDS = native.completionFields()

function flush() {
  flushQueued = false
  queue.flush()
}

// Copies a body out of the batch's shared buffer (small ones land in Node's Buffer pool),
// so a response kept alive does not keep the whole batch alive.
function bodyFrom(bodies, start, len) {
  const body = Buffer.allocUnsafe(len)
  bodies.copy(body, 0, start, start + len)
  return body
}

const queue = new native.CompletionQueue(() => {
  const { meta, text, bodies, large, errors } = queue.drain()
  let at = 0
  let bodyAt = 0
  let nLarge = 0
  let nError = 0
  for (let i = 0; i < meta.length; i += FIELDS) {
    const id = meta[i]
    const status = meta[i + 1]
    const call = pending.get(id)
    if (call !== undefined) pending.delete(id)
    if (status === 0) {
      const error = errors[nError++]
      if (call !== undefined) call.fail(error)
      continue
    }
    const headersLen = meta[i + 4]
    const traceLen = meta[i + 5]
    const bodyLen = meta[i + 6]
    let body
    if (bodyLen < 0) {
      body = large[nLarge++]
    } else {
      body = bodyFrom(bodies, bodyAt, bodyLen)
      bodyAt += bodyLen
    }
    const headersEnd = at + headersLen
    const traceEnd = headersEnd + traceLen
    if (call !== undefined) {
      call.succeed(new Response(status, text.slice(at, headersEnd), body, meta[i + 2], meta[i + 3], text.slice(headersEnd, traceEnd)))
    }
    at = traceEnd
  }
  if (pending.size === 0 && hold !== null) {
    clearInterval(hold)
    hold = null
  }
})

function nextId() {
  do {
    lastId = (lastId + 1) >>> 0
  } while (lastId === 0 || pending.has(lastId))
  return lastId
}

// One request in flight: how to settle its promise, and its AbortSignal and cancel token (if any).
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

  fail(e) {
    if (this.signal === null) {
      this.reject(errorFrom(e))
      return
    }
    const signal = this.signal
    unwatchSignal(signal, this.token)
    // A cancel made by this signal: carry its reason, and the call's context.
    const cause = e.name === 'CancelledError' && signal.aborted ? signal.reason : undefined
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

// ---------------------------------------------------------------- client

/** A Harness client: one per process (or per config) is enough; it is safe to share. */
class Client {
  /**
   * @param config a config object (same shape as the YAML/JSON/TOML file) or a path to a config file.
   */
  constructor(config) {
    if (typeof config === 'string') {
      if (!isWellFormed(config)) throw hostInputError('lone_surrogate', 'config')
      this._native = callNative(() => native.NativeClient.fromPath(config))
    } else if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
      const json = jsonText(config, 'config')
      this._native = callNative(() => native.NativeClient.fromJson(json))
    } else {
      throw configError('config: expected a config object or a path to a config file')
    }
  }

  /** Sends one request through the pipeline; resolves to a Response, rejects with a HarnessError. */
  request(opts) {
    if (opts === null || typeof opts !== 'object') return Promise.reject(configError('request: expected an options object'))
    return send(this._native, opts.service, opts.method ?? 'GET', opts.path, opts)
  }

  /** `request` with method GET. */
  get(service, path, options) {
    return send(this._native, service, 'GET', path, options ?? NO_OPTIONS)
  }

  /** `request` with method POST. */
  post(service, path, options) {
    return send(this._native, service, 'POST', path, options ?? NO_OPTIONS)
  }

  /** `request` with method PUT. */
  put(service, path, options) {
    return send(this._native, service, 'PUT', path, options ?? NO_OPTIONS)
  }

  /** `request` with method PATCH. */
  patch(service, path, options) {
    return send(this._native, service, 'PATCH', path, options ?? NO_OPTIONS)
  }

  /** `request` with method DELETE. */
  delete(service, path, options) {
    return send(this._native, service, 'DELETE', path, options ?? NO_OPTIONS)
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

  /** Bulkhead permits currently held on a service. */
  bulkheadInUse(service) {
    reqString(service, 'service')
    return callNative(() => this._native.bulkheadInUse(service))
  }

  /** Refuses new requests; requests in flight finish or are cancelled by their callers. */
  close() {
    this._native.close()
  }

  /** Whether `close()` was called. */
  get closed() {
    return this._native.isClosed()
  }

  toString() {
    return '[Client harness-sdk]'
  }
}


module.exports = {
  Client,
  Response,
  ...errorClasses,
  /** Every error class name, base first. */
  ERROR_NAMES: native.errorNames(),
}
