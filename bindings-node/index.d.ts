// Type declarations for harness-sdk (CommonJS and ESM entry points share them).

import { EventEmitter } from 'node:events'

/** A config object: the same shape as the YAML/JSON/TOML file (snake_case keys, durations in `_ms`). */
export interface HarnessConfig {
  /** Client-wide settings; `name` is sent as the user agent and in logs. */
  client?: { name?: string }
  /** Per-request structured log line on stderr (default on); Node gets records through `client.on('request_finished')`. */
  log?: { enabled?: boolean; sink?: 'stderr' }
  /** The services this client talks to, by name. */
  services?: Record<string, ServiceConfig>
  /** Routes across providers, by name: a request or chat call names a route as it names a service. */
  routes?: Record<string, RouteConfig>
  /** One audit record per request, to a rotating file and/or listeners (`audit_record` events). Off by default. */
  audit?: AuditConfig
  /** Spans to an OpenTelemetry collector over OTLP/HTTP (off until `endpoint` is set). */
  otel?: OtelConfig
  /** Mock mode: services answered from rules, nothing sent (off unless `enabled` or `HARNESS_MOCK=1`). */
  mock?: MockConfig
  /** Seeded fault injection at the transport (off unless `enabled` or `HARNESS_FAULTS=1`). */
  faults?: FaultsConfig
  /** Keys added by later core versions are passed through unchanged. */
  [key: string]: unknown
}

/**
 * `audit:`: one record per request (time, client, principal, service or route, provider, endpoint,
 * method, status, outcome, attempts, duration, cost, trace id). Never a header, token or query string;
 * bodies only with `include_bodies`, and then masked before anything is written.
 */
export interface AuditConfig {
  enabled?: boolean
  sink?: {
    /** A JSON-lines file (default `audit.jsonl`, unless the records go to listeners only). */
    file?: string
    /** Rotate past this size (default 100 MiB), keeping `keep` old files (default 5). */
    max_bytes?: number
    keep?: number
    /** Each record also goes to the client's listeners as an `audit_record` event. */
    listener?: boolean
  }
  /** Keep the (masked) request and response bodies (default false). */
  include_bodies?: boolean
  /** JSON field names whose values become `***`, at any depth, case-insensitive (default: password, token, phone...). */
  mask?: string[]
  /** Regular expressions whose matches in string values become `***`. */
  patterns?: string[]
}

/**
 * `otel:`: the core exports a CLIENT span per request (a child of the caller's `traceparent`, or of
 * the active OpenTelemetry span) and a child span per attempt, batched, over OTLP/HTTP protobuf.
 */
export interface OtelConfig {
  /** The collector's OTLP/HTTP address (e.g. `http://127.0.0.1:4318`); spans go to `/v1/traces` under it. */
  endpoint?: string
  /** The share of new traces recorded, 0 to 1 (default 1); a caller's trace keeps its own sampled flag. */
  sample_ratio?: number
  /** The resource's `service.name` (default: `client.name`). */
  service_name?: string
  /** One export's time limit (default 10000). */
  timeout_ms?: number
  /** Spans held while waiting for export (default 2048); past it new spans are dropped. */
  max_queue?: number
  /** Spans per export request (default 512). */
  max_batch?: number
  /** The longest a span waits for its batch (default 1000). */
  delay_ms?: number
}

/** `mock:`: rules per service, tried in order (after those set with `client.mock()`). */
export interface MockConfig {
  enabled?: boolean
  services?: Record<string, MockRuleConfig[]>
}

/** One mock rule: `{name}` variables of `match.path` are substituted into the answer's strings. */
export interface MockRuleConfig {
  /** `method` absent: any method; `path` a template relative to the base URL, or `*`. */
  match: { method?: string; path: string }
  /** Default 200. */
  status?: number
  /** One of `json`, `json_file` (read when the config loads) or `body`. */
  json?: unknown
  json_file?: string
  body?: string
  headers?: Record<string, string>
  latency_ms?: number
}

/** `faults:`: decisions are a pure function of `seed`, the rule and the request's number. */
export interface FaultsConfig {
  enabled?: boolean
  seed?: number
  rules?: FaultRuleConfig[]
}

export type FaultKind = 'latency' | 'status' | 'reset' | 'stream_cut'

export interface FaultRuleConfig {
  service: string
  /** `"GET /orders/{id}"` or `"/orders/{id}"`; every endpoint when absent. */
  endpoint?: string
  /** The share of matching attempts that get the fault, 0 to 1. */
  rate: number
  fault: FaultKind
  /** `latency`: the wait before sending. */
  latency_ms?: number
  /** `status`: the status answered (with `Retry-After: retry_after_s`). */
  status?: number
  retry_after_s?: number
  /** `stream_cut`: the body breaks after this many bytes. */
  after_bytes?: number
}

/** What `client.mock()` answers. */
export interface MockResponse {
  /** Default 200 (from 200 to 999). */
  status?: number
  /** A JSON answer (give `json` or `body`, not both); `{name}` path variables are substituted into its strings. */
  json?: unknown
  /** A text answer. */
  body?: string
  headers?: Pairs
  /** Waited before answering (default 0); the service's timeouts apply to it. */
  latencyMs?: number
}

