'use strict'
// The TypeScript clients `harness codegen --lang typescript` wrote from examples/openapi (checked
// in under examples/openapi/typescript) against the test upstream: what goes on the wire for each
// parameter kind, typed answers (int64 as an exact bigint), typed errors, retries with and
// without an idempotency key, a drifted answer, the endpoint label, cancelling, ESM and CommonJS;
// and `tsc --strict` on right and wrong calls. The clients import `harness-sdk` as a user's would:
// they are copied into a scratch directory whose node_modules/harness-sdk is this package.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const sdk = require('..')
const { Client, HttpStatusError, SchemaError, CancelledError } = sdk
const { startUpstream, repoRoot } = require('./upstream')

const here = path.resolve(__dirname, '..')
const examples = path.join(repoRoot, 'examples', 'openapi', 'typescript')
const tsc = path.join(here, 'node_modules', '.bin', 'tsc')

function harnessBin() {
  return process.env.HARNESS_BIN || path.join(repoRoot, 'target', process.env.CARGO_BUILD_TARGET || 'x86_64-unknown-linux-gnu', 'debug', 'harness')
}

/** A directory holding the generated packages beside node_modules/{harness-sdk,@types}. */
function sandbox() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'harness-ts-clients-'))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(here, path.join(dir, 'node_modules', 'harness-sdk'), 'dir')
  fs.symlinkSync(path.join(here, 'node_modules', '@types'), path.join(dir, 'node_modules', '@types'), 'dir')
  for (const s of ['orders', 'users', 'payments']) fs.cpSync(path.join(examples, s), path.join(dir, s), { recursive: true })
  execFileSync(harnessBin(), ['codegen', '--spec', path.join(__dirname, 'fixtures', 'hostile.yaml'), '--lang', 'typescript', '--out', dir])
  return dir
}

