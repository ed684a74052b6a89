'use strict'
// How the package finds its native module: the version check and the missing-platform error.
// Each case loads a copy of index.js from a temporary folder in a child process, so the real
// module's state is untouched.
const { test } = require('node:test')
const assert = require('node:assert')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const pkgDir = path.resolve(__dirname, '..')
const pkg = require('../package.json')

function copyPackage(version, withNative) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'harness-loader-'))
  fs.copyFileSync(path.join(pkgDir, 'index.js'), path.join(dir, 'index.js'))
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ ...pkg, version }))
  if (withNative) fs.symlinkSync(path.join(pkgDir, 'harness-sdk.node'), path.join(dir, 'harness-sdk.node'))
  return dir
}

function load(dir) {
  return spawnSync(process.execPath, ['-e', `require(${JSON.stringify(dir)})`], { encoding: 'utf8', cwd: dir })
}

test('the native module reports the package version', () => {
  const native = require('../harness-sdk.node')
  assert.strictEqual(native.nativeVersion(), pkg.version)
})

test('a native module from another build is refused, naming both versions', () => {
  const dir = copyPackage('0.0.0-other', true)
  try {
    const r = load(dir)
    assert.notStrictEqual(r.status, 0)
    assert.match(r.stderr, /harness-sdk 0\.0\.0-other: its native module .* is version \d+\.\d+\.\d+; reinstall harness-sdk/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('with no native module for the platform, the error names the platform and the package to install', () => {
  const dir = copyPackage(pkg.version, false)
  try {
    const r = load(dir)
    assert.notStrictEqual(r.status, 0)
    assert.match(r.stderr, /no native module for this platform \(linux-x64-gnu\): @harness-sdk\/linux-x64-gnu is not installed/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