/** One service's settings; every key has a safe default. */
export interface ServiceConfig {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  base_url: string
  /** Connect, first-byte, idle (between body chunks) and total timeouts in milliseconds. */
  timeouts?: { connect_ms?: number; response_ms?: number; idle_ms?: number; request_ms?: number }
  /** Retry policy. */
  retry?: {
    max_retries?: number
    base_delay_ms?: number
    max_delay_ms?: number
    retry_on_500?: boolean
    max_retry_after_ms?: number
    budget_ratio?: number
    budget_min_per_sec?: number
    jitter?: boolean
    /** Count the retry budget across a fleet through Redis (the local budget while Redis is down). */
    budget_shared?: { redis_url: string; key: string }
  }
  /** Circuit breaker per (service, endpoint template, method). */
  breaker?: BreakerConfig
  /** Concurrency limit for the service: fixed, or `adaptive` (it follows the measured latency). */
  bulkhead?: BulkheadConfig
  /** Hedged reads: an idempotent request still unanswered after `after` / `after_ms` is sent again; the first answer wins. */
  hedge?: HedgeConfig
  /** Per endpoint (`GET /orders/{id}` or `/orders/{id}`): a response schema, and its own breaker and hedging. */
  endpoints?: Record<string, EndpointConfig>
  /** Static headers sent with every request (values never appear in logs or errors). */
  headers?: Record<string, string>
  /** Redirects: none followed by default; `follow: true` follows same-origin ones only, up to `max`. */
  redirects?: { follow?: boolean; max?: number }
  /** Bounds: response size (default 64 MiB, past it `ResponseTooLargeError`) and endpoints tracked (default 1000). */
  limits?: { max_response_bytes?: number; max_endpoints?: number }
  /** Credentials: a token, a key pool, OAuth2 client credentials, or a JS provider (`type: 'callback'`). */
  auth?: AuthConfig
  /** A client-side rate limit (GCRA); past it a request waits up to `max_wait_ms`, then `RateLimitedError`. */
  rate_limit?: RateLimitConfig
  [key: string]: unknown
}

/**
 * `breaker:` on a service or an endpoint. `consecutive` (the default) opens after
 * `failure_threshold` failures in a row; `sliding_window` opens when the failure rate (or the
 * slow-call rate) over `window` reaches its threshold, once the window holds `minimum_calls`.
 * After `open_ms`, `half_open` probes decide; with a `ramp`, traffic comes back through those
 * fractions, one step every `step_ms`.
 */
export interface BreakerConfig {
  mode?: 'consecutive' | 'sliding_window'
  /** `consecutive`: failures in a row that open the breaker (default 5). */
  failure_threshold?: number
  /** How long the breaker stays open before probing (default 30000). */
  open_ms?: number
  /** Trial calls after `open_ms` (the older spelling of `half_open.probes`). */
  half_open_probes?: number
  /** `sliding_window`: the last `size` calls (default 100), or the calls of the last `size_ms` (default 10000). */
  window?: { type?: 'count'; size?: number } | { type: 'time'; size_ms?: number }
  /** `sliding_window`: no decision on fewer calls than this in the window (default 20). */
  minimum_calls?: number
  /** `sliding_window`: the failure rate, 0 to 1, that opens the breaker (default 0.5). */
  failure_rate_threshold?: number
  /** A call that took at least `duration_ms` is slow; a slow-call rate of `rate_threshold` opens the breaker. */
  slow_call?: { duration_ms: number; rate_threshold: number }
  /** `probes` trial calls, `success_rate` of which must succeed; then the `ramp` fractions, one per `step_ms`. */
  half_open?: { probes?: number; success_rate?: number; ramp?: number[]; step_ms?: number }
}

/** `bulkhead:` on a service. */
export interface BulkheadConfig {
  /** The fixed limit (default 200; unused when `adaptive` is set). */
  max_concurrency?: number
  /** A limit that follows the measured round-trip time, within `min..max`, starting at `initial`. */
  adaptive?: {
    algorithm?: 'gradient2' | 'vegas'
    min?: number
    max?: number
    initial?: number
    /** `gradient2`: the latency rise over the long-term average taken as no queueing (1 to 10). */
    tolerance?: number
    /** Shortest sampling window. */
    window_ms?: number
  }
}

/**
 * `hedge:` on a service or an endpoint. Only idempotent requests (or ones with an idempotency key)
 * are hedged, and hedges draw on their own budget (`budget_ratio` of requests, default 0.05).
 */
export interface HedgeConfig {
  /** A quantile of the endpoint's observed latency, `p50` to `p99.9`. */
  after?: string
  /** A fixed delay instead of `after`. */
  after_ms?: number
  /** Extra attempts at most (default 1). */
  max_extra?: number
  budget_ratio?: number
}

/** `services.<name>.endpoints.<"METHOD /template" or "/template">`. */
export interface EndpointConfig {
  /** A schema file path or the JSON Schema itself; a 2xx JSON body is checked against it. */
  response_schema?: string | Record<string, unknown>
  validate?: 'enforce' | 'warn' | 'off'
  /** A `SchemaError` counts as a downstream failure for the breaker. */
  breaker_counts?: boolean
  /** This endpoint's own breaker (instead of the service's). */
  breaker?: BreakerConfig
  /** This endpoint's own hedging (instead of the service's). */
  hedge?: HedgeConfig
}

/**
 * `services.<name>.rate_limit` (and `routes.<name>.rate_limit`): `rps` sustained with `burst` at
 * once; a request over it waits up to `max_wait_ms` (within its deadline), then fails with
 * `RateLimitedError` (`errorCode` `client_rate_limited`) and nothing is sent. A 429 pauses the
 * service for its `Retry-After` (at most `max_pause_ms`). `shared` makes one limit for a fleet
 * through Redis (while Redis is down each instance takes `rps / expected_instances`).
 */
export interface RateLimitConfig {
  rps: number
  burst?: number
  max_wait_ms?: number
  max_pause_ms?: number
  shared?: { redis_url: string; key: string; expected_instances?: number }
  /** Tighter limits nested under the service's, by endpoint (`GET /orders/{id}` or `/orders/{id}`). */
  endpoints?: Record<string, { rps: number; burst?: number }>
}

