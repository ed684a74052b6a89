// Typechecked by idempotency.test.js (tsc --noEmit --strict); never run.
import { Client, DuplicateInFlightError, Idempotency, IdempotencyConfig, Lease, RateLimitedError } from '..'

export async function receiver(body: Buffer, headers: Record<string, string>): Promise<number> {
  const config: IdempotencyConfig = {
    redis_url: 'redis://127.0.0.1:6379/0',
    ttl_ms: 86_400_000,
    lease_ms: 30_000,
    retry_failed: true,
    on_store_down: 'reject',
    signature: { secret: { env: 'WEBHOOK_SECRET' }, max_skew_ms: 300_000 },
  }
  const idem = new Idempotency(config)
  idem.verify(headers['x-timestamp'], body, headers['x-signature'])
  const sig: string = idem.sign('1700000000', 'body')
  const key: string = idem.key('acme', 'order.paid', 'msg-1')
  try {
    const r: { orderId: number } = await idem.run(key, async () => ({ orderId: 42 }))
    const n: number = await idem.run(key, () => 1)
    void sig
    void r.orderId
    void n
  } catch (e) {
    if (e instanceof DuplicateInFlightError) return e.retryAfterMs ?? 0
    throw e
  }
  const claim = await idem.claim(key)
  if (claim.done) {
    const stored: unknown = claim.result
    void stored
  } else {
    const lease: Lease = claim
    const k: string = lease.key
    const dedup: boolean = lease.deduplicated
    void k
    void dedup
    await lease.complete({ ok: true })
    await lease.fail()
  }
  const text: string = idem.metricsText()
  return text.length
}

export async function limited(client: Client): Promise<void> {
  new Client({
    services: {
      feishu: {
        base_url: 'https://open.feishu.cn',
        rate_limit: {
          rps: 100,
          burst: 20,
          max_wait_ms: 500,
          shared: { redis_url: 'redis://127.0.0.1:6379/0', key: 'feishu-app-1', expected_instances: 20 },
          endpoints: { 'POST /open-apis/im/v1/messages': { rps: 5 } },
        },
        retry: { budget_shared: { redis_url: 'redis://127.0.0.1:6379/0', key: 'feishu' } },
      },
    },
    routes: { chat: { providers: [{ id: 'a', service: 'feishu', weight: 1 }], rate_limit: { rps: 10 } } },
  })
  try {
    await client.get('feishu', '/x')
  } catch (e) {
    if (e instanceof RateLimitedError && e.errorCode === 'client_rate_limited') void e.retryAfterMs
  }
}
