'use strict'
// Starts the shared fault-injecting upstream (tests/upstream) as a child process.

const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')

const repoRoot = path.resolve(__dirname, '..', '..')

function upstreamBin() {
  return (
    process.env.HARNESS_UPSTREAM_BIN ||
    path.join(repoRoot, 'target', process.env.CARGO_BUILD_TARGET || 'x86_64-unknown-linux-gnu', 'debug', 'harness-upstream')
  )
}

/** Resolves to { addr, blackhole, closed, url(p), admin(method, p, body), stop() }. */
function startUpstream() {
  return new Promise((resolve, reject) => {
    const child = spawn(upstreamBin(), [], { stdio: ['pipe', 'pipe', 'inherit'] })
    child.on('error', reject)
    const rl = readline.createInterface({ input: child.stdout })
    rl.once('line', (line) => {
      rl.close()
      child.stdout.resume()
      const info = JSON.parse(line)
      const base = `http://${info.addr}`
      resolve({
        ...info,
        base,
        async admin(method, p, body) {
          const res = await fetch(base + p, {
            method,
            body: body === undefined ? undefined : JSON.stringify(body),
            headers: body === undefined ? undefined : { 'content-type': 'application/json' },
          })
          const text = await res.text()
          if (!res.ok) throw new Error(`upstream admin ${method} ${p}: ${res.status} ${text}`)
          return text ? JSON.parse(text) : undefined
        },
        stop() {
          return new Promise((done) => {
            if (child.exitCode !== null) return done()
            child.once('exit', () => done())
            child.stdin.end()
            setTimeout(() => child.kill('SIGKILL'), 2000).unref()
          })
        },
      })
    })
    child.once('exit', (code) => reject(new Error(`harness-upstream exited early (${code})`)))
  })
}

module.exports = { startUpstream, upstreamBin, repoRoot }
