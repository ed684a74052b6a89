'use strict'
// harness-sdk/openapi: what every client `harness codegen --lang typescript` writes shares, once.
// Reading an answer into typed values (a value the document does not allow is a SchemaError
// naming its JSON pointer), a lossless JSON parse (an integer past 2^53 arrives as a BigInt),
// writing values as JSON and as parameters, and one call path over `Client.request` that labels
// the call with its operationId and turns a declared error response into its typed error.

const { ConfigError, HarnessError, SchemaError } = require('./errors')

/**
 * What generated code may call: a client checks it at load, so one generated against another
 * contract fails at once with a message, never half-way through a call. Raise it on any change
 * to a name or a signature below.
 */
const CONTRACT = 1

// ---------------------------------------------------------------- reading

function shown(v) {
  if (v === null) return 'null'
  if (typeof v === 'boolean') return 'a boolean'
  if (typeof v === 'bigint') return 'an integer'
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : 'a number'
  if (typeof v === 'string') return 'a string'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'object') return 'an object'
  return typeof v
}

/** The error for a value that is not what the document declares. */
function drift(at, expected, got) {
  return new SchemaError(`${at || '/'}: expected ${expected}, got ${shown(got)}`)
}

/** The pointer of `key` below `at`. */
function child(at, key) {
  return at + '/' + String(key).replace(/~/g, '~0').replace(/\//g, '~1')
}

const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k)

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

// Sets an own property (`__proto__` too, which plain assignment would turn into a prototype).
function put(o, key, value) {
  if (key === '__proto__') Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true })
  else o[key] = value
}

function obj(v, at) {
  if (!isObject(v)) throw drift(at, 'an object', v)
  return v
}

function required(o, d, key, at, read) {
  if (!hasOwn(d, key)) throw new SchemaError(`${at || '/'}: the required key ${JSON.stringify(key)} is missing`)
  put(o, key, read(d[key], child(at, key)))
}

/** An optional property; null reads as absent (the property's type does not hold null). */
function optional(o, d, key, at, read) {
  if (hasOwn(d, key) && d[key] !== null && d[key] !== undefined) put(o, key, read(d[key], child(at, key)))
}

/** An optional property whose type holds null: null is kept. */
function optionalNullable(o, d, key, at, read) {
  if (hasOwn(d, key) && d[key] !== undefined) put(o, key, read(d[key], child(at, key)))
}

/** A property with a default: absent or null reads as the default. */
function defaulted(o, d, key, at, read, value) {
  const v = hasOwn(d, key) ? d[key] : undefined
  put(o, key, v === undefined || v === null ? value : read(v, child(at, key)))
}

/** A union member's tag: absent reads as the one value that selects the member. */
function tagged(o, d, key, at, value) {
  const v = hasOwn(d, key) ? d[key] : undefined
  if (v !== undefined && v !== value) throw new SchemaError(`${child(at, key)}: expected ${JSON.stringify(value)}, got ${literalShown(v)}`)
  put(o, key, value)
}

/** The keys beside the declared ones (`additionalProperties`). */
function rest(o, d, known, at, read) {
  for (const k of Object.keys(d)) {
    if (!known.includes(k)) put(o, k, read(d[k], child(at, k)))
  }
}

function string(v, at) {
  if (typeof v !== 'string') throw drift(at, 'a string', v)
  return v
}

/** An `int32` integer, as a number. */
function integer(v, at) {
  if (typeof v === 'bigint') throw new SchemaError(`${at || '/'}: expected a 32-bit integer, got ${v}`)
  if (typeof v !== 'number' || !Number.isInteger(v)) throw drift(at, 'an integer', v)
  return v
}

/** An `int64` integer (or one without a format), as a bigint, never rounded. */
function int64(v, at) {
  if (typeof v === 'bigint') return v
  if (typeof v !== 'number' || !Number.isInteger(v)) throw drift(at, 'an integer', v)
  // Past 2^53 a number is already rounded: only the lossless parse's bigint is exact.
  if (!Number.isSafeInteger(v)) throw new SchemaError(`${at || '/'}: expected an integer, got ${v} written with a fraction or an exponent past 2^53`)
  return BigInt(v)
}

function number(v, at) {
  if (typeof v === 'bigint') return Number(v)
  if (typeof v !== 'number') throw drift(at, 'a number', v)
  return v
}

