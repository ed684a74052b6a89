// Typechecked by routing.test.js (tsc --noEmit --strict); never run.
import {
  Client,
  ChatResponse,
  ChatStream,
  ChatChunk,
  HarnessError,
  NoHealthyProviderError,
  ProviderErrorEntry,
  RouteState,
  Usage,
  HarnessEvent,
} from '..'

export async function routing(client: Client, signal: AbortSignal): Promise<void> {
  const r: ChatResponse = await client.chat(
    'chat',
    { messages: [{ role: 'user', content: 'hi' }], temperature: 0.2, max_tokens: 64 },
    { headers: { 'x-tenant': 't' }, timeoutMs: 1000, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', signal },
  )
  const content: string = r.content
  const provider: string | null = r.provider
  const usage: Usage | null = r.usage
  const tokens: number | undefined = usage?.totalTokens
  const cost: number | null = r.cost
  const pairs: Array<[string, number]> = r.attemptsByProvider
  const stale: boolean = r.stale
  const fallback: 'cache' | 'static' | null = r.fallback
  const raw: Buffer = r.raw
  void [content, provider, tokens, cost, pairs, stale, fallback, raw, r.finishReason, r.model, r.traceId, r.elapsedMs, r.attempts]

  const stream: ChatStream = await client.chatStream('chat', { messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'u' }] })
  for await (const chunk of stream) {
    const c: ChatChunk = chunk
    if (c.kind === 'restart') console.log('restart:', c.reason)
    else if (c.kind === 'delta') process.stdout.write(c.content)
    else console.log(c.finishReason, c.usage?.promptTokens, c.cost)
  }
  stream.cancel()

  const res = await client.request({ service: 'chat', method: 'POST', path: '/v1/chat/completions', json: {} })
  const answered: string | null = res.provider
  const by: Array<[string, number]> | null = res.attemptsByProvider
  void [answered, by, res.usage, res.cost, res.stale, res.fallback, res.model, res.route]

  const state: RouteState = client.routingState('chat')
  for (const p of state.providers) void [p.id, p.weight, p.effectiveWeight, p.health, p.breaker, p.inFlight, p.coolingMs, p.lastError]
  const version: string = client.setWeight('chat', 'backup', 0)
  void version

  try {
    await client.chat('chat', { messages: [{ role: 'user', content: 'x' }] })
  } catch (e) {
    if (e instanceof NoHealthyProviderError) {
      const list: ProviderErrorEntry[] = e.providerErrors
      for (const { provider: id, error } of list) console.log(id, error)
    }
    if (e instanceof HarnessError) {
      const who: string | undefined = e.provider
      const phase = e.phase
      if (phase === 'ttft') console.log(who)
    }
  }

  client.on('provider_failover', (e) => console.log(e.from, e.to, e.reason, e.status, e.code))
  client.on('stream_restarted', (e) => console.log(e.mode))
  client.on('fallback_served', (e) => console.log(e.kind))
  client.on('stream_chunk_skipped', (e) => console.log(e.provider, e.reason))
  client.on('request_finished', (e) => console.log(e.route, e.provider, e.model, e.cost, e.fallback))
  client.on('event', (e: HarnessEvent) => console.log(e.type))

  const config = new Client({
    services: { a: { base_url: 'http://a' }, b: { base_url: 'http://b' } },
    routes: {
      chat: {
        adapter: 'openai-compatible',
        strategy: 'weighted-health',
        stream: { mid_stream: 'restart' },
        providers: [
          { id: 'a', service: 'a', model: 'm', weight: 3, price: { input_per_1k: 0.1, output_per_1k: 0.2 } },
          { id: 'b', service: 'b', model: 'n', weight: 1, params: { temperature: { range: [0, 1] }, max_tokens_field: 'max_completion_tokens' } },
        ],
      },
    },
  })
  config.close()
}
