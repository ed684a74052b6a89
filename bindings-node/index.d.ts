// Type declarations for harness-sdk (CommonJS and ESM entry points share them). The config,
// the views and the events are the core's own types, generated into ./types.d.ts from its
// schema (`cargo run -p harness-cli -- types`), and the error classes into ./errors.d.ts;
// this file declares the JS API around them.

import { EventEmitter } from 'node:events'
import type {
  BreakerInfo,
  CacheStamp,
  ChatChunk,
  ClientViews,
  ChatResponse as ChatResponseView,
  Config,
  Event,
  FaultRule,
  IdempotencyConfig,
  InterceptedRequest as InterceptedRequestView,
  InterceptedResponse as InterceptedResponseView,
  Level,
  RequestChanges as RequestChangesView,
  KeyStatus,
  ProviderConfig,
  ProviderError,
  Usage,
} from './types'

export * from './types'
// The error classes (one per kind of the core, its ErrorView as their fields), generated too.
export * from './errors'

/** A config object: the same shape as the YAML/JSON/TOML file (snake_case keys, durations in `_ms`). */
export type HarnessConfig = Config
/** One rule of `faults.rules`. */
export type FaultRuleConfig = FaultRule
/** One provider of a route. */
export type RouteProviderConfig = ProviderConfig
/** One key of a key pool, by index and name (never the key). */
export type KeyState = KeyStatus
/** One breaker now (`client.breakerDetails`). */
export type BreakerDetails = BreakerInfo
/** Circuit breaker state. */
export type BreakerState = BreakerInfo['state']
/** Where a breaker is in its cycle: `half_open` is `probing` (trial calls) or `ramping` (part of the traffic). */
export type BreakerPhase = BreakerInfo['phase']
/** A structured record of something the engine did; `type` names it the same in every language. */
export type HarnessEvent = Event
/** Every event's `type`. */
export type HarnessEventType = Event['type']
/** One provider and its last error (or why it was not tried), as `NoHealthyProviderError` lists them. */
export type ProviderErrorEntry = ProviderError

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

/** What a token provider returns: the token and, if it expires, its lifetime in seconds. */
export interface ProvidedToken {
  token: string
  expiresIn?: number | null
}