/** `routes.<name>`: which providers serve a route, how one is chosen, and what happens when they fail. */
export interface RouteConfig {
  /** `openai-compatible` for `chat`/`chatStream` (answers normalised and priced); `http` (default) passes through. */
  adapter?: 'http' | 'openai-compatible'
  /** How a provider is chosen (default `weighted-health`). */
  strategy?: 'weighted-health' | 'priority' | 'least-latency'
  /** `non-core` routes may be served `fallback.static` when no provider can answer. */
  criticality?: 'core' | 'non-core'
  /** A chat stream's first chunk must come within this long (default 8000). */
  ttft_ms?: number
  /** The deadline across every provider (default: the largest `timeouts.request_ms` of their services). */
  request_ms?: number
  /** Attempts across all providers, the first included (default 3). */
  max_attempts?: number
  /** A 5xx is retried on the same provider this many times before failing over (default 1). */
  same_provider_retries?: number
  budget_ratio?: number
  budget_min_per_sec?: number
  max_retry_after_ms?: number
  health_window_ms?: number
  /** The path a chat call posts to (default `/v1/chat/completions`). */
  path?: string
  /** What a chat stream does when its provider fails after the first chunk (default `hold`). */
  stream?: { mid_stream?: 'hold' | 'restart' | 'error'; hold_bytes?: number }
  providers: RouteProviderConfig[]
  /** A non-retryable provider error code (e.g. `context_length_exceeded`) sent to another provider. */
  on_error?: Record<string, { provider: string }>
  /** Degraded answers: a cached one (`cache_ttl_ms`), or for `non-core` routes a static one. */
  fallback?: { cache_ttl_ms?: number; cache_entries?: number; version?: string; static?: unknown }
  /** A client-side rate limit on the route, under its providers' service limits. */
  rate_limit?: RateLimitConfig
  [key: string]: unknown
}

/** One provider of a route. */
export interface RouteProviderConfig {
  id: string
  /** The service (base URL, timeouts, breaker, bulkhead, auth) the provider is reached through. */
  service: string
  /** The model name sent to this provider. */
  model?: string
  /** Share of traffic; 0 means registered but not serving. */
  weight: number
  degraded_weight?: number
  max_concurrency?: number
  /** Prices per 1,000 tokens, for `cost`. */
  price?: { input_per_1k?: number; output_per_1k?: number }
  /** Per-provider normalisation: the temperature range and the token-limit field. */
  params?: { temperature?: { range: [number, number]; mode?: 'clamp' | 'scale' }; max_tokens_field?: string }
  /** Takes a partial answer as an assistant prefill and continues it. */
  accepts_prefill?: boolean
  [key: string]: unknown
}

/** Where a secret comes from: an environment variable, a file (re-read when it changes) or a literal. */
export type SecretRef = { env: string } | { file: string } | { value: string }

/** `services.<name>.auth`. Secrets never appear in logs, events, errors or `credentialsState()`. */
export interface AuthConfig {
  /** `bearer` (default): `Authorization: Bearer <token>`; `header` / `query`: the token in `header` / `param`. */
  type?: 'bearer' | 'header' | 'query' | 'oauth2_client_credentials' | 'callback'
  /** The token (bearer, header, query). */
  token?: SecretRef
  /** A key pool instead of one token: round-robin, quarantined on 401/403, cooled down on 429. */
  keys?: Array<SecretRef & { name?: string }>
  /** The header for `type: 'header'` (e.g. `X-Api-Key`). */
  header?: string
  /** Put before the token in the header (e.g. `'Bearer '`). */
  prefix?: string
  /** The query parameter for `type: 'query'`. */
  param?: string
  /** OAuth2 client credentials: the token endpoint, client id and secret, and scope. */
  token_url?: string
  client_id?: SecretRef
  client_secret?: SecretRef
  scope?: string
  /** Background refresh from `soft_ms` before expiry, requests wait from `hard_ms`; a refresh may take `timeout_ms`. */
  refresh?: { soft_ms?: number; hard_ms?: number; timeout_ms?: number }
  [key: string]: unknown
}

/** What a token provider returns: the token and, if it expires, its lifetime in seconds. */
export interface ProvidedToken {
  token: string
  expiresIn?: number | null
}

/** A JS token provider (`client.setTokenProvider`): sync or async. */
export type TokenProvider = () => ProvidedToken | PromiseLike<ProvidedToken>

/** One key of a key pool, by index and name (never the key). */
export interface KeyState {
  index: number
  /** The configured name, or the index as a string. */
  name: string
  status: 'ok' | 'cooling' | 'quarantined'
  retryAfterMs: number | null
  lastError: string | null
}

/** A service's credential state (`client.credentialsState()`); never a secret. */
export interface CredentialState {
  service: string
  type: 'bearer' | 'header' | 'query' | 'oauth2_client_credentials' | 'callback'
  status: 'valid' | 'refreshing' | 'expired' | 'dead'
  /** Unix milliseconds; null for a token that does not expire (or none yet). */
  expiresAtMs: number | null
  /** Unix milliseconds of the last refresh. */
  lastRefreshMs: number | null
  lastError: string | null
  /** A key pool's keys; empty otherwise. */
  keys: KeyState[]
}

/** Header or query pairs: a plain object, a Map, `Headers`/`URLSearchParams`, or `[name, value]` pairs. */
export type Pairs =
  | Record<string, string | number | boolean | ReadonlyArray<string | number | boolean> | undefined | null>
  | Iterable<[string, string]> & { entries(): IterableIterator<[string, string]> }
  | ReadonlyArray<readonly [string, string | number | boolean]>

