'use strict'
// Starts a real redis-server on a free loopback port for the shared-state tests.

const { spawn } = require('node:child_process')
const net = require('node:net')
const { setTimeout: sleep } = require('node:timers/promises')

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

function accepts(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1')
    sock.once('connect', () => {
      sock.destroy()
      resolve(true)
    })
    sock.once('error', () => resolve(false))
  })
}

/** Resolves to { port, url, stop() } once redis-server accepts connections; fails loudly if it is missing. */
async function startRedis() {
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const failed = new Promise((_, reject) => {
    child.once('error', (e) =>
      reject(new Error(`redis-server could not be started (${e.code || e.message}): install it (apt-get install -y redis-server); .ci/run installs it`)),
    )
    child.once('exit', (code) => reject(new Error(`redis-server exited early (${code})`)))
  })
  failed.catch(() => {})
  const deadline = Date.now() + 10_000
  for (;;) {
    const up = await Promise.race([accepts(port), failed])
    if (up) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error('redis-server did not accept connections within 10 s')
    }
    await sleep(20)
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    stop() {
      return new Promise((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once('exit', () => done())
        child.kill('SIGKILL')
      })
    },
  }
}

module.exports = { startRedis, freePort }