function boolean(v, at) {
  if (typeof v !== 'boolean') throw drift(at, 'a boolean', v)
  return v
}

function any(v) {
  return v
}

const DATE_TIME = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2}(?:\.\d+)?)([Zz]|[+-]\d{2}:\d{2})$/

/** An RFC 3339 date-time, as a Date (JavaScript keeps milliseconds). */
function dateTime(v, at) {
  const m = DATE_TIME.exec(string(v, at))
  const d = m === null ? null : new Date(`${m[1]}T${m[2]}${m[3].toUpperCase()}`)
  if (d === null || Number.isNaN(d.getTime())) throw new SchemaError(`${at || '/'}: expected an RFC 3339 date-time, got ${literalShown(v)}`)
  return d
}

/** A date (`YYYY-MM-DD`), kept as its text (a Date would add a time and a zone). */
function date(v, at) {
  const s = string(v, at)
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s)
  const ok = m !== null && new Date(Date.UTC(+m[1], +m[2] - 1, +m[3])).toISOString().slice(0, 10) === s
  if (!ok) throw new SchemaError(`${at || '/'}: expected a date (YYYY-MM-DD), got ${literalShown(v)}`)
  return s
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

function uuid(v, at) {
  if (!UUID.test(string(v, at))) throw new SchemaError(`${at || '/'}: expected a UUID, got ${literalShown(v)}`)
  return v
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** `format: byte`: base64 text, as bytes (a Buffer, which is a Uint8Array). */
function bytes(v, at) {
  if (!BASE64.test(string(v, at))) throw new SchemaError(`${at || '/'}: expected base64 text, got ${literalShown(v)}`)
  return Buffer.from(v, 'base64')
}

function literalShown(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v)
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return String(v)
  return shown(v)
}

/** One of `values` (`1` is not `true`). */
function literal(values) {
  return (v, at) => {
    if (values.includes(v)) return v
    throw new SchemaError(`${at || '/'}: expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${literalShown(v)}`)
  }
}

function arrayOf(item) {
  return (v, at) => {
    if (!Array.isArray(v)) throw drift(at, 'an array', v)
    return v.map((x, i) => item(x, `${at}/${i}`))
  }
}

function mapOf(value) {
  return (v, at) => {
    const d = obj(v, at)
    const o = {}
    for (const k of Object.keys(d)) put(o, k, value(d[k], child(at, k)))
    return o
  }
}

function nullable(read) {
  return (v, at) => (v === null ? null : read(v, at))
}

/** A union's tag property, if `v` is an object that has it. */
function tag(v, key) {
  return isObject(v) && hasOwn(v, key) ? v[key] : undefined
}

/** The error for a tagged union's value whose tag selects no member. */
function badTag(v, at, key, values) {
  if (!isObject(v)) return drift(at, 'an object', v)
  if (!hasOwn(v, key)) return new SchemaError(`${at || '/'}: the required key ${JSON.stringify(key)} is missing`)
  return new SchemaError(`${child(at, key)}: expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${literalShown(v[key])}`)
}

/** An untagged union: of the members that read `v`, the one that knows most of its keys (the first on a tie). */
function bestOf(v, at, readers, expected) {
  let best
  let bestScore = -1
  const errors = []
  for (const read of readers) {
    let got
    try {
      got = read(v, at)
    } catch (e) {
      if (!(e instanceof SchemaError)) throw e
      errors.push(e.message)
      continue
    }
    const keys = read.keys
    const score = keys !== undefined && isObject(v) ? keys.filter((k) => hasOwn(v, k)).length : 0
    if (score > bestScore) {
      best = got
      bestScore = score
    }
  }
  if (bestScore < 0) throw new SchemaError(`${at || '/'}: expected ${expected}, and it is none of them (${errors.slice(0, 3).join('; ')})`)
  return best
}

function oneOf(readers, expected) {
  return (v, at) => bestOf(v, at, readers, expected)
}

// ---------------------------------------------------------------- lossless JSON

const LONG_DIGITS = /\d{16}/
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y
const SPACE = /[ \t\n\r]*/y

/**
 * JSON text as values, with every integer past 2^53 as a BigInt (JSON.parse would round it).
 * Text without 16 digits in a row has no such integer: JSON.parse reads it, natively.
 */
