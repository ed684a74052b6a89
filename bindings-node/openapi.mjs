// ESM entry point of harness-sdk/openapi: the same module instance as the CommonJS one.
export * from './openapi.js'