/** Options of one call, apart from service, method and path. */
export interface CallOptions {
  /** Label for breaker keys and metrics; default: the path with ID-like segments collapsed to `{id}`. */
  endpoint?: string
  /** Query parameters. */
  query?: Pairs
  /** Request headers. */
  headers?: Pairs
  /**
   * A JSON body, sent as `JSON.stringify` writes it (key order kept; sets `content-type: application/json`).
   * NaN, ±Infinity, BigInt, lone surrogates and nesting past 512 levels are a `ConfigError`.
   */
  json?: unknown
  /** A raw body. Give either `json` or `body`. */
  body?: Buffer | Uint8Array | ArrayBuffer | string
  /** Sent as `Idempotency-Key`; makes any method safe to retry. */
  idempotencyKey?: string
  /** Overrides the service's total timeout (`timeouts.request_ms`), in milliseconds. */
  timeoutMs?: number
  /**
   * The caller's W3C `traceparent`, continued downstream. Without it (or a `traceparent` header),
   * the active OpenTelemetry span's, when `@opentelemetry/api` is installed.
   */
  traceparent?: string
  /**
   * Who the call is made for (a user or tenant id): it goes into the audit record only, never
   * downstream or into the log line. 1 to 256 characters, no control characters, else `ConfigError`.
   */
  principal?: string
  /**
   * Aborting it cancels the request in Rust (freeing its permits); the promise rejects with `CancelledError`.
   * For `stream()`, it also cancels the body: a waiting or later read rejects with `CancelledError`.
   */
  signal?: AbortSignal
}

/** A full request description for `Client.request`. */
export interface RequestOptions extends CallOptions {
  /** The service name from the config. */
  service: string
  /** The HTTP method (default `GET`). */
  method?: string
  /** The path, starting with `/`, appended to the service's base URL. */
  path: string
}

/** The lookup methods of `Response.headers`. */
export interface ResponseHeaderLookup {
  /** Every value of `name` (case-insensitive) joined with `, `, or null when absent (as fetch's `Headers.get`). */
  get(name: string): string | null
  /** Every value of `name` (case-insensitive), in the order received; `[]` when absent. */
  getAll(name: string): string[]
  /** Every `Set-Cookie` value, in order (as fetch's `Headers.getSetCookie`). */
  getSetCookie(): string[]
}

/**
 * Response headers: a property per lower-case name, repeated values joined with `, `, plus
 * `get`, `getAll` and `getSetCookie`. (A header named `get` is read with `get('get')`.)
 */
export type ResponseHeaders = Readonly<Record<string, string>> & ResponseHeaderLookup

/** Circuit breaker state. */
export type BreakerState = 'closed' | 'open' | 'half_open'

/** Where a breaker is in its cycle: `half_open` is `probing` (trial calls) or `ramping` (part of the traffic). */
export type BreakerPhase = 'closed' | 'open' | 'probing' | 'ramping'

/** One breaker now (`client.breakerDetails`). */
export interface BreakerDetails {
  service: string
  /** The endpoint template the breaker is kept for. */
  endpoint: string
  /** Upper case. */
  method: string
  state: BreakerState
  phase: BreakerPhase
  /** The share of calls let through now (1 when closed, 0 when open, a ramp step while ramping). */
  admitRatio: number
  /** Calls in the current window (`sliding_window` breakers; 0 otherwise). */
  calls: number
  /** Failure rate over the current window, 0 to 1. */
  failureRate: number
  /** Slow-call rate over the current window, 0 to 1. */
  slowCallRate: number
}

/** A buffered response. */
export declare class Response {
  private constructor()
  /** The HTTP status code. */
  readonly status: number
  /** Response headers with lower-case names; repeated headers joined with `, `; `getAll(name)` keeps each value. */
  readonly headers: ResponseHeaders
  /** The response body. */
  readonly body: Buffer
  /** Wall time of the whole call (all attempts and backoff), in milliseconds. */
  readonly elapsedMs: number
  /** Attempts made. */
  readonly attempts: number
  /** The W3C trace id of the call (32 hex digits). */
  readonly traceId: string
  /** True for a 2xx status. */
  readonly ok: boolean
  /** The route the request named, or null (the fields below are null too when not routed). */
  readonly route: string | null
  /** The provider that answered (null for a static fallback). */
  readonly provider: string | null
  /** The model that answered (the provider's report, else its configured model). */
  readonly model: string | null
  /** Attempts each provider got, as `[id, n]` pairs in the order first tried. */
  readonly attemptsByProvider: Array<[string, number]> | null
  /** `cache` or `static` when no provider could answer and a degraded answer was served. */
  readonly fallback: 'cache' | 'static' | null
  /** True for a cached answer served because no provider could answer now. */
  readonly stale: boolean
  /** From the answering provider's prices and the usage it reported (`openai-compatible` routes). */
  readonly cost: number | null
  /** Token counts the provider reported (`openai-compatible` routes). */
  readonly usage: Usage | null
  /** The body decoded as UTF-8. */
  text(): string
  /** The body parsed as JSON. */
  json<T = unknown>(): T
}

/**
 * A streamed response: the head has arrived; `body` yields the body as it comes. Read it to its
 * end, break out of the loop, or call `cancel()`: each releases the connection and the bulkhead
 * permit at once.
 */
export declare class StreamResponse {
  private constructor()
  /** The HTTP status code (an error status rejects `stream()` instead). */
  readonly status: number
  /** Response headers, as on `Response`. */
  readonly headers: ResponseHeaders
  /** Attempts made before the head arrived. */
  readonly attempts: number
  /** The W3C trace id of the call (32 hex digits). */
  readonly traceId: string
  /** True for a 2xx status. */
  readonly ok: boolean
  /**
   * The body as Buffer chunks, pulled from the core one at a time (`for await`); read it once.
   * Leaving the loop early cancels the stream. A body cut by the upstream rejects
   * (`ConnectError` or `ProtocolError`); silence past `timeouts.idle_ms` is a `TimeoutError`
   * with phase `idle`.
   */
  readonly body: AsyncIterableIterator<Buffer>
  /** Stops reading: the connection and permit are released now, and the body iteration ends. */
  cancel(): void
}

/** Token counts as the provider reported them. */
export interface Usage {
  promptTokens: number
  completionTokens: number
  totalTokens: number
}

/** One chat message (`role` is required; any other chat-completions field passes through). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | (string & {})
  content?: unknown
  [key: string]: unknown
}

/**
 * The chat call: `messages` and any other chat-completions parameters (`temperature`,
 * `max_tokens`, `tools`...), sent as given; `model` is set per provider, `stream` by Harness.
 */
