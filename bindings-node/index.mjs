// ESM entry point: the same classes as the CommonJS entry (one module instance, so
// `instanceof` agrees between `import` and `require`). Node reads index.js's export names
// (plain names and its `...require('./errors')`), so nothing is listed twice.
export * from './index.js'
export { default } from './index.js'