function parse(text) {
  if (!LONG_DIGITS.test(text)) return JSON.parse(text)
  let i = 0
  const fail = () => {
    throw new SyntaxError(`JSON: unexpected ${i < text.length ? JSON.stringify(text[i]) : 'end'} at ${i}`)
  }
  const space = () => {
    SPACE.lastIndex = i
    SPACE.exec(text)
    i = SPACE.lastIndex
  }
  const value = () => {
    space()
    const c = text[i]
    if (c === '{') {
      i++
      const o = {}
      space()
      if (text[i] === '}') {
        i++
        return o
      }
      for (;;) {
        space()
        if (text[i] !== '"') fail()
        const k = str()
        space()
        if (text[i] !== ':') fail()
        i++
        put(o, k, value())
        space()
        if (text[i] === ',') i++
        else if (text[i] === '}') {
          i++
          return o
        } else fail()
      }
    }
    if (c === '[') {
      i++
      const a = []
      space()
      if (text[i] === ']') {
        i++
        return a
      }
      for (;;) {
        a.push(value())
        space()
        if (text[i] === ',') i++
        else if (text[i] === ']') {
          i++
          return a
        } else fail()
      }
    }
    if (c === '"') return str()
    if (text.startsWith('true', i)) return (i += 4), true
    if (text.startsWith('false', i)) return (i += 5), false
    if (text.startsWith('null', i)) return (i += 4), null
    NUMBER.lastIndex = i
    const m = NUMBER.exec(text)
    if (m === null) fail()
    i = NUMBER.lastIndex
    const n = Number(m[0])
    return m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n) ? BigInt(m[0]) : n
  }
  const str = () => {
    STRING.lastIndex = i
    const m = STRING.exec(text)
    if (m === null) fail()
    i = STRING.lastIndex
    return JSON.parse(m[0])
  }
  const v = value()
  space()
  if (i !== text.length) fail()
  return v
}

// ---------------------------------------------------------------- writing

function base64(b) {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64')
}

/**
 * A typed value as JSON text: bigints as integers, Dates as RFC 3339, bytes as base64; an
 * undefined property is left out. NaN and infinities are a ConfigError naming where.
 */
function stringify(value, where = 'body') {
  const write = (v, at) => {
    if (v === null) return 'null'
    switch (typeof v) {
      case 'string':
        return JSON.stringify(v)
      case 'boolean':
        return v ? 'true' : 'false'
      case 'bigint':
        return v.toString()
      case 'number':
        if (!Number.isFinite(v)) throw new ConfigError(`${where}${at}: NaN and infinities are not JSON`)
        return JSON.stringify(v)
      case 'object':
        break
      default:
        throw new ConfigError(`${where}${at}: a ${typeof v} is not JSON`)
    }
    if (v instanceof Date) {
      if (Number.isNaN(v.getTime())) throw new ConfigError(`${where}${at}: an invalid Date`)
      return JSON.stringify(v.toISOString())
    }
    if (ArrayBuffer.isView(v)) return JSON.stringify(base64(v))
    if (Array.isArray(v)) return '[' + v.map((x, i) => (x === undefined ? 'null' : write(x, `${at}/${i}`))).join(',') + ']'
    const parts = []
    for (const k of Object.keys(v)) {
      if (v[k] !== undefined) parts.push(JSON.stringify(k) + ':' + write(v[k], child(at, k)))
    }
    return '{' + parts.join(',') + '}'
  }
  try {
    return write(value, '')
  } catch (e) {
    if (e instanceof RangeError) throw new ConfigError(`${where}: nested too deeply (or cyclic)`)
    throw e
  }
}

/** A parameter value as text: `true`/`false`, RFC 3339, base64, a bigint's digits. */
function text(v) {
  if (v instanceof Date) return v.toISOString()
  if (ArrayBuffer.isView(v)) return base64(v)
  return String(v)
}

const encode = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())

/** A path parameter, percent-encoded (an array is comma-separated: `simple` style). */
function path(v, name) {
  if (v === undefined || v === null) throw new ConfigError(`params.${name}: required (a path parameter)`)
  if (Array.isArray(v)) return v.map((x) => encode(text(x))).join(',')
  return encode(text(v))
}

/** A query parameter; an array repeats the name (`sep` null: `explode`) or joins with `sep`. */
function query(out, name, v, sep) {
  if (v === undefined || v === null) return
  if (Array.isArray(v)) {
    if (sep === null) for (const x of v) out.push([name, text(x)])
    else out.push([name, v.map(text).join(sep)])
  } else out.push([name, text(v)])
}