export interface ChatRequest {
  messages: ChatMessage[]
  [param: string]: unknown
}

/** Options of a chat call. */
export interface ChatOptions {
  /** Request headers. */
  headers?: Pairs
  /** Overrides the route's total deadline, in milliseconds. */
  timeoutMs?: number
  /**
   * The caller's W3C `traceparent`, continued downstream. Without it (or a `traceparent` header),
   * the active OpenTelemetry span's, when `@opentelemetry/api` is installed.
   */
  traceparent?: string
  /** Who the call is made for, as in `CallOptions.principal` (the audit record only). */
  principal?: string
  /**
   * Aborting it cancels the call in Rust (freeing its permits); the promise rejects with
   * `CancelledError`. For `chatStream()`, it also stops the chunks: a waiting or later read rejects.
   */
  signal?: AbortSignal
}

/** A chat answer on an `openai-compatible` route, the same shape from every provider. */
export declare class ChatResponse {
  private constructor()
  /** The assistant's answer. */
  readonly content: string
  /** `stop`, `length`, ... (null when the provider gave none). */
  readonly finishReason: string | null
  /** Token counts the provider reported, or null. */
  readonly usage: Usage | null
  /** The route called. */
  readonly route: string
  /** The provider that answered (null for a static fallback). */
  readonly provider: string | null
  /** The model that answered. */
  readonly model: string | null
  /** From the provider's prices and the usage it reported; null without both. */
  readonly cost: number | null
  /** `cache` or `static` when no provider could answer; else null. */
  readonly fallback: 'cache' | 'static' | null
  /** True for a cached answer served because no provider could answer now. */
  readonly stale: boolean
  /** Attempts made across every provider. */
  readonly attempts: number
  /** Attempts each provider got, as `[id, n]` pairs in the order first tried. */
  readonly attemptsByProvider: Array<[string, number]>
  /** The W3C trace id of the call (32 hex digits). */
  readonly traceId: string
  /** Wall time of the whole call, in milliseconds. */
  readonly elapsedMs: number
  /** The provider's whole answer, as received. */
  readonly raw: Buffer
}

/** One piece of a streamed chat answer. */
export interface ChatChunk {
  /**
   * `delta`: more of the answer (`content`); `restart`: the answer so far is void and a new one
   * follows from another provider (`reason` says why); `done`: the last (`finishReason`, `usage`, `cost`).
   */
  kind: 'delta' | 'restart' | 'done'
  content: string
  provider: string | null
  model: string | null
  finishReason: string | null
  usage: Usage | null
  cost: number | null
  reason: string | null
}

/**
 * A streamed chat answer: `for await (const chunk of stream)`, pulled from the core one chunk at a
 * time; iterate it once. Breaking out of the loop, `cancel()` or the call's AbortSignal stop the
 * answer and release its connection and permits at once. A failure no provider can take over
 * rejects the loop (a stall past `timeouts.idle_ms` is a `TimeoutError` with phase `idle`).
 */
export declare class ChatStream implements AsyncIterable<ChatChunk> {
  private constructor()
  /** The route called. */
  readonly route: string
  /** The W3C trace id of the call (32 hex digits). */
  readonly traceId: string
  [Symbol.asyncIterator](): AsyncIterableIterator<ChatChunk>
  /** Stops the answer: the connection and permits are released now, and the iteration ends. */
  cancel(): void
}

/** One provider of a route now (`client.routingState`). */
export interface ProviderState {
  id: string
  service: string
  model: string | null
  /** The configured weight. */
  weight: number
  /** The weight selection uses now (health, breaker and cooling applied). */
  effectiveWeight: number
  /** 0 to 1, from the success rate over the health window. */
  health: number
  successRate: number
  latencyEwmaMs: number | null
  breaker: BreakerState
  inFlight: number
  /** Milliseconds left of a 429's `Retry-After`. */
  coolingMs: number | null
  lastError: string | null
}

/** A route now (`client.routingState`). */
export interface RouteState {
  route: string
  strategy: 'weighted-health' | 'priority' | 'least-latency'
  providers: ProviderState[]
}

/** Every event's `type`. */
export type HarnessEventType =
  | 'request_finished'
  | 'retry_scheduled'
  | 'breaker_state_changed'
  | 'bulkhead_rejected'
  | 'config_reloaded'
  | 'config_rejected'
  | 'shared_state_unavailable'
  | 'provider_failover'
  | 'stream_restarted'
  | 'stream_chunk_skipped'
  | 'fallback_served'
  | 'schema_violation'
  | 'audit_record'

/** One per request (every field of the log line). */
export interface RequestFinishedEvent {
  type: 'request_finished'
  ts_ms: number
  client: string
  trace_id: string
  span_id: string
  service: string
  endpoint: string
  method: string
  status: number | null
  duration_ms: number
  attempts: number
  retry_count: number
  breaker: BreakerState
  streamed: boolean
  error_kind: string | null
  error_code: string | null
  error_message: string | null
  /** Routed requests only (absent otherwise): the route, the provider and model that answered, the cost. */
  route?: string
  provider?: string
  model?: string
  cost?: number
  /** `cache` or `static` when no provider answered. */
  fallback?: 'cache' | 'static'
  /** The fault injected into the last faulted attempt (absent when none was). */
  fault?: FaultKind
}

/** A retry will be sent after `delay_ms`. */
export interface RetryScheduledEvent {
  type: 'retry_scheduled'
  service: string
  endpoint: string
  method: string
  trace_id: string
  /** The attempt that failed (1 = the first). */
  attempt: number
  delay_ms: number
  /** The error kind of the failed attempt. */
  reason: string
  status: number | null
}

export interface BreakerStateChangedEvent {
  type: 'breaker_state_changed'
  service: string
  endpoint: string
  method: string
  from: BreakerState
  to: BreakerState
}

