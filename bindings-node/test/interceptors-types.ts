// Typechecked by interceptors.test.js (tsc --noEmit --strict); never run.
import { Client, Reject, RejectOptions, Interceptor, InterceptedRequest, InterceptedResponse, RequestChanges, InterceptorError } from '..'

const tenant: Interceptor = {
  name: 'tenant',
  level: 'attempt',
  services: ['orders'],
  before(r: InterceptedRequest): RequestChanges {
    const body: Buffer | null = r.body
    const attempt: number | null = r.attempt
    const pairs: [string, string][] = r.headers
    void [body, attempt, pairs, r.traceId, r.json, r.provider, r.query, r.path, r.method, r.endpoint]
    return { headers: { 'x-tenant': 't1', 'x-drop': null }, query: { page: 2 }, secret: ['x-tenant'] }
  },
}

class PartnerCheck implements Interceptor {
  name = 'partner'
  wantBody = true
  async after(r: InterceptedResponse): Promise<void> {
    const ms: number = r.elapsedMs
    const status: number = r.status
    void [ms, status, r.body, r.traceId]
    const options: RejectOptions = { retryable: true, code: 'BUSY' }
    if ((r.json as { errCode?: string } | null)?.errCode) throw new Reject('busy', options)
  }
}

export async function register(client: Client): Promise<void> {
  const a: string = client.use(tenant)
  client.use(new PartnerCheck())
  client.use({ before: async () => ({ body: new Uint8Array([1, 2]) }) })
  client.use({ before: () => undefined, after: (r) => console.log(r.status) })
  client.use({ before: () => ({ json: { a: 1 }, path: '/v2/x' }) })
  const removed: boolean = client.removeInterceptor(a)
  void removed
  // @ts-expect-error a level is application or attempt
  client.use({ before() {}, level: 'call' })
  // @ts-expect-error a body is bytes
  client.use({ before: () => ({ body: 'text' }) })
  const r = new Reject('no')
  const retryable: boolean = r.retryable
  const code: string | undefined = r.code
  void [retryable, code]
  try {
    await client.get('orders', '/x')
  } catch (e) {
    if (e instanceof InterceptorError) console.log(e.errorCode)
  }
}