function header(out, name, v) {
  if (v === undefined || v === null) return
  out.push([name, Array.isArray(v) ? v.map(text).join(',') : text(v)])
}

// ---------------------------------------------------------------- calls

/** The JSON body of a response, read losslessly. */
function body(res) {
  try {
    return parse(res.text())
  } catch {
    throw new SchemaError('the body is not JSON')
  }
}

function fieldsOf(e) {
  return {
    service: e.service,
    endpoint: e.endpoint,
    method: e.method,
    attempts: e.attempts,
    status: e.status,
    errorCode: e.errorCode,
    retryAfterMs: e.retryAfterMs,
    traceId: e.traceId,
    phase: e.phase,
    body: e.body,
    provider: e.provider,
    providerErrors: e.providerErrors,
    cause: e.cause,
  }
}

/**
 * The typed error for an error response the operation declares, else `e` itself (also when
 * the body does not read as the declared model: the status matters more). `errors` maps a
 * status key (`404`, `4XX`, `default`) to [class, reader of its body or null].
 */
function typed(e, errors) {
  if (!(e instanceof HarnessError) || typeof e.status !== 'number' || e.status < 400) return e
  const key = [String(e.status), `${Math.floor(e.status / 100)}XX`, 'default'].find((k) => hasOwn(errors, k))
  if (key === undefined) return e
  const [Cls, read] = errors[key]
  let model
  if (read !== null) {
    try {
      model = read(parse(e.body === undefined ? '' : e.body.toString('utf8')), '')
    } catch {
      return e
    }
  }
  const t = new Cls(e.message, fieldsOf(e))
  // The kind stays Harness's own (`HttpStatusError`); the class says which declared response.
  t.code = e.code
  if (read !== null) t.model = model
  return t
}

/**
 * Calls one service's operations through a harness-sdk `Client`; a generated client class
 * extends it. Its one member, `_send`, is not part of a client's API.
 */
class Service {
  #client
  #service

  constructor(client, service) {
    if (client === null || typeof client !== 'object' || typeof client.request !== 'function') {
      throw new ConfigError('client: expected a harness-sdk Client')
    }
    if (typeof service !== 'string') throw new ConfigError(`service: expected a string, got ${typeof service}`)
    this.#client = client
    this.#service = service
  }

  /**
   * Sends `call` ({ method, path, endpoint, query, headers, json (a typed value), idempotencyKey })
   * and reads the answer with `decode`; an error status becomes its typed error from `errors`.
   */
  async _send(call, options, decode, errors) {
    const o = options ?? {}
    const headers = call.headers
    let body
    if (call.json !== undefined) {
      body = stringify(call.json)
      headers.push(['content-type', 'application/json'])
    }
    let res
    try {
      res = await this.#client.request({
        service: this.#service,
        method: call.method,
        path: call.path,
        endpoint: call.endpoint,
        query: call.query.length > 0 ? call.query : undefined,
        headers: headers.length > 0 ? headers : undefined,
        body,
        idempotencyKey: call.idempotencyKey,
        timeoutMs: o.timeoutMs,
        signal: o.signal,
        traceparent: o.traceparent,
        principal: o.principal,
      })
    } catch (e) {
      throw typed(e, errors)
    }
    try {
      return decode(res)
    } catch (e) {
      if (!(e instanceof SchemaError)) throw e
      throw new SchemaError(`${call.endpoint}: the ${res.status} response does not match the document: ${e.message}`, {
        service: this.#service,
        endpoint: call.endpoint,
        method: call.method,
        attempts: res.attempts,
        status: res.status,
        traceId: res.traceId,
      })
    }
  }
}

module.exports = {
  CONTRACT,
  Service,
  drift,
  child,
  obj,
  required,
  optional,
  optionalNullable,
  defaulted,
  tagged,
  rest,
  string,
  integer,
  int64,
  number,
  boolean,
  any,
  dateTime,
  date,
  uuid,
  bytes,
  literal,
  arrayOf,
  mapOf,
  nullable,
  tag,
  badTag,
  bestOf,
  oneOf,
  parse,
  stringify,
  text,
  path,
  query,
  header,
  body,
  typed,
}