export interface BulkheadRejectedEvent {
  type: 'bulkhead_rejected'
  service: string
  endpoint: string
  method: string
  max_concurrency: number
}

export interface ConfigReloadedEvent {
  type: 'config_reloaded'
  version: string
  /** `api`, or `file:<path>` for a watched file. */
  source: string
}

export interface ConfigRejectedEvent {
  type: 'config_rejected'
  /** The version that stays in force. */
  version: string
  source: string
  error: string
}

/** Shared state (Redis) could not be used; Harness carries on with local state. Once per outage. */
export interface SharedStateUnavailableEvent {
  type: 'shared_state_unavailable'
  service: string
  /** Which state: `credentials`, `rate_limit` or `retry_budget`. */
  what: 'credentials' | 'rate_limit' | 'retry_budget' | (string & {})
  error: string
}

/** A routed request moves from one provider to another. */
export interface ProviderFailoverEvent {
  type: 'provider_failover'
  route: string
  from: string
  to: string
  trace_id: string
  /** The error kind that made it move (`HttpStatusError`, `TimeoutError`, ...). */
  reason: string
  status: number | null
  /** The provider's error code (`context_length_exceeded`...) when it gave one. */
  code: string | null
}

/**
 * A chat stream broke after it began and starts again elsewhere. `mode` is `hidden` (nothing had
 * reached the caller), `restart` (the caller gets a restart chunk) or `continue` (the new provider
 * continues the partial answer as a prefill).
 */
export interface StreamRestartedEvent {
  type: 'stream_restarted'
  route: string
  from: string
  to: string
  trace_id: string
  reason: string
  mode: 'hidden' | 'restart' | 'continue'
}

/** A malformed streamed chunk was skipped; the stream goes on. */
export interface StreamChunkSkippedEvent {
  type: 'stream_chunk_skipped'
  route: string
  provider: string
  trace_id: string
  reason: string
}

/** No provider could answer; a degraded answer was served. */
export interface FallbackServedEvent {
  type: 'fallback_served'
  route: string
  kind: 'cache' | 'static'
  trace_id: string
}

/** A 2xx body did not match its endpoint's JSON Schema (`enforce`: the caller got a SchemaError; `warn`: returned). */
export interface SchemaViolationEvent {
  type: 'schema_violation'
  service: string
  endpoint: string
  method: string
  trace_id: string
  /** The JSON pointer and what did not match, never the body's values. */
  violation: string
  mode: 'enforce' | 'warn'
}

/**
 * One request as the audit log keeps it (with `audit.sink.listener: true`). Bodies are present only
 * with `audit.include_bodies`, as parsed JSON already masked (a non-JSON body is a note string).
 */
export interface AuditRecordEvent {
  type: 'audit_record'
  ts_ms: number
  client: string
  /** The call's `principal` option, when it gave one. */
  principal?: string
  /** The service, or the route the call named. */
  service: string
  /** Routed calls: the provider that answered. */
  provider?: string
  endpoint: string
  method: string
  status: number | null
  /** `ok`, or the error kind (`HttpStatusError`, `TimeoutError`, ...). */
  outcome: 'ok' | (string & {})
  attempts: number
  duration_ms: number
  cost?: number
  trace_id: string
  request_body?: unknown
  response_body?: unknown
}

/** A structured record of something the engine did; `type` names it the same in every language. */
export type HarnessEvent =
  | RequestFinishedEvent
  | RetryScheduledEvent
  | BreakerStateChangedEvent
  | BulkheadRejectedEvent
  | ConfigReloadedEvent
  | ConfigRejectedEvent
  | SharedStateUnavailableEvent
  | ProviderFailoverEvent
  | StreamRestartedEvent
  | StreamChunkSkippedEvent
  | FallbackServedEvent
  | SchemaViolationEvent
  | AuditRecordEvent

/** Listeners by event name: `event` gets every event, a type name only that kind. */
export type HarnessEventListeners = { event: (event: HarnessEvent) => unknown } & {
  [K in HarnessEventType]: (event: Extract<HarnessEvent, { type: K }>) => unknown
}

/** Options of `Client.fromFile`. */
export interface FromFileOptions {
  /** Reload within a second of the file changing (an invalid edit is rejected and the old config stays). */
  watch?: boolean
}

/**
 * A Harness client. One is enough per config; it is safe to share across concurrent calls.
 * It is an EventEmitter of Harness events: `on('event', fn)` gets every one, `on(type, fn)` one kind.
 * A listener that throws is reported once (a `HarnessListenerWarning`) and never fails a request.
 */
