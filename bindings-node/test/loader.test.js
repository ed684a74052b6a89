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

// What the loader asks for on other machines, seen by faking what Node reports about the
// platform in the child (process.arch, and the report that names glibc only on glibc).
function loadAs(dir, { arch, glibc }) {
  const fake =
    `Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} });` +
    `const real = process.report.getReport.bind(process.report);` +
    `process.report.getReport = () => { const r = real(); ${glibc ? '' : 'delete r.header.glibcVersionRuntime;'} return r };`
  return spawnSync(process.execPath, ['-e', `${fake} require(${JSON.stringify(dir)})`], { encoding: 'utf8', cwd: dir })
}

for (const [arch, glibc, platform] of [
  ['x64', false, 'linux-x64-musl'],
  ['arm64', true, 'linux-arm64-gnu'],
  ['arm64', false, 'linux-arm64-musl'],
  ['riscv64', true, 'linux-riscv64-gnu'],
]) {
  test(`on ${arch} with ${glibc ? 'glibc' : 'musl'} the loader asks for @harness-sdk/${platform} and lists the released platforms`, () => {
    const dir = copyPackage(pkg.version, false)
    try {
      const r = loadAs(dir, { arch, glibc })
      assert.notStrictEqual(r.status, 0)
      assert.ok(r.stderr.includes(`no native module for this platform (${platform}): @harness-sdk/${platform} is not installed`), r.stderr)
      assert.match(r.stderr, /prebuilt modules exist for linux-x64-gnu, linux-arm64-gnu, linux-x64-musl and linux-arm64-musl/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
}
