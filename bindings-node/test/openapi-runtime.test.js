'use strict'
// harness-sdk/openapi on its own: the lossless JSON parse against JSON.parse, the JSON writer's
// refusals, and parameter text. (The generated clients that use it: openapi-clients.test.js.)

const { test } = require('node:test')
const assert = require('node:assert/strict')

const { ConfigError, SchemaError } = require('..')
const rt = require('../openapi')

test('parse agrees with JSON.parse, except that integers past 2^53 stay exact', () => {
  const same = [
    '{"a":[1,2.5,-0.5e3,true,false,null,"x\\u00e9\\n\\"q\\""],"b":{}}',
    ' [ ] ',
    '"1234567890123456789"',
    '{"n": 123456789012345.5, "s": "12345678901234567890"}',
    '{"e": 1.2345678901234567e300, "f": 12345678901234567e-5}',
  ]
  for (const text of same) assert.deepEqual(rt.parse(text), JSON.parse(text), text)
  assert.deepEqual(rt.parse('{"id": 9007199254740993, "ok": 9007199254740991, "neg": -123456789012345678901}'), {
    id: 9007199254740993n,
    ok: 9007199254740991,
    neg: -123456789012345678901n,
  })
  // A key named __proto__ is an own key, as JSON.parse makes it.
  const o = rt.parse('{"__proto__": {"polluted": 1}, "big": 12345678901234567890}')
  assert.equal(Object.getPrototypeOf(o), Object.prototype)
  assert.deepEqual(Object.keys(o), ['__proto__', 'big'])
  assert.equal({}.polluted, undefined)
})

test('parse refuses what JSON.parse refuses', () => {
  for (const text of ['{"a": 12345678901234567890,}', '[12345678901234567890', '12345678901234567890 1', '{"a" 12345678901234567890}', "['1234567890123456789']", '01234567890123456789', '"\t1234567890123456789"']) {
    assert.throws(() => JSON.parse(text), SyntaxError, text)
    assert.throws(() => rt.parse(text), SyntaxError, text)
  }
})

test('stringify writes bigints, Dates and bytes, and refuses what is not JSON with a ConfigError naming where', () => {
  assert.equal(
    rt.stringify({ a: 12345678901234567890n, d: new Date(Date.UTC(2026, 0, 2)), b: new Uint8Array([1, 2, 3]), u: undefined, l: [undefined, null, 'é'] }),
    '{"a":12345678901234567890,"d":"2026-01-02T00:00:00.000Z","b":"AQID","l":[null,null,"é"]}',
  )
  assert.throws(() => rt.stringify({ a: [1, NaN] }), (e) => e instanceof ConfigError && e.message === 'body/a/1: NaN and infinities are not JSON')
  assert.throws(() => rt.stringify({ d: new Date(NaN) }), (e) => e instanceof ConfigError && e.message === 'body/d: an invalid Date')
  assert.throws(() => rt.stringify({ f: () => 1 }), (e) => e instanceof ConfigError && e.message === 'body/f: a function is not JSON')
  const cyclic = { a: {} }
  cyclic.a.b = cyclic
  assert.throws(() => rt.stringify(cyclic), (e) => e instanceof ConfigError && e.message === 'body: nested too deeply (or cyclic)')
})

test('readers name the pointer of what differs', () => {
  const cases = [
    [() => rt.integer(2 ** 40, '/n'), null],
    [() => rt.integer(1.5, '/n'), '/n: expected an integer, got a number'],
    [() => rt.int64(2 ** 60, '/n'), '/n: expected an integer, got 1152921504606847000 written with a fraction or an exponent past 2^53'],
    [() => rt.dateTime('2026-13-01T00:00:00Z', '/t'), '/t: expected an RFC 3339 date-time, got "2026-13-01T00:00:00Z"'],
    [() => rt.date('2026-02-30', '/d'), '/d: expected a date (YYYY-MM-DD), got "2026-02-30"'],
    [() => rt.uuid('nope', ''), '/: expected a UUID, got "nope"'],
    [() => rt.bytes('a===', '/b'), '/b: expected base64 text, got "a==="'],
    [() => rt.mapOf(rt.string)({ 'a/b~c': 1 }, '/m'), '/m/a~1b~0c: expected a string, got an integer'],
  ]
  for (const [read, message] of cases) {
    if (message === null) read()
    else assert.throws(read, (e) => e instanceof SchemaError && e.message === message, message)
  }
  assert.equal(rt.int64(42, ''), 42n)
  assert.equal(rt.dateTime('2026-12-03t10:00:00.1234567z', '').toISOString(), '2026-12-03T10:00:00.123Z')
})

test('parameters as text: percent-encoded paths, joined arrays', () => {
  assert.equal(rt.path("a b/c?d#e%f&g'h(i)*!~", 'x'), 'a%20b%2Fc%3Fd%23e%25f%26g%27h%28i%29%2A%21~')
  assert.equal(rt.path([1n, true, 'a,b'], 'x'), '1,true,a%2Cb')
  assert.throws(() => rt.path(undefined, 'orderId'), (e) => e instanceof ConfigError && e.message === 'params.orderId: required (a path parameter)')
  const q = []
  rt.query(q, 'a', ['x', 'y'], null)
  rt.query(q, 'b', ['x', 'y'], ' ')
  rt.query(q, 'c', undefined, null)
  rt.query(q, 'd', new Date(0), null)
  assert.deepEqual(q, [
    ['a', 'x'],
    ['a', 'y'],
    ['b', 'x y'],
    ['d', '1970-01-01T00:00:00.000Z'],
  ])
})
