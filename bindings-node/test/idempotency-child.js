'use strict'
// A child process of test/idempotency.test.js: delivers one message in `rounds` waves of
// `n` concurrent deliveries through `Idempotency.run` on a shared redis-server and prints one
// JSON line: how many times its handler ran and what each delivery got. It exits on its own
// (nothing keeps it alive).
// Run by itself (as `node --test test/` does), it does nothing.

const [url, key, n, rounds] = process.argv.slice(2)
if (url !== undefined) {
  const { Idempotency, DuplicateInFlightError } = require('..')
  const idem = new Idempotency({ redis_url: url, lease_ms: 30_000 })
  let runs = 0
  const handler = async () => {
    runs++
    await new Promise((r) => setTimeout(r, 50))
    return { processedBy: process.pid, items: [1, 2, 3] }
  }
  const deliver = () =>
    idem.run(key, handler).then(
      (result) => ({ result }),
      (e) => (e instanceof DuplicateInFlightError ? { inFlight: e.retryAfterMs } : { error: `${e.name}: ${e.message}` }),
    )
  ;(async () => {
    const outcomes = []
    for (let round = 0; round < Number(rounds); round++) {
      const wave = []
      for (let i = 0; i < Number(n); i++) wave.push(deliver())
      outcomes.push(...(await Promise.all(wave)))
      await new Promise((r) => setTimeout(r, 20))
    }
    process.stdout.write(JSON.stringify({ pid: process.pid, runs, outcomes }) + '\n')
  })()
}