let upstream
let dir
let orders
let users
let payments
let hostile
before(async () => {
  upstream = await startUpstream()
  dir = sandbox()
  orders = require(path.join(dir, 'orders'))
  users = require(path.join(dir, 'users'))
  payments = require(path.join(dir, 'payments'))
  hostile = require(path.join(dir, 'hostile'))
})
after(async () => {
  await upstream.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function script(name, steps) {
  await upstream.admin('PUT', `/__admin/script/${name}`, { steps })
}

async function log(name) {
  return (await upstream.admin('GET', `/__admin/log/${name}`)).requests
}

function client(retry = {}) {
  const services = {}
  for (const s of ['orders', 'users', 'payments', 'hostile']) {
    services[s] = { base_url: `${upstream.base}/s/ts-${s}`, retry: { base_delay_ms: 10, max_delay_ms: 10, jitter: false, ...retry } }
  }
  return new Client({ client: { name: 'node-openapi' }, log: { enabled: false }, services })
}

function queryOf(logged) {
  return [...new URL(logged.path, 'http://x').searchParams]
}

const ORDER_ID = '5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10'
const ORDER = {
  id: ORDER_ID,
  status: 'open',
  customer_id: '0f0e0d0c-0b0a-4909-8807-060504030201',
  items: [{ sku: 'tea', quantity: 2, unit_price: { amount_minor: 450, currency: 'EUR' } }],
  total: { amount_minor: 900, currency: 'EUR' },
  note: null,
  created_at: '2026-12-03T10:00:00.1234567Z',
}
const PROBLEM = { code: 'order_not_found', title: 'No such order', status: 404 }
const PAYMENT = {
  id: 'pay_1',
  created_at: '2026-12-03T10:00:00Z',
  order_id: ORDER_ID,
  status: 'pending',
  amount: { amount_minor: 900, currency: 'EUR' },
  method: { type: 'card', last4: '4242' },
}
const PAYMENT_REQUEST = { order_id: ORDER_ID, amount: { amount_minor: 900n, currency: 'EUR' }, method: { type: 'card', token: 'tok_1' } }

test('every parameter kind goes on the wire as the document says, and the answer is typed', async () => {
  await script('ts-orders', [{ json: { items: [ORDER], next_cursor: 'c2' } }])
  const c = client()
  try {
    const page = await new orders.OrdersClient(c).listOrders({
      xTenant: 'acme',
      status: ['open', 'paid'],
      tags: ['a b', 'c'],
      createdAfter: new Date(Date.UTC(2026, 11, 1, 8, 30)),
      limit: 5,
    })
    assert.equal(page.next_cursor, 'c2')
    const [order] = page.items
    assert.equal(order.id, ORDER_ID)
    assert.ok(order.created_at instanceof Date)
    assert.equal(order.created_at.toISOString(), '2026-12-03T10:00:00.123Z')
    assert.deepEqual(order.items[0].unit_price, { amount_minor: 450n, currency: 'EUR' })
    assert.equal(order.note, null)
    assert.equal('tags' in order, false)
  } finally {
    c.close()
  }
  const [logged] = await log('ts-orders')
  assert.equal(new URL(logged.path, 'http://x').pathname, '/s/ts-orders/orders')
  // status explodes (form), tags joins with commas (explode: false), a date-time is RFC 3339.
  assert.deepEqual(queryOf(logged), [
    ['status', 'open'],
    ['status', 'paid'],
    ['tags', 'a b,c'],
    ['created_after', '2026-12-01T08:30:00.000Z'],
    ['limit', '5'],
  ])
  assert.equal(logged.headers['x-tenant'], 'acme')
})

test('path parameters are percent-encoded; pipe- and space-delimited arrays join; int64 parameters are bigints', async () => {
  await script('ts-users', [{ json: { page: 1, per_page: 10, total: 0, users: [] } }, { status: 204 }])
  await script('ts-payments', [{ status: 404, json: PROBLEM }])
  await script('ts-hostile', [{ json: { big: 1, 'x-rate': 0.5, ['__proto__']: 'p' } }])
  const c = client()
  try {
    const u = new users.UsersClient(c)
    const page = await u.listUsers({ role: ['admin', 'staff'], page: 1n })
    assert.deepEqual(page, { page: 1n, per_page: 10n, total: 0n, users: [] })
    assert.equal(await u.deleteUser({ userId: 9007199254740993n }), undefined)
    await assert.rejects(new payments.PaymentsClient(c).getPayment({ paymentId: "a b/c?d#e%f&g'h" }), payments.NotFoundError)
    await new hostile.HostileClient(c).constructor_({ class: 'x/y', words: ['one', 'two'], default: 12n })
  } finally {
    c.close()
  }
  const [listed, deleted] = await log('ts-users')
  assert.deepEqual(queryOf(listed), [
    ['role', 'admin|staff'],
    ['page', '1'],
  ])
  assert.equal(deleted.method, 'DELETE')
  assert.equal(deleted.path, '/s/ts-users/users/9007199254740993')
  const [got] = await log('ts-payments')
  assert.equal(got.path, '/s/ts-payments/payments/a%20b%2Fc%3Fd%23e%25f%26g%27h')
  const [thing] = await log('ts-hostile')
  assert.equal(new URL(thing.path, 'http://x').pathname, '/s/ts-hostile/things/x%2Fy')
  assert.deepEqual(queryOf(thing), [
    ['words', 'one two'],
    ['default', '12'],
  ])
})

test('int64 is read and written without rounding, and __proto__ stays a plain key', async () => {
  // JSON.parse would read 9007199254740993 as 9007199254740992.
  const body = '{"id": 9007199254740993, "email": "a@example.com", "role": "staff", "created_at": "2026-12-03T10:00:00Z", "avatar": "iVBORw=="}'
  await script('ts-users', [{ body, headers: { 'content-type': 'application/json' } }])
  await script('ts-hostile', [{ body: '{"big": -9223372036854775808, "x-rate": 1e3, "__proto__": "kept", "when": "2026-01-02T03:04:05+01:00"}' }, { status: 204 }])
  const c = client()
  try {
    const user = await new users.UsersClient(c).getUser({ userId: 9007199254740993n })
    assert.equal(user.id, 9007199254740993n)
    assert.deepEqual([...user.avatar], [0x89, 0x50, 0x4e, 0x47])
    const h = new hostile.HostileClient(c)
    const thing = await h.constructor_({ class: 'a' })
    assert.equal(thing.big, -9223372036854775808n)
    assert.equal(thing['x-rate'], 1000)
    assert.equal(Object.getPrototypeOf(thing), Object.prototype)
    assert.deepEqual(Object.getOwnPropertyDescriptor(thing, '__proto__').value, 'kept')
    assert.equal(thing.when.toISOString(), '2026-01-02T02:04:05.000Z')
    await h.delete({ body: { big: 9223372036854775807n, 'x-rate': 0.25, __proto__: 'x', when: new Date(0) } })
  } finally {
    c.close()
  }
  const [, sent] = await log('ts-hostile')
  // An object literal's __proto__ sets the prototype instead: it is not sent.
  assert.equal(sent.body, '{"big":9223372036854775807,"x-rate":0.25,"when":"1970-01-01T00:00:00.000Z"}')
  assert.equal(sent.headers['content-type'], 'application/json')
})

test('a request body is written as the document says: bytes as base64, null kept, undefined left out', async () => {
  const user = { id: 7, email: 'a@example.com', role: 'staff', created_at: '2026-12-03T10:00:00Z' }
  await script('ts-users', [{ status: 201, json: user }, { json: { ...user, display_name: null } }])
  const c = client()
  try {
    const u = new users.UsersClient(c)
    const made = await u.createUser({
      body: { email: 'a@example.com', role: 'staff', password: 'correct horse battery', avatar: new Uint8Array([0x89, 0x50, 0x4e, 0x47]), birthday: '1990-02-03', display_name: undefined },
      idempotencyKey: 'u-1',
    })
    assert.deepEqual(made, { id: 7n, email: 'a@example.com', role: 'staff', created_at: new Date('2026-12-03T10:00:00Z') })
    const patched = await u.updateUser({ userId: 7n, body: { display_name: null } })
    assert.equal(patched.display_name, null)
  } finally {
    c.close()
  }
  const [created, patched] = await log('ts-users')
  assert.equal(created.body, '{"email":"a@example.com","role":"staff","password":"correct horse battery","avatar":"iVBORw==","birthday":"1990-02-03"}')
  assert.equal(created.headers['idempotency-key'], 'u-1')
  assert.equal(patched.method, 'PATCH')
  assert.equal(patched.body, '{"display_name":null}')
})

test('read checks JSON that arrived another way against the document', () => {
  const { parse } = require('harness-sdk/openapi')
  const order = orders.read.Order(parse(JSON.stringify({ ...ORDER, total: { amount_minor: 12345678901234567890, currency: 'EUR' } }).replace('12345678901234567000', '12345678901234567890')))
  assert.equal(order.total.amount_minor, 12345678901234567890n)
  assert.equal(order.created_at.getTime(), Date.UTC(2026, 11, 3, 10, 0, 0, 123))
  assert.throws(() => orders.read.Order({ ...ORDER, status: 'lost' }), (e) => e instanceof SchemaError && e.message === '/status: expected one of "open", "paid", "shipped", "cancelled", got "lost"')
  assert.throws(() => payments.read.PaymentMethod({ type: 'card', last4: 4242 }), (e) => e instanceof SchemaError && e.message === '/last4: expected a string, got an integer')
  assert.deepEqual(payments.read.PaymentMethod({ type: 'wallet', provider: 'alipay', extra: 1 }), { type: 'wallet', provider: 'alipay' })
  assert.ok(Object.isFrozen(orders.read))
})

test('a declared error is its typed error, with the body as its model', async () => {
  await script('ts-orders', [{ status: 404, json: PROBLEM }])
  const c = client()
  try {
    const e = await new orders.OrdersClient(c).getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.ok(e instanceof orders.NotFoundError, `expected NotFoundError, got ${e}`)
    assert.ok(e instanceof HttpStatusError)
    assert.equal(e.name, 'NotFoundError')
    assert.equal(e.code, 'HttpStatusError')
    assert.deepEqual(e.model, { code: 'order_not_found', title: 'No such order', status: 404 })
    assert.deepEqual([e.status, e.service, e.endpoint, e.errorCode, e.method], [404, 'orders', 'getOrder', 'order_not_found', 'GET'])
    assert.match(e.traceId, /^[0-9a-f]{32}$/)
  } finally {
    c.close()
  }
})

test('an undeclared error status, or a declared one whose body does not read, stays harness-sdk own', async () => {
  await script('ts-orders', [{ status: 418, json: PROBLEM }, { status: 404, json: { code: 1 } }])
  const c = client()
  try {
    const o = new orders.OrdersClient(c)
    const teapot = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.equal(teapot.constructor, HttpStatusError)
    assert.equal(teapot.status, 418)
    const unreadable = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.equal(unreadable.constructor, HttpStatusError)
    assert.equal(unreadable.status, 404)
  } finally {
    c.close()
  }
})

test('an idempotent GET and a POST with an Idempotency-Key are retried after a 503; a POST without a key is not', async () => {
  await script('ts-orders', [{ status: 503 }, { json: ORDER }])
  await script('ts-payments', [{ status: 503 }, { status: 201, json: PAYMENT }, { status: 503 }])
  const c = client({ max_retries: 2 })
  try {
    const order = await new orders.OrdersClient(c).getOrder({ orderId: ORDER_ID })
    assert.equal(order.total.amount_minor, 900n)
    const p = new payments.PaymentsClient(c)
    const made = await p.createPayment({ body: PAYMENT_REQUEST, idempotencyKey: 'k-1' })
    assert.deepEqual(made.method, { type: 'card', last4: '4242' })
    assert.equal(made.failure, undefined)
    const e = await p.createPayment({ body: PAYMENT_REQUEST }).catch((e) => e)
    assert.ok(e instanceof HttpStatusError)
    assert.equal(e.status, 503)
    assert.equal(e.attempts, 1)
    assert.equal(e.endpoint, 'createPayment')
  } finally {
    c.close()
  }
  assert.deepEqual(
    (await log('ts-orders')).map((r) => r.method),
    ['GET', 'GET'],
  )
  const [first, second, third] = await log('ts-payments')
  assert.equal(first.headers['idempotency-key'], 'k-1')
  assert.equal(second.headers['idempotency-key'], 'k-1')
  assert.equal(third.headers['idempotency-key'], undefined)
  assert.equal(
    first.body,
    '{"order_id":"5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10","amount":{"amount_minor":900,"currency":"EUR"},"method":{"type":"card","token":"tok_1"}}',
  )
  assert.equal((await log('ts-payments')).length, 3)
})

test('a 422 reads as its own typed error; metrics are labelled with the operationId', async () => {
  const declined = { code: 'declined', title: 'Declined', status: 422, decline_code: 'expired' }
  await script('ts-payments', [{ status: 422, json: declined }])
  const c = client()
  try {
    const e = await new payments.PaymentsClient(c).createPayment({ body: PAYMENT_REQUEST, idempotencyKey: 'k-2' }).catch((e) => e)
    assert.ok(e instanceof payments.UnprocessableEntityError)
    assert.equal(e.model.decline_code, 'expired')
    assert.match(c.metrics(), /endpoint="createPayment"/)
  } finally {
    c.close()
  }
})

test('an answer that drifted from the document is a SchemaError naming its pointer', async () => {
  const drifted = { ...ORDER, items: [{ sku: 'tea', quantity: 2, unit_price: { amount_minor: 4.5, currency: 'EUR' } }] }
  await script('ts-orders', [{ json: drifted }, { json: { ...ORDER, status: 'lost' } }, { json: { ...ORDER, items: undefined } }])
  await script('ts-payments', [{ json: { ...PAYMENT, method: { type: 'cheque' } } }])
  const c = client()
  try {
    const o = new orders.OrdersClient(c)
    const e = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.ok(e instanceof SchemaError, `expected SchemaError, got ${e}`)
    assert.equal(e.message, 'getOrder: the 200 response does not match the document: /items/0/unit_price/amount_minor: expected an integer, got a number')
    assert.deepEqual([e.endpoint, e.status, e.service, e.method, e.code], ['getOrder', 200, 'orders', 'GET', 'SchemaError'])
    const lost = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.match(lost.message, /: \/status: expected one of "open", "paid", "shipped", "cancelled", got "lost"$/)
    const missing = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.match(missing.message, /: \/: the required key "items" is missing$/)
    const cheque = await new payments.PaymentsClient(c).getPayment({ paymentId: 'p' }).catch((e) => e)
    assert.match(cheque.message, /: \/method\/type: expected one of "card", "bank_transfer", "wallet", got "cheque"$/)
  } finally {
    c.close()
  }
})

// The services with their documents in the config: the core knows every operation too.
function documented(validate) {
  const c = { client: { name: 'node-openapi' }, log: { enabled: false }, services: {} }
  for (const s of ['orders', 'users', 'payments']) {
    c.services[s] = {
      base_url: `${upstream.base}/s/ts-${s}`,
      retry: { max_retries: 2, base_delay_ms: 1, max_delay_ms: 2, jitter: false },
      openapi: { spec: path.join(repoRoot, 'examples', 'openapi', `${s}.yaml`), validate },
    }
  }
  return new Client(c)
}

// quantity has `minimum: 1`: a type the client reads, a value the document refuses (the core checks it).
const OFF = { ...ORDER, items: [{ sku: 'tea', quantity: 0, unit_price: { amount_minor: 450, currency: 'EUR' } }] }
const NEW_ORDER = { customer_id: ORDER.customer_id, items: [{ sku: 'tea', quantity: 2, unit_price: { amount_minor: 450n, currency: 'EUR' } }] }

test('with the document in the config, the core checks answers and keys the POSTs that declare a key', async () => {
  await script('ts-orders', [{ json: OFF }, { status: 503 }, { status: 201, json: ORDER }])
  const c = documented('enforce')
  try {
    const o = new orders.OrdersClient(c)
    const e = await o.getOrder({ orderId: ORDER_ID }).catch((e) => e)
    assert.ok(e instanceof SchemaError, `expected SchemaError, got ${e}`)
    assert.deepEqual([e.endpoint, e.status, e.errorCode], ['getOrder', 200, 'schema_mismatch'])
    assert.match(e.message, /at \/items\/0\/quantity/)
    // No key given: the operation declares one, so Harness sends a fresh one and may retry.
    assert.equal((await o.createOrder({ body: NEW_ORDER })).id, ORDER_ID)
  } finally {
    c.close()
  }
  const keys = (await log('ts-orders')).filter((r) => r.method === 'POST').map((r) => r.headers['idempotency-key'])
  assert.equal(keys.length, 2)
  assert.ok(keys[0] && keys[0] === keys[1], JSON.stringify(keys))
})

test('under validate: warn a drifted answer is returned and reported', async () => {
  await script('ts-orders', [{ json: OFF }])
  const c = documented('warn')
  const events = []
  c.on('schema_violation', (e) => events.push(e))
  try {
    const order = await new orders.OrdersClient(c).getOrder({ orderId: ORDER_ID })
    assert.equal(order.items[0].quantity, 0)
    c.flush()
    assert.equal(events.length, 1, JSON.stringify(events))
    assert.equal(events[0].mode, 'warn')
    assert.equal(events[0].endpoint, 'getOrder')
    assert.match(events[0].violation, /at \/items\/0\/quantity/)
    assert.match(c.metrics(), /harness_schema_violations_total\{service="orders",endpoint="getOrder"\} 1/)
  } finally {
    c.close()
  }
})

test('an AbortSignal cancels the call; a timeout bounds it', async () => {
  await script('ts-orders', [{ action: 'hang' }])
  const c = client({ max_retries: 0 })
  try {
    const o = new orders.OrdersClient(c)
    const ac = new AbortController()
    const call = o.getOrder({ orderId: ORDER_ID }, { signal: ac.signal }).catch((e) => e)
    await sleep(50)
    ac.abort()
    const e = await call
    assert.ok(e instanceof CancelledError, `expected CancelledError, got ${e}`)
    assert.equal(c.bulkheadInUse('orders'), 0)
    const t = await o.getOrder({ orderId: ORDER_ID }, { timeoutMs: 100 }).catch((e) => e)
    assert.equal(t.code, 'TimeoutError')
    assert.equal(t.endpoint, 'getOrder')
  } finally {
    c.close()
  }
})

test('ESM and CommonJS import the same classes', async () => {
  for (const [name, cjs] of [
    ['orders', orders],
    ['users', users],
    ['payments', payments],
  ]) {
    const esm = await import(path.join(dir, name, 'index.mjs'))
    assert.deepEqual(Object.keys(esm).filter((k) => k !== 'default').sort(), Object.keys(cjs).sort())
    for (const k of Object.keys(cjs)) assert.equal(esm[k], cjs[k], `${name}.${k}`)
  }
  // By package name too, through its exports map.
  fs.symlinkSync(path.join(dir, 'orders'), path.join(dir, 'node_modules', 'orders'), 'dir')
  const probe = path.join(dir, 'probe.mjs')
  fs.writeFileSync(probe, "import { OrdersClient } from 'orders'\nimport { createRequire } from 'node:module'\nconst require = createRequire(import.meta.url)\nif (require('orders').OrdersClient !== OrdersClient) process.exit(3)\n")
  const r = spawnSync(process.execPath, [probe], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
})

test('a client generated for another harness-sdk/openapi contract refuses to load, saying why', () => {
  const copy = path.join(dir, 'orders-next')
  fs.cpSync(path.join(dir, 'orders'), copy, { recursive: true })
  const js = path.join(copy, 'index.js')
  const text = fs.readFileSync(js, 'utf8')
  assert.ok(text.includes('if (rt.CONTRACT !== 1) {'))
  fs.writeFileSync(js, text.replace('if (rt.CONTRACT !== 1) {', 'if (rt.CONTRACT !== 2) {').replace('contract 1,', 'contract 2,'))
  assert.throws(() => require(copy), /orders: generated for harness-sdk\/openapi contract 2, the installed harness-sdk has 1: regenerate it/)
})

function typecheck(name, program, extra = []) {
  const file = path.join(dir, name)
  fs.writeFileSync(file, program)
  const r = spawnSync(tsc, ['--strict', '--noEmit', '--target', 'es2022', '--types', 'node', ...extra, file], { cwd: dir, encoding: 'utf8' })
  return { code: r.status, out: r.stdout + r.stderr }
}

const HEAD = `import { Client } from 'harness-sdk'
import * as orders from './orders'
import * as payments from './payments'
import * as hostile from './hostile'
const c = new orders.OrdersClient(new Client({ services: { orders: { base_url: 'http://127.0.0.1:1' } } }))
`

test('tsc --strict accepts the right calls and every generated client', () => {
  const good =
    HEAD +
    `async function main(signal: AbortSignal): Promise<bigint> {
  const o: orders.Order = await c.getOrder({ orderId: 'x' }, { signal, timeoutMs: 500 })
  const page: orders.OrderPage = await c.listOrders({ xTenant: 't', status: ['open'], createdAfter: new Date() })
  const item: orders.LineItem = { sku: 'a', quantity: 1, unit_price: { amount_minor: 1n, currency: 'EUR' } }
  const m: payments.PaymentMethod = { type: 'wallet', provider: 'alipay' }
  if (m.type === 'wallet') console.log(m.provider)
  try {
    await c.createOrder({ body: { customer_id: 'c', items: [item] }, idempotencyKey: 'k' })
  } catch (e) {
    if (e instanceof orders.ConflictError) console.log(e.model.code, e.status, e.traceId)
  }
  const d: hostile.Date_ = { big: 1n, 'x-rate': 1, ['__proto__']: 'p' }
  const hooked: payments.Payment = payments.read.Payment(JSON.parse('{}'))
  console.log(hooked.amount.amount_minor + 1n)
  console.log(page.items.length, d)
  return o.total.amount_minor
}
void main
`
  const r = typecheck('good.ts', good, ['--module', 'commonjs', '--moduleResolution', 'node10'])
  assert.equal(r.code, 0, r.out)
  // The same as ESM, resolving through the packages' exports maps (node16).
  const esm = good.replace(/'\.\/(orders|payments|hostile)'/g, "'./$1/index.mjs'")
  const r2 = typecheck('good.mts', esm, ['--module', 'node16', '--moduleResolution', 'node16'])
  assert.equal(r2.code, 0, r2.out)
})

test('tsc --strict rejects a wrong argument type and a missing required field', () => {
  const cases = [
    ['getOrder({ orderId: 42 })', /error TS2322: Type 'number' is not assignable to type 'string'/],
    ["listOrders({ status: ['open'] })", /error TS2345: .*Property 'xTenant' is missing/s],
    ["listOrders({ xTenant: 't', status: ['lost'] })", /error TS2322: Type '"lost"' is not assignable to type 'OrderStatus'/],
    ["createOrder({ body: { customer_id: 'c', items: [{ sku: 'a', quantity: 1 }] } })", /error TS2741: Property 'unit_price' is missing/],
    ["createOrder({ body: { customer_id: 'c', items: [{ sku: 'a', quantity: 1, unit_price: { amount_minor: 1, currency: 'EUR' } }] } })", /error TS2322: Type 'number' is not assignable to type 'bigint'/],
    ["getOrder({ orderId: 'x' }, { signal: 'stop' })", /error TS2322: Type 'string' is not assignable to type 'AbortSignal'/],
  ]
  // One tsc run over one file per case: each file must fail, with its own error.
  const files = cases.map(([call], i) => {
    const name = `bad${i}.ts`
    fs.writeFileSync(path.join(dir, name), `${HEAD}void c.${call}\n`)
    return name
  })
  const r = spawnSync(tsc, ['--strict', '--noEmit', '--target', 'es2022', '--types', 'node', '--module', 'commonjs', '--moduleResolution', 'node10', ...files], { cwd: dir, encoding: 'utf8' })
  const out = r.stdout + r.stderr
  assert.equal(r.status, 2, out)
  cases.forEach(([call, expected], i) => {
    const errors = out.split(/\n(?=\S)/).filter((e) => e.startsWith(`bad${i}.ts(`))
    assert.equal(errors.length, 1, `tsc accepted c.${call} (or found more than its one error):\n${out}`)
    assert.match(errors[0], expected, `c.${call}`)
  })
})
