#!/usr/bin/env node
'use strict'
// Builds the native module from source with cargo and copies it to harness-sdk.node.
// Needs only a Rust toolchain: nothing from npm, so it works as the package's `install` script
// when someone runs `npm install ./bindings-node` from another folder.
// HARNESS_NODE_PROFILE=debug builds a debug module (faster to compile, used by the tests).

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const pkgDir = path.resolve(__dirname, '..')
const profile = process.env.HARNESS_NODE_PROFILE === 'debug' ? 'debug' : 'release'
const args = ['build', '-p', 'harness-node', '--lib', '--message-format=json-render-diagnostics']
if (profile === 'release') args.push('--release')

const cargo = process.env.CARGO || 'cargo'
const res = spawnSync(cargo, args, {
  cwd: pkgDir,
  stdio: ['ignore', 'pipe', 'inherit'],
  maxBuffer: 1 << 30,
  encoding: 'utf8',
})
if (res.error) {
  console.error(`harness-sdk: could not run ${cargo}: ${res.error.message}. Building from source needs a Rust toolchain (https://rustup.rs).`)
  process.exit(1)
}
if (res.status !== 0) {
  console.error(`harness-sdk: cargo build failed (exit ${res.status})`)
  process.exit(res.status || 1)
}

let built
for (const line of res.stdout.split('\n')) {
  if (!line.startsWith('{')) continue
  let msg
  try {
    msg = JSON.parse(line)
  } catch {
    continue
  }
  if (msg.reason === 'compiler-artifact' && msg.target && msg.target.name === 'harness_node' && msg.target.kind.includes('cdylib')) {
    built = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f))
  }
}
if (!built) {
  console.error('harness-sdk: cargo did not report the harness_node cdylib')
  process.exit(1)
}
const dest = path.join(pkgDir, 'harness-sdk.node')
// Copy to a temp name then rename: a process that has the old module loaded keeps its mapping.
const tmp = `${dest}.${process.pid}.tmp`
fs.copyFileSync(built, tmp)
fs.renameSync(tmp, dest)
console.error(`harness-sdk: built ${path.relative(pkgDir, built)} (${profile}) -> harness-sdk.node`)
