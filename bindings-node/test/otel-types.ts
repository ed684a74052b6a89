// Typechecked by otel.test.js (tsc --noEmit --strict); never run.
import { Client, AuditRecordEvent, HarnessConfig, HarnessEvent } from '..'

export async function observability(signal: AbortSignal): Promise<void> {
  const config: HarnessConfig = {
    services: { orders: { base_url: 'http://127.0.0.1:8080' } },
    otel: { endpoint: 'http://127.0.0.1:4318', sample_ratio: 1.0, service_name: 'shop', delay_ms: 50, max_queue: 2048, max_batch: 512, timeout_ms: 10000 },
    audit: { enabled: true, include_bodies: true, mask: ['password'], patterns: ['\\d{16}'], sink: { listener: true, file: 'audit.jsonl', max_bytes: 1 << 20, keep: 2 } },
  }
  const client = new Client(config)
  client.on('audit_record', (e) => {
    // An audit record leaves out what it does not have (the generated type says so).
    const principal: string | null | undefined = e.principal
    const outcome: string = e.outcome
    const status: number | null | undefined = e.status
    const body: unknown = e.response_body
    void [principal, outcome, status, body, e.service, e.provider, e.endpoint, e.method, e.attempts, e.duration_ms, e.cost, e.trace_id, e.ts_ms, e.client, e.request_body]
  })
  client.on('event', (e: HarnessEvent) => {
    if (e.type === 'audit_record') {
      const rec: AuditRecordEvent = e
      void rec
    }
  })
  await client.get('orders', '/orders/42', { principal: 'user-42', signal })
  await client.request({ service: 'orders', method: 'POST', path: '/orders', json: {}, principal: 'tenant-7' })
  await client.stream('orders', 'GET', '/orders/42', { principal: 'user-42' })
  await client.chat('chat', { messages: [{ role: 'user', content: 'hi' }] }, { principal: 'user-42' })
  await client.chatStream('chat', { messages: [{ role: 'user', content: 'hi' }] }, { principal: 'user-42' })
  // @ts-expect-error a principal is a string
  await client.get('orders', '/orders/42', { principal: 42 })
  client.close()
}
