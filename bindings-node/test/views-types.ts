// Typechecked by views.test.js (tsc --noEmit --strict); never run. The config, the views and
// the events are the generated types (./types.d.ts), reached through the package's own names.
import {
  BreakerInfo,
  CacheStamp,
  ChatResponse,
  Client,
  Config,
  CredentialState,
  Description,
  ErrorView,
  HarnessConfig,
  HarnessEvent,
  KeyState,
  ProviderState,
  RouteState,
  ServiceConfig,
  Usage,
} from '..'

export async function views(): Promise<void> {
  const service: ServiceConfig = { base_url: 'http://127.0.0.1:9', timeouts: { request_ms: 2000 }, auth: { type: 'header', header: 'x-api-key', keys: [{ value: 'k', name: 'first' }] } }
  const config: Config = {
    services: { llm: service },
    routes: { chat: { adapter: 'openai-compatible', strategy: 'priority', providers: [{ id: 'a', service: 'llm', model: 'm', weight: 1 }] } },
  }
  const same: HarnessConfig = config
  const client = new Client(same)

  const route: RouteState = client.routingState('chat')
  const p: ProviderState = route.providers[0]
  const weights: number[] = [p.weight, p.effectiveWeight, p.health, p.successRate, p.inFlight]
  const latency: number | null = p.latencyEwmaMs
  const breaker: 'closed' | 'open' | 'half_open' = p.breaker

  const [cred]: CredentialState[] = client.credentialsState()
  const key: KeyState = cred.keys[0]
  const retryAfter: number | null = key.retryAfterMs
  const expires: number | null = cred.expiresAtMs

  const b: BreakerInfo = client.breakerDetails('llm', 'POST', '/v1/chat/completions')
  const rates: number[] = [b.admitRatio, b.failureRate, b.slowCallRate]
  const all: BreakerInfo[] = client.breakers()
  const d: Description = client.describe()
  const version: string = d.configVersion
  // @ts-expect-error breakerDetails needs a path
  client.breakerDetails('llm', 'POST')
  void [all, version]

  const r: ChatResponse = await client.chat('chat', { messages: [{ role: 'user', content: 'hi' }] })
  const usage: Usage | null = r.usage
  const tokens: number = usage === null ? 0 : usage.promptTokens + usage.completionTokens
  const finish: string | null = r.finishReason
  const pairs: [string, number][] = r.attemptsByProvider
  const raw: Buffer = r.raw
  const stale: boolean = r.stale
  // What a cache did: on a chat answer and on a plain response, and clearing it.
  const chatCached: boolean = r.fromCache
  const chatStamp: CacheStamp | null = r.cache
  const plain = await client.get('llm', '/v1/models')
  const stamp: CacheStamp | null = plain.cache
  const outcome: string | undefined = stamp?.outcome
  const cached: [boolean, boolean] = [plain.fromCache, plain.revalidated]
  const cleared: number = client.cacheClear('llm') + client.cacheClear()
  void [chatCached, chatStamp, outcome, cached, cleared]

  client.on('event', (e: HarnessEvent) => {
    if (e.type === 'provider_failover') {
      const code: string | null | undefined = e.code
      void code
    }
  })
  const shape: (keyof ErrorView)[] = ['kind', 'text', 'retryAfterMs', 'providerErrors']

  void [weights, latency, breaker, retryAfter, expires, rates, tokens, finish, pairs, raw, stale, shape]

  // @ts-expect-error views are camelCased
  void p.effective_weight
  // @ts-expect-error a view's field is read-only on a ChatResponse
  r.content = 'x'
  // @ts-expect-error the strategy is one of three
  const bad: Config = { routes: { chat: { strategy: 'random', providers: [] } } }
  // @ts-expect-error config keys are snake_case, as in the YAML
  const camel: ServiceConfig = { baseUrl: 'http://127.0.0.1:9' }
  void [bad, camel]
  // @ts-expect-error cacheClear takes a service or route name
  client.cacheClear(1)
  client.close()
}