export declare class Client extends EventEmitter {
  /**
   * @param config a config object, or a path to a `.yaml`, `.json` or `.toml` config file.
   * @throws ConfigError naming the bad field.
   */
  constructor(config: HarnessConfig | string)
  /**
   * A client from a `.yaml`, `.json` or `.toml` file; with `{ watch: true }` it reloads when the file changes.
   * @throws ConfigError naming the bad field.
   */
  static fromFile(path: string, options?: FromFileOptions): Client
  /**
   * Replaces the config (an object, or a path to a config file) and returns the new `configVersion`.
   * State for unchanged keys (breakers, budgets, bulkheads) carries over.
   * @throws ConfigError naming the bad field; the old config stays in force.
   */
  reload(config: HarnessConfig | string): string
  /** A short hash of the active config (the same config gives the same version in every language). */
  readonly configVersion: string
  /**
   * Sends one request and resolves when its response head arrives; the body is streamed.
   * Rejects with a `HarnessError` subclass (an error status rejects here, before the body).
   */
  stream(service: string, method: string, path: string, options?: CallOptions): Promise<StreamResponse>
  stream(options: RequestOptions): Promise<StreamResponse>
  /** Delivers this client's queued log records and events now (listeners run before it returns). */
  flush(): void
  /** Sends one request through the pipeline; rejects with a `HarnessError` subclass. */
  request(options: RequestOptions): Promise<Response>
  /** `request` with method GET. */
  get(service: string, path: string, options?: CallOptions): Promise<Response>
  /** `request` with method POST. */
  post(service: string, path: string, options?: CallOptions): Promise<Response>
  /** `request` with method PUT. */
  put(service: string, path: string, options?: CallOptions): Promise<Response>
  /** `request` with method PATCH. */
  patch(service: string, path: string, options?: CallOptions): Promise<Response>
  /** `request` with method DELETE. */
  delete(service: string, path: string, options?: CallOptions): Promise<Response>
  /** The Prometheus text exposition of this client's metrics. */
  metrics(): string
  /** The breaker state for (service, endpoint, method); `endpoint` defaults to the template of `path`. */
  breakerState(service: string, method: string, path: string, endpoint?: string): BreakerState
  /**
   * The breaker for (service, endpoint, method) with its phase and current window's rates;
   * `endpoint` defaults to the template of `path`.
   */
  breakerDetails(service: string, method: string, path: string, endpoint?: string): BreakerDetails
  /** A service's bulkhead limit now (it moves when `bulkhead.adaptive` is set). @throws ConfigError for an unknown service. */
  bulkheadLimit(service: string): number
  /** Bulkhead permits currently held on a service. @throws ConfigError for an unknown service. */
  bulkheadInUse(service: string): number
  /**
   * Makes `provider` the token source of `service` (whose `auth.type` is `'callback'`). The core
   * calls it once per refresh however many requests wait; a provider that throws or rejects gives
   * them an `AuthError` with its message. A provider never keeps the process alive.
   * @throws ConfigError for an unknown service or one whose auth type is not `callback`.
   */
  setTokenProvider(service: string, provider: TokenProvider): void
  /** Per service with credentials: status, expiry, last refresh and error, a pool's keys. Never a secret. */
  credentialsState(): CredentialState[]
  /**
   * One chat answer on an `openai-compatible` route: the core picks the provider, fails over,
   * normalises the parameters per provider and prices the answer.
   * Rejects with a `HarnessError` subclass (`NoHealthyProviderError` lists each provider's last error).
   */
  chat(route: string, request: ChatRequest, options?: ChatOptions): Promise<ChatResponse>
  /**
   * A streamed chat answer: resolves once a provider answers, to an async iterable of
   * `delta`, `restart` and `done` chunks.
   */
  chatStream(route: string, request: ChatRequest, options?: ChatOptions): Promise<ChatStream>
  /** A route's providers now: weights, health, breaker, in-flight, cooling, last error. @throws ConfigError for an unknown route. */
  routingState(route: string): RouteState
  /**
   * Sets a provider's weight on a route (0 stops its traffic), validated and versioned as a reload.
   * Returns the new `configVersion`. @throws ConfigError for an unknown route or provider.
   */
  setWeight(route: string, provider: string, weight: number): string
  /**
   * From now on answers `service`'s requests that match `method` (`''` or `'*'`: any) and `path`
   * (a template relative to the base URL, `/orders/{id}`, or `'*'`) with `response`, latest mock
   * first; nothing is sent. The whole pipeline still runs; an unmatched request rejects with a
   * `ConfigError` naming its method and path.
   * @throws ConfigError naming the field (an unknown service, a path not starting with `/`, a status below 200).
   */
  mock(service: string, method: string, path: string, response?: MockResponse): void
  /** Removes the mocks set with `mock()` on `service` (or on every service): it reaches the network again. */
  clearMocks(service?: string): void
  /** Refuses new requests and stops watching; requests in flight finish. Queued events are delivered before it returns. */
  close(): void
  /** Whether `close()` was called. */
  readonly closed: boolean

  on<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  on(name: string | symbol, listener: (...args: any[]) => void): this
  addListener<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  addListener(name: string | symbol, listener: (...args: any[]) => void): this
  once<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  once(name: string | symbol, listener: (...args: any[]) => void): this
  prependListener<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  prependListener(name: string | symbol, listener: (...args: any[]) => void): this
  prependOnceListener<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  prependOnceListener(name: string | symbol, listener: (...args: any[]) => void): this
  off<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  off(name: string | symbol, listener: (...args: any[]) => void): this
  removeListener<K extends keyof HarnessEventListeners>(name: K, listener: HarnessEventListeners[K]): this
  removeListener(name: string | symbol, listener: (...args: any[]) => void): this
}

/** Fields every Harness error carries (all optional except `attempts`). */
export interface HarnessErrorFields {
  service?: string
  endpoint?: string
  method?: string
  attempts?: number
  status?: number
  errorCode?: string
  retryAfterMs?: number
  traceId?: string
  phase?: 'connect' | 'response' | 'idle' | 'ttft' | 'total'
  body?: Buffer
  provider?: string
  providerErrors?: ProviderErrorEntry[]
  cause?: unknown
}

/** One provider and its last error (or why it was not tried), as `NoHealthyProviderError` lists them. */
export interface ProviderErrorEntry {
  provider: string
  error: string
}

