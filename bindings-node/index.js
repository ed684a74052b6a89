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
  constructor(raw) {
    /** The HTTP status code. */
    this.status = raw.status
    /** The response body. */
    this.body = raw.body
    /** Wall time of the whole call (all attempts), in milliseconds. */
    this.elapsedMs = raw.elapsedMs
    /** Attempts made. */
    this.attempts = raw.attempts
    /** The W3C trace id of the call. */
    this.traceId = raw.traceId
    // Header text as sent by the native side (`name\0value\0...`), split on first use.
    this._rawHeaders = raw.headers
    this._headers = undefined
  }

  /** Response headers, lower-case names; repeated headers joined with ", ". */
  get headers() {
    if (this._headers === undefined) {
      const h = {}
      const raw = this._rawHeaders
      if (raw.length > 0) {
        const parts = raw.split('\0')
        for (let i = 0; i + 1 < parts.length; i += 2) {
          const k = parts[i]
          h[k] = h[k] === undefined ? parts[i + 1] : `${h[k]}, ${parts[i + 1]}`
        }
      }
      this._headers = h
    }
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

// ---------------------------------------------------------------- requests

function optString(v, field) {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw configError(`request.${field}: expected a string, got ${typeof v}`)
  return v
}

function reqString(v, field) {
  if (typeof v !== 'string') throw configError(`request.${field}: expected a string, got ${v === undefined ? 'nothing' : typeof v}`)
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
    out.push(String(k), String(val))
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

function toNativeRequest(opts) {
  if (opts === null || typeof opts !== 'object') throw configError('request: expected an options object')
  const req = {
    service: reqString(opts.service, 'service'),
    method: reqString(opts.method ?? 'GET', 'method'),
    path: reqString(opts.path, 'path'),
    endpoint: optString(opts.endpoint, 'endpoint'),
    query: flatPairs(opts.query, 'query'),
    headers: flatPairs(opts.headers, 'headers'),
    idempotencyKey: optString(opts.idempotencyKey, 'idempotencyKey'),
    traceparent: optString(opts.traceparent, 'traceparent'),
  }
  if (opts.json !== undefined) {
    let text
    try {
      text = JSON.stringify(opts.json)
    } catch (e) {
      throw configError(`request.json: not serialisable as JSON: ${e.message}`)
    }
    if (text === undefined) throw configError('request.json: not serialisable as JSON')
    req.json = text
  }
  if (opts.body !== undefined && opts.body !== null) {
    const b = opts.body
    if (typeof b === 'string') req.body = Buffer.from(b, 'utf8')
    else if (Buffer.isBuffer(b)) req.body = b
    else if (ArrayBuffer.isView(b)) req.body = Buffer.from(b.buffer, b.byteOffset, b.byteLength)
    else if (b instanceof ArrayBuffer) req.body = Buffer.from(b)
    else throw configError('request.body: expected a Buffer, Uint8Array, ArrayBuffer or string')
  }
  if (opts.timeoutMs !== undefined && opts.timeoutMs !== null) {
    if (typeof opts.timeoutMs !== 'number') throw configError(`request.timeoutMs: expected a number, got ${typeof opts.timeoutMs}`)
    req.timeoutMs = opts.timeoutMs
  }
  return req
}

function cancelledError(opts, reason) {
  return new CancelledError('the request was cancelled', {
    service: opts.service,
    method: opts.method,
    cause: reason,
  })
}

// ---------------------------------------------------------------- completions

// Requests in flight, by id. Finished requests are batched by the native side behind one weak
// threadsafe function; while any request is pending a plain timer holds the event loop, so an
// idle process (closed client or not) exits on its own.
const pending = new Map()
let lastId = 0
let hold = null
const noop = () => {}

const queue = new native.CompletionQueue(() => {
  for (const c of queue.drain()) {
    const settle = pending.get(c.id)
    if (settle === undefined) continue
    pending.delete(c.id)
    settle(c)
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

function track(id, settle) {
  pending.set(id, settle)
  if (hold === null) hold = setInterval(noop, 0x7fffffff)
}

// ---------------------------------------------------------------- client

/** A Harness client: one per process (or per config) is enough; it is safe to share. */
class Client {
  /**
   * @param config a config object (same shape as the YAML/JSON/TOML file) or a path to a config file.
   */
  constructor(config) {
    if (typeof config === 'string') {
      this._native = callNative(() => native.NativeClient.fromPath(config))
    } else if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
      let json
      try {
        json = JSON.stringify(config)
      } catch (e) {
        throw configError(`config: not serialisable as JSON: ${e.message}`)
      }
      this._native = callNative(() => native.NativeClient.fromJson(json))
    } else {
      throw configError('config: expected a config object or a path to a config file')
    }
  }

  /** Sends one request through the pipeline; resolves to a Response, rejects with a HarnessError. */
  request(opts) {
    let req
    try {
      req = toNativeRequest(opts)
    } catch (e) {
      return Promise.reject(e)
    }
    const signal = opts.signal
    let token = null
    if (signal !== undefined && signal !== null) {
      if (typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
        return Promise.reject(configError('request.signal: expected an AbortSignal'))
      }
      if (signal.aborted) return Promise.reject(cancelledError(req, signal.reason))
      token = new native.CancelToken()
    }
    const id = nextId()
    let error
    try {
      error = this._native.request(
        queue, id, req.service, req.method, req.path, req.endpoint, req.query, req.headers, req.json, req.body,
        req.idempotencyKey, req.timeoutMs, req.traceparent, token,
      )
    } catch (e) {
      // A napi conversion failure; the checks above make this unreachable for typed input.
      return Promise.reject(configError(`request: ${e.message}`))
    }
    if (error) return Promise.reject(errorFrom(error))
    return new Promise((resolve, reject) => {
      if (token === null) {
        track(id, (c) => (c.error ? reject(errorFrom(c.error)) : resolve(new Response(c.response))))
        return
      }
      const onAbort = () => token.cancel()
      signal.addEventListener('abort', onAbort, { once: true })
      track(id, (c) => {
        signal.removeEventListener('abort', onAbort)
        if (c.error) {
          const e = c.error
          // A cancel made by this signal: carry its reason, and the call's context.
          const cause = e.name === 'CancelledError' && signal.aborted ? signal.reason : undefined
          reject(errorFrom({ ...e, service: e.service ?? req.service, method: e.method ?? req.method }, cause))
        } else {
          resolve(new Response(c.response))
        }
      })
    })
  }

  /** `request` with method GET. */
  get(service, path, options) {
    return this.request({ ...options, service, path, method: 'GET' })
  }

  /** `request` with method POST. */
  post(service, path, options) {
    return this.request({ ...options, service, path, method: 'POST' })
  }

  /** `request` with method PUT. */
  put(service, path, options) {
    return this.request({ ...options, service, path, method: 'PUT' })
  }

  /** `request` with method PATCH. */
  patch(service, path, options) {
    return this.request({ ...options, service, path, method: 'PATCH' })
  }

  /** `request` with method DELETE. */
  delete(service, path, options) {
    return this.request({ ...options, service, path, method: 'DELETE' })
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
