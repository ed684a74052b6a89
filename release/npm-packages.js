'use strict'
// Lays out the npm packages of a release (called by release/build.sh):
//   node release/npm-packages.js VERSION MAIN_DIR PLATFORM=PLATFORM_DIR...
// Each PLATFORM_DIR already holds harness-sdk.PLATFORM.node; this writes its package.json (with
// the os/cpu/libc npm matches) and README. MAIN_DIR gets the JS package: bindings-node's JS files
// and README, and a package.json with no install script (nothing compiles at install time) and
// every Linux platform package as an optional dependency, as napi-rs lays packages out (npm
// installs the one whose os/cpu/libc match; index.js loads it and names the platform when none is).
const fs = require('node:fs')
const path = require('node:path')

const [version, mainDir, ...platformDirs] = process.argv.slice(2)
if (!mainDir || platformDirs.length === 0) throw new Error('usage: npm-packages.js VERSION MAIN_DIR PLATFORM=PLATFORM_DIR...')
const src = path.resolve(__dirname, '..', 'bindings-node')
const pkg = JSON.parse(fs.readFileSync(path.join(src, 'package.json'), 'utf8'))
if (pkg.version !== version) throw new Error(`bindings-node/package.json says ${pkg.version}, the release is ${version}`)

// What each platform name means to npm (os, cpu, libc). Every one is released together, so the
// main package depends on all of them (npm skips those that do not match the machine).
const PLATFORMS = {
  'linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'], floor: 'glibc 2.17' },
  'linux-arm64-gnu': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'], floor: 'glibc 2.17' },
  'linux-x64-musl': { os: ['linux'], cpu: ['x64'], libc: ['musl'], floor: 'musl 1.2 (Alpine 3.13+)' },
  'linux-arm64-musl': { os: ['linux'], cpu: ['arm64'], libc: ['musl'], floor: 'musl 1.2 (Alpine 3.13+)' },
}

const common = {
  version,
  license: pkg.license,
  engines: pkg.engines,
  repository: pkg.repository,
  homepage: pkg.homepage,
}

for (const entry of platformDirs) {
  const [platform, platformDir] = entry.split('=')
  const { floor, ...target } = PLATFORMS[platform] || {}
  if (!floor) throw new Error(`unknown platform ${platform} (known: ${Object.keys(PLATFORMS).join(', ')})`)
  const platformName = `@harness-sdk/${platform}`
  const binary = `harness-sdk.${platform}.node`
  if (!fs.existsSync(path.join(platformDir, binary))) throw new Error(`${platformDir} has no ${binary}`)

  const platformPkg = {
    name: platformName,
    ...common,
    description: `The prebuilt native module of harness-sdk for ${platform}, ${floor} or newer (installed by harness-sdk; not used directly).`,
    main: binary,
    files: [binary, 'README.md'],
    ...target,
  }
  fs.writeFileSync(path.join(platformDir, 'package.json'), JSON.stringify(platformPkg, null, 2) + '\n')
  fs.writeFileSync(
    path.join(platformDir, 'README.md'),
    `# ${platformName}\n\nThe prebuilt native module (${binary}) of [harness-sdk](https://www.npmjs.com/package/harness-sdk) ` +
      `${version} for ${platform} (${floor} or newer). Install \`harness-sdk\`, which depends on it; this package has no API of its own.\n`,
  )
}

// openapi.*: harness-sdk/openapi, the runtime of the TypeScript clients `harness codegen` writes.
const files = ['index.js', 'index.mjs', 'index.d.ts', 'index.d.mts', 'types.d.ts', 'errors.js', 'errors.d.ts', 'openapi.js', 'openapi.mjs', 'openapi.d.ts', 'README.md']
for (const f of files) fs.copyFileSync(path.join(src, f), path.join(mainDir, f))
const mainPkg = {
  name: pkg.name,
  ...common,
  description: pkg.description,
  keywords: ['http', 'resilience', 'retry', 'circuit-breaker', 'bulkhead', 'rate-limit', 'llm', 'routing'],
  main: pkg.main,
  types: pkg.types,
  exports: pkg.exports,
  files,
  optionalDependencies: Object.fromEntries(Object.keys(PLATFORMS).map((p) => [`@harness-sdk/${p}`, version])),
  peerDependencies: pkg.peerDependencies,
  peerDependenciesMeta: pkg.peerDependenciesMeta,
}
fs.writeFileSync(path.join(mainDir, 'package.json'), JSON.stringify(mainPkg, null, 2) + '\n')
