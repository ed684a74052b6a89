// Run by otel.test.js: hides every `@opentelemetry/*` package (as if not installed), then loads
// the SDK through both entry points and makes two requests to the upstream at argv[2].
// Prints { otelLoadable, sameModule, statuses, traceIds } as JSON.
// Run by itself (as `node --test test/` does), it does nothing.
import Module, { createRequire } from 'node:module'

const base = process.argv[2]
if (base !== undefined) await main(base)

async function main(base) {
  const resolve = Module._resolveFilename
  Module._resolveFilename = function (request, ...rest) {
    if (request.startsWith('@opentelemetry/')) {
      throw Object.assign(new Error(`Cannot find module '${request}'`), { code: 'MODULE_NOT_FOUND' })
    }
    return resolve.call(this, request, ...rest)
  }

  const require = createRequire(import.meta.url)
  let otelLoadable = true
  try {
    require('@opentelemetry/api')
  } catch {
    otelLoadable = false
  }

  const esm = await import('../index.mjs')
  const cjs = require('../index.js')
  const client = new esm.Client({ client: { name: 'node-otel-absent' }, log: { enabled: false }, services: { svc: { base_url: base } } })
  const responses = [await client.get('svc', '/s/otel-absent/a'), await client.get('svc', '/s/otel-absent/b')]
  client.close()
  process.stdout.write(JSON.stringify({
    otelLoadable,
    sameModule: esm.Client === cjs.Client,
    statuses: responses.map((r) => r.status),
    traceIds: responses.map((r) => r.traceId),
  }))
}
