// Typechecked by adaptive.test.js (tsc --noEmit --strict); never run.
import { BreakerDetails, BreakerPhase, BreakerState, Client, HarnessConfig, ServiceConfig } from '..'

export function adaptive(): void {
  const window: ServiceConfig = {
    base_url: 'http://127.0.0.1:9',
    breaker: {
      mode: 'sliding_window',
      window: { type: 'count', size: 100 },
      minimum_calls: 20,
      failure_rate_threshold: 0.5,
      slow_call: { duration_ms: 2000, rate_threshold: 0.8 },
      open_ms: 30_000,
      half_open: { probes: 3, success_rate: 0.67, ramp: [0.1, 0.5, 1.0], step_ms: 5000 },
    },
    hedge: { after: 'p95', max_extra: 1, budget_ratio: 0.05 },
    bulkhead: { adaptive: { algorithm: 'gradient2', min: 4, max: 200, initial: 20, tolerance: 1.5, window_ms: 100 } },
    endpoints: {
      'GET /orders/{id}': { breaker: { mode: 'sliding_window', window: { type: 'time', size_ms: 10_000 } }, hedge: { after_ms: 150 } },
      '/orders': { response_schema: 'schemas/orders.json', validate: 'warn', breaker_counts: true },
    },
  }
  const config: HarnessConfig = { services: { orders: window, legacy: { base_url: 'http://127.0.0.1:9', breaker: { failure_threshold: 3, half_open_probes: 1 }, bulkhead: { max_concurrency: 7 } } } }
  const client = new Client(config)
  const d: BreakerDetails = client.breakerDetails('orders', 'GET', '/orders/42')
  const state: BreakerState = d.state
  const phase: BreakerPhase = d.phase
  const numbers: number[] = [d.admitRatio, d.calls, d.failureRate, d.slowCallRate]
  const names: string[] = [d.service, d.endpoint, d.method]
  client.breakerDetails('orders', 'GET', '/orders/42', 'GET /orders/{id}')
  const limit: number = client.bulkheadLimit('orders')
  void [state, phase, numbers, names, limit]
  // @ts-expect-error a phase is one of four
  const bad: BreakerPhase = 'half_open'
  // @ts-expect-error the mode is consecutive or sliding_window
  const badMode: ServiceConfig = { base_url: 'x', breaker: { mode: 'rate' } }
  // @ts-expect-error the adaptive algorithm is gradient2 or vegas
  const badAlgo: ServiceConfig = { base_url: 'x', bulkhead: { adaptive: { algorithm: 'aimd' } } }
  // @ts-expect-error the service is a string
  client.bulkheadLimit(1)
  void [bad, badMode, badAlgo]
  client.close()
}
