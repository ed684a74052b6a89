// Typechecked by adapters.test.js (tsc --noEmit --strict); never run.
import {
  Client,
  EmbedResponse,
  EmbedOptions,
  HostAdapter,
  AdapterRequestInput,
  AdapterRequest,
  AdapterResponseInput,
  AdapterAnswer,
  AdapterError,
  AdapterEventInput,
  AdapterEvent,
  Usage,
} from '..'

export async function embeddings(client: Client, signal: AbortSignal): Promise<void> {
  const options: EmbedOptions = { dimensions: 3, headers: { 'x-tenant': 't' }, timeoutMs: 1000, principal: 'u', signal }
  const r: EmbedResponse = await client.embed('embed', ['a', 'bb'], options)
  const vectors: Float32Array[] = r.vectors
  const first: Float32Array = vectors[0]
  const buffer: ArrayBufferLike = first.buffer
  const count: number = r.count
  const dims: number = r.dimensions
  const usage: Usage | null = r.usage
  const cost: number | null = r.cost
  const provider: string | null = r.provider
  const model: string | null = r.model
  void [buffer, count, dims, usage?.promptTokens, cost, provider, model, r.route, r.batches, r.attempts, r.traceId, r.elapsedMs]
  await client.embed('embed', ['only'])
  // @ts-expect-error inputs are strings
  await client.embed('embed', [1, 2])
}

const sync: HostAdapter = {
  buildRequest(input: AdapterRequestInput): AdapterRequest {
    const prompt = input.request.messages.map((m) => String(m.content)).join('\n')
    return { path: '/inhouse/generate', body: { prompt, stream: input.stream, model: input.provider.model }, headers: { 'x-tenant': 't1' } }
  },
  parseResponse(input: AdapterResponseInput): AdapterAnswer | AdapterError {
    if (input.status !== 200) return { error: { code: 'overloaded', message: 'busy' } }
    const b = JSON.parse(input.body)
    return { content: b.output.text, finish_reason: 'stop', usage: { prompt_tokens: b.tokens.in, completion_tokens: b.tokens.out } }
  },
  parseStreamEvent(input: AdapterEventInput): AdapterEvent | null {
    const d = JSON.parse(input.data)
    return d.end ? { done: true, finish_reason: 'stop' } : { content: d.token }
  },
}

class AsyncAdapter implements HostAdapter {
  async buildRequest(input: AdapterRequestInput): Promise<AdapterRequest> {
    return sync.buildRequest(input) as AdapterRequest
  }
  async parseResponse(input: AdapterResponseInput): Promise<AdapterAnswer | AdapterError> {
    return { content: input.body }
  }
  async parseStreamEvent(_input: AdapterEventInput): Promise<AdapterEvent | null> {
    return null
  }
}

export function adapters(client: Client): void {
  client.registerAdapter('inhouse', sync)
  client.registerAdapter('inhouse-async', new AsyncAdapter())
  // @ts-expect-error every method is required
  client.registerAdapter('partial', { buildRequest: sync.buildRequest, parseResponse: sync.parseResponse })
}