/** A JS token provider (`client.setTokenProvider`): sync or async. */
export type TokenProvider = () => ProvidedToken | PromiseLike<ProvidedToken>

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
  /** What a cache did for this answer (`hit`, `revalidated`, `stale`, `coalesced`, `miss`, `bypass`...), or null when no cache had a part in it. */
  readonly cache: CacheStamp | null
  /** True when served from a store, not fetched for this call (`cache.outcome` `hit`, `revalidated` or `stale`). */
  readonly fromCache: boolean
  /** True for a stored answer the origin confirmed with a 304 (the caller sees the stored 200). */
  readonly revalidated: boolean
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
export interface ChatResponse extends Readonly<ChatResponseView> {
  /** True for a cached answer served because no provider could answer now. */
  readonly stale: boolean
  /** True for an answer served from the route's exact or semantic answer cache (no provider was called for it). */
  readonly fromCache: boolean
  /** The provider's whole answer, as received. */
  readonly raw: Buffer
}
export declare class ChatResponse {
  private constructor()
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

/** Options of an embeddings call. */
export interface EmbedOptions {
  /** Shorter vectors, for models that can give them (OpenAI's `dimensions`, Gemini's `outputDimensionality`); an integer >= 1. */
  dimensions?: number
  /** Request headers. */
  headers?: Pairs
  /** Overrides the route's total deadline, in milliseconds. */
  timeoutMs?: number
  /** The caller's W3C `traceparent`, as in `ChatOptions.traceparent`. */
  traceparent?: string
  /** Who the call is made for, as in `CallOptions.principal` (the audit record only). */
  principal?: string
  /** Aborting it cancels the call in Rust (freeing its permits); the promise rejects with `CancelledError`. */
  signal?: AbortSignal
}

/** The vectors of an embeddings call, in input order, with what they cost. */
export interface EmbedResponse {
  /** One vector per input, in input order: Float32Array views over one ArrayBuffer that holds them all. */
  readonly vectors: Float32Array[]
  /** How many vectors (one per input). */
  readonly count: number
  /** The length of every vector. */
  readonly dimensions: number
  /** Token counts summed over every batch, or null when no provider reported them. */
  readonly usage: Usage | null
  /** From the providers' prices and the usage they reported; null without both. */
  readonly cost: number | null
  /** The route called. */
  readonly route: string
  /** The provider that answered the first batch. */
  readonly provider: string | null
  /** The model that answered the first batch. */
  readonly model: string | null
  /** How many calls the inputs were split into. */
  readonly batches: number
  /** Attempts across every batch. */
  readonly attempts: number
  /** The first batch's W3C trace id (32 hex digits). */
  readonly traceId: string
  /** Wall time of the whole call, in milliseconds. */
  readonly elapsedMs: number
}
export declare class EmbedResponse {
  private constructor()
}

/** What a host adapter's `buildRequest` gets: the OpenAI-shaped chat body (model set), the provider and whether to stream. */
export interface AdapterRequestInput {
  request: { messages: ChatMessage[]; model?: string; [param: string]: unknown }
  provider: { id: string; model: string | null }
  stream: boolean
}

/** What `buildRequest` returns: the path (relative to the service's base URL), the body, and extra headers. */
export interface AdapterRequest {
  path: string
  body: unknown
  headers?: Record<string, string> | null
}

/** What `parseResponse` gets: the provider's answer (any status), headers lowercased, the body as text. */
export interface AdapterResponseInput {
  status: number
  headers: Record<string, string>
  body: string
}

/** A provider's error in an adapter's answer: a common code (`overloaded`, `rate_limited`, ...) or the vendor's, and a message. */
export interface AdapterError {
  error: { code?: string | null; message: string }
}

/** Usage as an adapter reports it (snake_case: the core reads it as given). */
export interface AdapterUsage {
  prompt_tokens: number
  completion_tokens: number
  cached_tokens?: number
  reasoning_tokens?: number
}

/** What `parseResponse` returns for an answer. */
export interface AdapterAnswer {
  content?: string
  tool_calls?: Array<{ id?: string; name?: string; arguments?: string | unknown }>
  finish_reason?: string | null
  usage?: AdapterUsage | null
  model?: string | null
}

/** What `parseStreamEvent` gets: one server-sent event (`event` is `message` when none was named). */
export interface AdapterEventInput {
  event: string
  data: string
}

/** What `parseStreamEvent` returns: a piece of the answer (`done: true` on the last), an error, or null for nothing. */
export interface AdapterEvent {
  content?: string
  tool_calls?: Array<{ index?: number; id?: string; name?: string; arguments?: string | unknown }>
  finish_reason?: string | null
  usage?: AdapterUsage | null
  done?: boolean
}

/**
 * A provider's wire format written in JS (`client.registerAdapter`): each method may be async.
 * A method that throws or rejects fails that provider's attempt (the route fails over) with an
 * error naming the adapter and the step.
 */
export interface HostAdapter {
  buildRequest(input: AdapterRequestInput): AdapterRequest | PromiseLike<AdapterRequest>
  parseResponse(input: AdapterResponseInput): AdapterAnswer | AdapterError | PromiseLike<AdapterAnswer | AdapterError>
  parseStreamEvent(input: AdapterEventInput): AdapterEvent | AdapterError | null | undefined | PromiseLike<AdapterEvent | AdapterError | null | undefined>
}

/**
 * What an interceptor's `before` gets (the core's `InterceptedRequest`, camelCase, the body as
 * bytes): `attempt` and `provider` are set for an attempt interceptor (`null` at the application level).
 */
export interface InterceptedRequest extends Readonly<Omit<InterceptedRequestView, 'body_base64' | 'json' | 'attempt' | 'provider' | 'trace_id'>> {
  /** The body; `null` when there is none. */
  readonly body: Buffer | null
  /** The body parsed, when it is JSON; else `null`. */
  readonly json: unknown
  /** The attempt number (1 for the first) of an attempt interceptor. */
  readonly attempt: number | null
  /** The route's provider of this attempt. */
  readonly provider: string | null
  readonly traceId: string
}

/** What an interceptor's `after` gets (the core's `InterceptedResponse`, camelCase, the body as bytes). */
export interface InterceptedResponse extends Readonly<Omit<InterceptedResponseView, 'body_base64' | 'json' | 'attempt' | 'provider' | 'trace_id' | 'elapsed_ms'>> {
  /** Since the attempt was sent (an attempt interceptor) or the call started. */
  readonly elapsedMs: number
  readonly attempt: number | null
  readonly provider: string | null
  readonly traceId: string
  /** The body: only with `wantBody`, and only for a buffered answer; else `null`. */
  readonly body: Buffer | null
  /** The body parsed, when it is JSON (with `wantBody`); else `null`. */
  readonly json: unknown
}

/**
 * What `before` may return (the core's `RequestChanges`, with the body as bytes): headers and
 * query parameters to set (`null` removes one), a new path, a new `json` or `body` (not both),
 * and the names of headers whose values are secret (redacted and scrubbed like credentials).
 */
export interface RequestChanges extends Omit<RequestChangesView, 'body_base64' | 'headers' | 'query'> {
  headers?: Record<string, string | null> | ReadonlyMap<string, string | null> | null
  query?: Record<string, string | number | boolean | null> | ReadonlyMap<string, string | null> | null
  body?: Uint8Array | ArrayBuffer | null
}

/** An interceptor's level: `application` (once per call, the default) or `attempt` (once per attempt). */
export type InterceptorLevel = Level

/**
 * An interceptor (`client.use`): `before`, `after` or both, plain or async functions, called with
 * the interceptor as `this`. `before` returns changes or nothing; throwing refuses the call (an
 * `InterceptorError`, code `raised`, nothing sent). `after` throws a `Reject` to fail the answer;
 * what it returns is ignored.
 */
export interface Interceptor {
  /** Names it in errors and in `interceptors.levels`: 1-64 letters, digits, `-`, `_`, `.`. Default: the function's own name, else `interceptor-<n>`. */
  name?: string
  before?: ((request: InterceptedRequest) => RequestChanges | null | undefined | void | PromiseLike<RequestChanges | null | undefined | void>) | null
  after?: ((response: InterceptedResponse) => unknown) | null
  /** Only calls to these services or routes (an attempt interceptor: also a route provider's service). Default: every call. */
  services?: readonly string[] | null
  /** Default `application`, unless `interceptors.levels` in the config names it. */
  level?: InterceptorLevel | null
  /** `after` sees a buffered answer's body (default false). */
  wantBody?: boolean
}

/** The options of a `Reject`. */
export interface RejectOptions {
  /** Retried (or failed over) by the retry rules, as a 503 would be (default false). */
  retryable?: boolean
  /** The InterceptorError's `errorCode` (default `rejected`). */
  code?: string
  cause?: unknown
}

/**
 * Thrown by an interceptor's `after` to fail the answer it saw: the call fails with an
 * `InterceptorError` whose `errorCode` is `code`, or, when `retryable`, goes through the retry rules.
 */
export declare class Reject extends Error {
  constructor(message: string, options?: RejectOptions)
  readonly name: 'Reject'
  readonly retryable: boolean
  readonly code: string | undefined
}

/** Listeners by event name: `event` gets every event, a type name only that kind. */
export type HarnessEventListeners = { event: (event: HarnessEvent) => unknown } & {
  [K in HarnessEventType]: (event: Extract<HarnessEvent, { type: K }>) => unknown
}

/** Options of `Client.fromFile`. */
export interface FromFileOptions {
  /** Reload within a second of the file changing (an invalid edit is rejected and the old config stays). */
  watch?: boolean
}

/** The core's read-only views (`routingState`, `credentialsState`, `breakerDetails`, `breakers`, `describe`...), generated. */
export interface Client extends ClientViews {}
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
  /**
   * Embeds `inputs` (non-empty strings) on a route of `kind: embeddings`: one vector per input, in
   * order, batched per the providers' `max_batch`, each batch routed (failover, breakers, cost).
   * Rejects with a `ConfigError` naming the field for bad input (an empty list, a chat route).
   */
  embed(route: string, inputs: readonly string[], options?: EmbedOptions): Promise<EmbedResponse>
  /**
   * Registers a host adapter under `name`: providers with `adapter: name` reach it. A second
   * registration under the name replaces the first. The adapter never keeps the process alive.
   * @throws ConfigError naming a missing method, or for a bad or built-in name.
   */
  registerAdapter(name: string, adapter: HostAdapter): void
  /**
   * Registers an interceptor (`before`, `after` or both; plain or async functions, run on the JS
   * thread within `interceptors.timeout_ms`); returns its name. A second registration under the
   * name replaces the first in its place. An interceptor never keeps the process alive.
   * @throws ConfigError for a bad name, level or service list, or with neither function.
   */
  use(interceptor: Interceptor): string
  /** Removes the interceptor `name`; whether there was one. */
  removeInterceptor(name: string): boolean
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
  /**
   * Drops the stored answers of `name`, a service or a route (its HTTP cache entries, or its exact
   * chat answers), or of every service and route when left out; returns how many were dropped.
   * @throws ConfigError for an unknown name.
   */
  cacheClear(name?: string): number
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

/** Every error class name, base first. */
export declare const ERROR_NAMES: readonly string[]

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
