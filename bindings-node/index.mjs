// ESM entry point: the same classes as the CommonJS entry (one module instance, so
// `instanceof` agrees between `import` and `require`).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const sdk = require('./index.js')

export const {
  Client,
  Response,
  StreamResponse,
  ChatResponse,
  ChatStream,
  Idempotency,
  Lease,
  HarnessError,
  TimeoutError,
  CircuitOpenError,
  BulkheadFullError,
  RateLimitedError,
  HttpStatusError,
  AuthError,
  SchemaError,
  ConnectError,
  CancelledError,
  NoHealthyProviderError,
  ConfigError,
  ProtocolError,
  ResponseTooLargeError,
  DuplicateInFlightError,
  ERROR_NAMES,
} = sdk
export default sdk