/** Base class of every Harness error. */
export declare class HarnessError extends Error {
  constructor(message: string, fields?: HarnessErrorFields)
  /** The error kind: the class name, e.g. `TimeoutError`. */
  readonly code: string
  /** The service of the call. */
  readonly service?: string
  /** The endpoint label (template) of the call. */
  readonly endpoint?: string
  /** The HTTP method of the call. */
  readonly method?: string
  /** Attempts made before giving up. */
  readonly attempts: number
  /** The upstream's HTTP status, when it answered. */
  readonly status?: number
  /** The normalised downstream error code (`code`, `errCode` or `error.code` of the body). */
  readonly errorCode?: string
  /** The upstream's Retry-After, in milliseconds. */
  readonly retryAfterMs?: number
  /** The W3C trace id of the call. */
  readonly traceId?: string
  /**
   * For `TimeoutError`: which timeout expired (`idle`: a streamed body went silent for
   * `timeouts.idle_ms`; `ttft`: a chat stream's first chunk did not come within the route's `ttft_ms`).
   */
  readonly phase?: 'connect' | 'response' | 'idle' | 'ttft' | 'total'
  /** Routed calls: the provider whose answer this error is. */
  readonly provider?: string
  /**
   * `NoHealthyProviderError` (and a chat stream's failure no other provider could take over): each
   * provider of the route, in config order, and its last error or why it was not tried; empty otherwise.
   */
  readonly providerErrors: ProviderErrorEntry[]
  /** The raw downstream body (not enumerable, never in the message). */
  readonly body?: Buffer
}
/** A timeout expired; `phase` is `connect`, `response`, `idle`, `ttft` or `total`. */
export declare class TimeoutError extends HarnessError {}
/** The circuit breaker for (service, endpoint, method) is open. */
export declare class CircuitOpenError extends HarnessError {}
/** The service's bulkhead had no free permit. */
export declare class BulkheadFullError extends HarnessError {}
/**
 * Rate limited; see `retryAfterMs`. By the client's own `rate_limit` (`errorCode`
 * `client_rate_limited`, no `status`: nothing was sent) or by the upstream (a 429).
 */
export declare class RateLimitedError extends HarnessError {}
/** The upstream answered with an error status; see `status`, `errorCode` and `body`. */
export declare class HttpStatusError extends HarnessError {}
/** Authentication failed. */
export declare class AuthError extends HarnessError {}
/** The response did not match its schema. */
export declare class SchemaError extends HarnessError {}
/** The connection could not be made (refused, reset). */
export declare class ConnectError extends HarnessError {}
/** The request was cancelled (its AbortSignal fired); `cause` is the signal's reason. */
export declare class CancelledError extends HarnessError {}
/** No provider of a route could answer; `providerErrors` lists each one and its last error. */
export declare class NoHealthyProviderError extends HarnessError {}
/** Bad config or bad input; the message starts with the field path. */
export declare class ConfigError extends HarnessError {}
/** The server answered, but not with valid HTTP (bad status line, too many headers, conflicting lengths, a final 101). */
export declare class ProtocolError extends HarnessError {}
/** The response was larger than the service's `limits.max_response_bytes`. */
export declare class ResponseTooLargeError extends HarnessError {}
/** The receiver: another delivery of this message is being processed; `retryAfterMs` is its lease left. */
export declare class DuplicateInFlightError extends HarnessError {}

/** Every error class name, base first. */
export declare const ERROR_NAMES: readonly string[]

/** The receiver's config (its own object, apart from a client's); every key is optional. */
export interface IdempotencyConfig {
  /** Prepended to every key (default `harness:idem:`). */
  prefix?: string
  /** How long a processed (or failed) key is remembered (default 24 h); cover the sender's retry window. */
  ttl_ms?: number
  /** How long a claim holds before another delivery may take the key over (default 30 s). */
  lease_ms?: number
  /** A failed key may be claimed again (default true). */
  retry_failed?: boolean
  /** The Redis store shared by a fleet; without it, state is in this process's memory. */
  redis_url?: string
  /** When the store cannot answer: `reject` (default: an error, the sender retries) or `process` (run without dedup). */
  on_store_down?: 'reject' | 'process'
  /** Signed deliveries: HMAC-SHA256 of `${timestamp}.${body}` with this secret, within `max_skew_ms` (default 5 min). */
  signature?: { secret: SecretRef; max_skew_ms?: number }
}

/** A claim of an already processed key: its stored result (JSON, parsed); do not run the handler. */
export interface ProcessedClaim {
  readonly done: true
  readonly result: unknown
}

/** A claim to run the handler: finish it once, with `complete(value)` or `fail()`. */
export declare class Lease {
  private constructor()
  readonly done: false
  /** The claimed key. */
  readonly key: string
  /** False when the store was down and `on_store_down: 'process'` let it run without dedup. */
  readonly deduplicated: boolean
  /**
   * Stores the result (as JSON; `undefined` as `null`). Rejects with `errorCode` `lease_lost` when
   * the lease expired and another delivery took the key over (this result is not stored).
   */
  complete(value: unknown): Promise<void>
  /** Marks the key failed (with `retry_failed` a redelivery runs the handler again). */
  fail(): Promise<void>
}

/**
 * The idempotent receiver: a handler runs at most once per key across every process sharing its
 * store. Keys are `{prefix}{tenant}:{eventType}:{msgId}`.
 */
export declare class Idempotency {
  /** @throws ConfigError naming the bad field. */
  constructor(config?: IdempotencyConfig)
  /** `{prefix}{tenant}:{eventType}:{msgId}`; @throws ConfigError naming a bad part. */
  key(tenant: string, eventType: string, msgId: string): string
  /**
   * Runs `handler` at most once for `key` and resolves to its value; a duplicate of a processed key
   * resolves to the stored value (JSON round-tripped) without running it. Rejects with
   * `DuplicateInFlightError` while another delivery holds the key; a handler that throws marks the
   * key failed and its error is re-thrown.
   */
  run<T>(key: string, handler: () => T | PromiseLike<T>): Promise<T>
  /** The lower-level form of `run`: a `Lease` to run the handler, or the stored result. */
  claim(key: string): Promise<Lease | ProcessedClaim>
  /** @throws AuthError (`errorCode` `bad_signature` or `stale_signature`), ConfigError when no signature is configured. */
  verify(timestamp: string, body: Buffer | Uint8Array | ArrayBuffer | string, signature: string): void
  /** The hex signature `verify` expects. */
  sign(timestamp: string, body: Buffer | Uint8Array | ArrayBuffer | string): string
  /** `harness_idempotency_total{outcome}`, Prometheus text. */
  metricsText(): string
}
