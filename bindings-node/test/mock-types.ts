// Typechecked by mock.test.js (tsc --noEmit --strict); never run.
import { Client, FaultKind, HarnessConfig, MockResponse, RequestFinishedEvent } from '..'

export async function mocks(): Promise<void> {
  const config: HarnessConfig = {
    services: { orders: { base_url: 'http://127.0.0.1:9' } },
    mock: {
      enabled: true,
      services: {
        orders: [
          { match: { method: 'GET', path: '/orders/{id}' }, status: 200, json: { id: '{id}' }, latency_ms: 20 },
          { match: { method: 'POST', path: '/orders' }, status: 201, json_file: 'fixtures/order-created.json' },
          { match: { path: '*' }, status: 404, headers: { 'x-mock': '1' } },
        ],
      },
    },
    faults: {
      enabled: true,
      seed: 1,
      rules: [
        { service: 'orders', endpoint: 'GET /orders/{id}', rate: 0.1, fault: 'latency', latency_ms: 2000 },
        { service: 'orders', rate: 0.05, fault: 'status', status: 429, retry_after_s: 1 },
        { service: 'orders', rate: 0.01, fault: 'stream_cut', after_bytes: 200 },
      ],
    },
  }
  const client = new Client(config)
  const answer: MockResponse = { status: 200, json: { id: '{id}' }, headers: { 'x-a': 'b' }, latencyMs: 5 }
  client.mock('orders', 'GET', '/orders/{id}', answer)
  client.mock('orders', '*', '*', { body: 'fallback', headers: [['x-a', 'b']] })
  client.mock('orders', 'GET', '/empty')
  client.clearMocks('orders')
  client.clearMocks()
  client.on('request_finished', (e: RequestFinishedEvent) => {
    // The record leaves `fault` out when no fault was injected (the generated type says so).
    const fault: string | null | undefined = e.fault
    const kinds: FaultKind[] = ['latency', 'status', 'reset', 'stream_cut']
    void [fault, kinds]
  })
  // @ts-expect-error latencyMs is a number
  client.mock('orders', 'GET', '/x', { latencyMs: '5' })
  // @ts-expect-error body is text
  client.mock('orders', 'GET', '/x', { body: Buffer.from('x') })
  // @ts-expect-error a fault is one of the four kinds
  const bad: HarnessConfig = { faults: { rules: [{ service: 'orders', rate: 1, fault: 'explode' }] } }
  void bad
  client.close()
}
