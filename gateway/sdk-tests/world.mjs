// The Node suite's world: the loopback upstream with its simulated providers, and
// `harness serve` in front of it, both real processes (see world.json, shared with Python).
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { openSync, closeSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const bin = join(here, '..', '..', 'target', 'x86_64-unknown-linux-gnu', 'debug')
export const WORLD = JSON.parse(readFileSync(join(here, 'world.json'), 'utf8'))

async function http (method, url, body) {
  const r = await fetch(url, { method, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10_000) })
  return { status: r.status, body: await r.json() }
}

async function freePort () {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  await once(s, 'close')
  return port
}

/** world.json's config with the upstream's address and the callers' key hashes filled in. */
export function gatewayConfig (upstreamUrl) {
  const config = JSON.parse(JSON.stringify(WORLD.config).replaceAll('{llm}', `${upstreamUrl}/llm/`))
  for (const [name, caller] of Object.entries(config.callers)) {
    caller.key_sha256 = createHash('sha256').update(WORLD.keys[name]).digest('hex')
  }
  return config
}

/** Starts the upstream and the gateway; `stop()` ends both and checks the gateway exits 0. */
export async function startWorld () {
  const tmp = mkdtempSync(join(tmpdir(), 'harness-sdk-'))
  const upstream = spawn(process.env.HARNESS_UPSTREAM_BIN ?? join(bin, 'harness-upstream'), [], { stdio: ['pipe', 'pipe', 'inherit'] })
  let gateway
  const logPath = join(tmp, 'gateway.log')
  const log = () => readFileSync(logPath, 'utf8')
  const killAll = () => {
    gateway?.kill('SIGKILL')
    upstream.stdin.end()
  }
  try {
    const [line] = await once(createInterface({ input: upstream.stdout }), 'line')
    const upstreamUrl = `http://${JSON.parse(line).addr}`
    for (const [name, spec] of Object.entries(WORLD.providers)) {
      const r = await http('POST', `${upstreamUrl}/__admin/provider/${name}`, spec)
      if (r.status !== 200) throw new Error(`provider ${name}: ${r.status}`)
    }
    const configPath = join(tmp, 'harness.json')
    writeFileSync(configPath, JSON.stringify(gatewayConfig(upstreamUrl), null, 2))
    const port = await freePort()
    const fd = openSync(logPath, 'w')
    gateway = spawn(process.env.HARNESS_BIN ?? join(bin, 'harness'), ['serve', '--config', configPath, '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', fd, fd] })
    closeSync(fd)
    const exited = new Promise((resolve) => gateway.once('exit', (code, signal) => resolve({ code, signal })))
    const gatewayUrl = `http://127.0.0.1:${port}`
    const deadline = Date.now() + 30_000
    for (;;) {
      if (gateway.exitCode !== null) throw new Error(`harness serve exited with ${gateway.exitCode}:\n${log()}`)
      try {
        if ((await http('GET', `${gatewayUrl}/healthz`)).status === 200) break
      } catch {}
      if (Date.now() > deadline) throw new Error(`no /healthz within 30 s:\n${log()}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return {
      baseURL: `${gatewayUrl}/v1`,
      keys: WORLD.keys,
      providers: WORLD.providers,
      providerLog: async (name) => (await http('GET', `${upstreamUrl}/__admin/provider-log/${name}`)).body,
      async stop () {
        gateway.kill('SIGTERM')
        const timer = setTimeout(() => gateway.kill('SIGKILL'), 30_000)
        const { code, signal } = await exited
        clearTimeout(timer)
        upstream.stdin.end()
        await once(upstream, 'exit')
        const text = log()
        rmSync(tmp, { recursive: true, force: true })
        if (code !== 0) throw new Error(`harness serve exited with ${code ?? signal} after SIGTERM:\n${text}`)
      },
    }
  } catch (e) {
    killAll()
    throw e
  }
}
