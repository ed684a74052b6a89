package dev.harness

import dev.harness.ffi.NativeClient
import dev.harness.ffi.NativeEntry
import dev.harness.ffi.NativeException
import dev.harness.ffi.NativeMockResponse
import dev.harness.ffi.NativeRegistration
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.emitAll
import kotlinx.coroutines.flow.flow
import java.nio.file.Path
import java.util.concurrent.CompletableFuture
import java.util.function.Consumer

/**
 * A Harness client: one per process (or per config), shared by every caller; thread-safe.
 *
 * ```kotlin
 * HarnessClient(mapOf("services" to mapOf("orders" to mapOf("base_url" to "http://orders:8080")))).use { h ->
 *     val r = h.get("orders", "/orders/42")
 *     println(r.status to r.text())
 * }
 * ```
 *
 * Every behaviour (timeouts, retries, breaker, bulkhead, metrics, reload, events) is the Rust
 * engine's; this class only translates. Cancelling the calling coroutine (or the
 * [CompletableFuture]) drops the request in the engine and frees every permit it held.
 */
class HarnessClient private constructor(private val native: NativeClient) : AutoCloseable, ClientViews {

    /** From the config as a map (the same shape as the YAML/JSON/TOML file). */
    constructor(config: Map<String, Any?>) : this(create { NativeClient.fromJson(Json.encode(config, "config"), Slf4jLog) })

    /** From a `.yaml`, `.json` or `.toml` config file (see [fromFile] to watch it). */
    constructor(path: Path) : this(create { NativeClient.fromFile(path.toString(), false, Slf4jLog) })

    private val handle: Long = native.handle().toLong()

    /** The client's one sink for [events], registered on first use. */
    @Volatile
    private var eventFlow: EventFlow? = null

    /** Runs one request through the engine's pipeline. */
    suspend fun request(request: HarnessRequest): HarnessResponse {
        val encoded = request.encode()
        return RequestPath.await { RequestPath.start(native, handle, encoded, it) }
    }

    /**
     * Runs one request up to its response head and returns it with the body still to read
     * ([HarnessStream.body], a Flow of chunks). An error status throws here, as for [request];
     * so do timeouts and connect errors before the head. Close the stream (or read its body
     * to the end) to release its connection and bulkhead permit.
     */
    suspend fun stream(request: HarnessRequest): HarnessStream {
        val encoded = request.encode()
        return HarnessStream(RequestPath.await({ RequestPath.close(it.stream) }) { RequestPath.open(native, handle, encoded, it) })
    }

    /** [stream] with the arguments of [request]. */
    suspend fun stream(
        service: String,
        method: String,
        path: String,
        endpoint: String? = null,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        json: Any? = null,
        body: ByteArray? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        headerList: List<Pair<String, String>> = emptyList(),
        principal: String? = null,
    ): HarnessStream = stream(
        HarnessRequest(service, method, path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, headerList, principal),
    )

    suspend fun request(
        service: String,
        method: String,
        path: String,
        endpoint: String? = null,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        json: Any? = null,
        body: ByteArray? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        headerList: List<Pair<String, String>> = emptyList(),
        principal: String? = null,
    ): HarnessResponse = request(
        HarnessRequest(service, method, path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, headerList, principal),
    )

    suspend fun get(
        service: String,
        path: String,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): HarnessResponse = request(service, "GET", path, endpoint, query, headers, null, null, null, timeoutMs, traceparent, principal = principal)

    suspend fun post(
        service: String,
        path: String,
        json: Any? = null,
        body: ByteArray? = null,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): HarnessResponse = request(service, "POST", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, principal = principal)

    suspend fun put(
        service: String,
        path: String,
        json: Any? = null,
        body: ByteArray? = null,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): HarnessResponse = request(service, "PUT", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, principal = principal)

    suspend fun patch(
        service: String,
        path: String,
        json: Any? = null,
        body: ByteArray? = null,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): HarnessResponse = request(service, "PATCH", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, principal = principal)

    suspend fun delete(
        service: String,
        path: String,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): HarnessResponse = request(service, "DELETE", path, endpoint, query, headers, null, null, idempotencyKey, timeoutMs, traceparent, principal = principal)

    /**
     * One chat answer on [route] (a route with `adapter: openai-compatible`): the route picks a
     * provider, fails over, retries, degrades to a cached or static answer, and prices the
     * answer; [ChatResponse] says who answered ([ChatResponse.provider], [ChatResponse.model]),
     * the [ChatResponse.usage] and [ChatResponse.cost]. Cancelling the calling coroutine cancels
     * the call in the engine. No provider able to answer is a [HarnessException.NoHealthyProvider]
     * listing each provider's error ([HarnessException.providerErrors]).
     *
     * ```kotlin
     * val r = harness.chat("chat", listOf(mapOf("role" to "user", "content" to "Hi")), params = mapOf("temperature" to 0.2))
     * println("${r.content} (${r.provider}/${r.model}, ${r.usage?.totalTokens} tokens, cost ${r.cost})")
     * ```
     */
    suspend fun chat(
        route: String,
        messages: List<Map<String, Any?>>,
        params: Map<String, Any?> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): ChatResponse = chat(ChatRequest(route, messages, params, headers, timeoutMs, traceparent, principal))

    /** [chat] with a [ChatRequest]. */
    suspend fun chat(request: ChatRequest): ChatResponse {
        val encoded = request.encode()
        return RequestPath.await { RequestPath.chat(native, handle, encoded, it) }
    }

    /**
     * A streamed chat answer on [route], as a cold Flow: collecting it opens the stream (a
     * provider is chosen; before the first chunk, a failure or no chunk within the route's
     * `ttft_ms` fails over), each chunk comes as the provider sends it, and the last is
     * [ChatChunkKind.DONE] with the finish reason, usage and cost. A provider failing
     * mid-answer is handled per the route's `stream.mid_stream`: `hold` (default) restarts
     * elsewhere unseen, `restart` gives a [ChatChunkKind.RESTART] chunk (the answer so far is
     * void) and then the new answer, `error` throws. Cancelling the collector (or `take`,
     * `first`, an exception) cancels the stream in the engine.
     *
     * ```kotlin
     * harness.chatStream("chat", listOf(mapOf("role" to "user", "content" to "Hi"))).collect { c ->
     *     when (c.kind) {
     *         ChatChunkKind.DELTA -> print(c.content)
     *         ChatChunkKind.RESTART -> println("\n[answer restarted on ${c.provider}]")
     *         ChatChunkKind.DONE -> println("\n${c.usage?.totalTokens} tokens, cost ${c.cost}")
     *     }
     * }
     * ```
     */
    fun chatStream(
        route: String,
        messages: List<Map<String, Any?>>,
        params: Map<String, Any?> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): Flow<ChatChunk> = chatStream(ChatRequest(route, messages, params, headers, timeoutMs, traceparent, principal))

    /** [chatStream] with a [ChatRequest]. */
    fun chatStream(request: ChatRequest): Flow<ChatChunk> = flow {
        openChatStream(request).use { emitAll(it.chunks) }
    }

    /**
     * Opens a streamed chat answer and returns it once a provider has answered (errors before
     * that throw here); read its [ChatStream.chunks] and close it. [chatStream] does both.
     */
    suspend fun openChatStream(request: ChatRequest): ChatStream {
        val encoded = request.encode()
        return ChatStream(RequestPath.await({ RequestPath.close(it.stream) }) { RequestPath.openChat(native, handle, encoded, it) })
    }

    /**
     * For Java: [chat] as a [CompletableFuture]; it completes exceptionally with the
     * [HarnessException], and `cancel(true)` cancels the call in the engine.
     */
    fun chatAsync(request: ChatRequest): CompletableFuture<ChatResponse> =
        RequestPath.future(request::encode, same(), null) { e, c -> RequestPath.chat(native, handle, e, c) }

    /**
     * For Java: [openChatStream] as a [CompletableFuture]; read the chunks with
     * [ChatStream.read] (null after the `done` chunk) and close the stream (try-with-resources).
     * `cancel(true)` before a provider answers cancels the call in the engine.
     */
    fun chatStreamAsync(request: ChatRequest): CompletableFuture<ChatStream> =
        RequestPath.future(request::encode, ::ChatStream, ChatStream::close) { e, c -> RequestPath.openChat(native, handle, e, c) }

    /**
     * Embeds [inputs] on [route] (a route of `kind: embeddings`): one vector per input, in
     * order. The inputs are split into batches no larger than every provider of the route
     * takes (`providers[].max_batch`), each batch routed (failover, breakers, retries, cost),
     * and the vectors joined back; a batch that fails fails the call. [EmbedResult.vectors]
     * arrive as one buffer of little-endian floats, copied once. Bad input (no inputs, an empty
     * one, [dimensions] below 1, a route of another kind) is a [HarnessException.Config] naming
     * the field. Cancelling the calling coroutine cancels the call in the engine.
     *
     * ```kotlin
     * val r = harness.embed("embed", listOf("first text", "second text"), dimensions = 256)
     * r.vectors[0]  // FloatArray(256)
     * ```
     */
    suspend fun embed(
        route: String,
        inputs: List<String>,
        dimensions: Int? = null,
        headers: Map<String, String> = emptyMap(),
        timeoutMs: Long? = null,
        traceparent: String? = null,
        principal: String? = null,
    ): EmbedResult = embed(EmbedRequest(route, inputs, dimensions, headers, timeoutMs, traceparent, principal))

    /** [embed] with an [EmbedRequest]. */
    suspend fun embed(request: EmbedRequest): EmbedResult {
        val encoded = request.encode()
        return RequestPath.await { RequestPath.embed(native, handle, encoded, it) }
    }

    /**
     * For Java: [embed] as a [CompletableFuture]; it completes exceptionally with the
     * [HarnessException], and `cancel(true)` cancels the call in the engine.
     */
    fun embedAsync(request: EmbedRequest): CompletableFuture<EmbedResult> =
        RequestPath.future(request::encode, same(), null) { e, c -> RequestPath.embed(native, handle, e, c) }

    /** For Java: [embedAsync] with the route, the inputs and (optionally) the dimensions. */
    @JvmOverloads
    fun embedAsync(route: String, inputs: List<String>, dimensions: Int? = null): CompletableFuture<EmbedResult> =
        embedAsync(EmbedRequest(route, inputs, dimensions))

    /**
     * For Java: the same call as a [CompletableFuture]. It completes exceptionally with a
     * [HarnessException] (wrapped in a `CompletionException` by `join()`); `cancel(true)`
     * cancels the request in the engine.
     */
    fun requestAsync(request: HarnessRequest): CompletableFuture<HarnessResponse> =
        RequestPath.future(request::encode, same(), null) { e, c -> RequestPath.start(native, handle, e, c) }

    /**
     * For Java: [stream] as a [CompletableFuture]; read the body with
     * [HarnessStream.inputStream] and close the stream (try-with-resources) when done.
     * `cancel(true)` before the head arrives cancels the request in the engine.
     */
    fun streamAsync(request: HarnessRequest): CompletableFuture<HarnessStream> =
        RequestPath.future(request::encode, ::HarnessStream, HarnessStream::close) { e, c -> RequestPath.open(native, handle, e, c) }

    fun getAsync(service: String, path: String): CompletableFuture<HarnessResponse> =
        requestAsync(HarnessRequest(service, "GET", path))

    fun postAsync(service: String, path: String, json: Any?): CompletableFuture<HarnessResponse> =
        requestAsync(HarnessRequest(service, "POST", path, json = json))

    fun putAsync(service: String, path: String, json: Any?): CompletableFuture<HarnessResponse> =
        requestAsync(HarnessRequest(service, "PUT", path, json = json))

    fun patchAsync(service: String, path: String, json: Any?): CompletableFuture<HarnessResponse> =
        requestAsync(HarnessRequest(service, "PATCH", path, json = json))

    fun deleteAsync(service: String, path: String): CompletableFuture<HarnessResponse> =
        requestAsync(HarnessRequest(service, "DELETE", path))

    /**
     * Replaces the config with [config] (the same shape as the constructor's) and returns the
     * new [configVersion]. Everything is validated first: an invalid config throws a
     * [HarnessException.Config] naming the field, and the old config stays in force. Requests
     * in flight finish under the config they started with; breakers, retry budgets and
     * bulkheads carry over for unchanged keys.
     */
    fun reload(config: Map<String, Any?>): String = call { native.reloadJson(Json.encode(config, "config")) }

    /** [reload] from a `.yaml`, `.json` or `.toml` file. */
    fun reload(path: Path): String = reloadFile(path.toString())

    /** For Java: [reload] from a file path. */
    fun reloadFile(path: String): String {
        requireUnicode("config file" to path)
        return call { native.reloadFile(path) }
    }

    /** For Java: [reload] from the config as JSON text. */
    fun reloadJson(json: String): String {
        requireUnicode("config" to json)
        return call { native.reloadJson(json) }
    }

    /** A short hash of the active config: equal configs have equal versions, in every language. */
    val configVersion: String get() = native.configVersion()

    /**
     * Every event of this client (requests finished, retries, breaker changes, bulkhead
     * rejections, reloads), as a hot Flow: a collector sees the events from when it starts.
     * The first read registers the client's one event sink with the engine; from then on
     * each request also builds its event. Events arrive on the client's event thread, never
     * a request's; a collector that falls behind delays other listeners (never requests),
     * and once the engine's bounded queue is full, events are dropped and counted in
     * `harness_events_dropped_total`.
     */
    val events: Flow<HarnessEvent>
        get() = (eventFlow ?: synchronized(this) { eventFlow ?: EventFlow().also { native.listen(it); eventFlow = it } }).flow

    /**
     * Calls [listener] with every event of this client, on the client's event thread (keep it
     * quick, or hand off). A listener that throws is reported once on stderr and keeps
     * receiving events; it never fails a request. The returned [ListenerHandle] removes it
     * again (`close()`/`remove()`, so try-with-resources and `use` work); ignoring it keeps
     * the listener for the client's lifetime.
     */
    fun addListener(listener: Consumer<HarnessEvent>): ListenerHandle =
        ListenerHandle(native, native.listen(ListenerSink(listener::accept)))

    /**
     * Delivers this client's queued log records, audit records (to the audit file and listeners)
     * and events now (they follow each request within milliseconds otherwise).
     */
    fun flush() = native.flush()

    /** This client's metrics in the Prometheus text format. */
    fun metrics(): String = native.metricsText()

    /** `closed`, `open` or `half_open` for (service, endpoint, method); endpoint defaults to the path's template. */
    @JvmOverloads
    fun breakerState(service: String, method: String, path: String, endpoint: String? = null): String {
        requireUnicode("service" to service, "method" to method, "path" to path, "endpoint" to endpoint)
        return native.breakerState(service, method, path, endpoint)
    }

    /**
     * One of the core's views as its JSON text; [ClientViews] (generated from the core's
     * views: [routingState], [credentialsState], [breakerDetails], ...) decodes it. A
     * [HarnessException.Config] names a bad argument.
     */
    override fun viewJson(name: String, args: List<Pair<String, String?>>): String {
        requireUnicode("view" to name, *args.toTypedArray())
        return call { native.view(name, args.takeWhile { it.second != null }.map { it.second!! }) }
    }

    /** Bulkhead permits currently held on [service]; a [HarnessException.Config] for an unknown service. */
    fun bulkheadInUse(service: String): Int {
        requireUnicode("service" to service)
        return call { native.bulkheadInUse(service).toInt() }
    }

    /**
     * The bulkhead limit of [service] now: `max_concurrency`, or where an adaptive limit
     * (`bulkhead.adaptive`) stands. A [HarnessException.Config] for an unknown service.
     */
    fun bulkheadLimit(service: String): Int {
        requireUnicode("service" to service)
        return call { native.bulkheadLimit(service).toInt() }
    }

    /**
     * The token provider for [service], which needs `auth: { type: callback }`: a `suspend`
     * function giving a [Token]. The engine calls it when the service needs a token (at most
     * one call at a time per service, bounded by `auth.refresh.timeout_ms`, default 10 s),
     * caches the token and refreshes it before it expires. It runs on [Dispatchers.Default];
     * wrap blocking work in `withContext(Dispatchers.IO)`. If it throws, requests that need
     * the token fail with [HarnessException.Auth] carrying its message. Setting a provider
     * replaces the previous one (and revives a dead credential).
     *
     * ```kotlin
     * client.setTokenProvider("orders") { Token(auth.fetch(), 3600.seconds) }
     * ```
     */
    fun setTokenProvider(service: String, provider: suspend () -> Token) {
        requireUnicode("service" to service)
        call { native.setTokenProvider(service, HostTokenProvider(provider)) }
    }

    /** For Java: [setTokenProvider] with a provider that answers with a `CompletableFuture<Token>`. */
    fun setTokenProviderAsync(service: String, provider: AsyncTokenProvider) {
        requireUnicode("service" to service)
        call { native.setTokenProvider(service, HostTokenProvider.of(provider)) }
    }

    /**
     * Registers a host adapter under [name]: providers with `adapter: <name>` (on an
     * `adapter: openai-compatible` route) speak its wire format from now on (until then they
     * are refused, and the route fails over). Registering a name again replaces the adapter.
     * A built-in adapter's name (`openai-compatible`, `anthropic`, `gemini`, `azure-openai`) or
     * a name that is not letters, digits, `-` and `_` is a [HarnessException.Config] naming `name`.
     *
     * ```kotlin
     * harness.registerAdapter("inhouse", InHouseAdapter())
     * ```
     */
    fun registerAdapter(name: String, adapter: HarnessAdapter) {
        requireUnicode("name" to name)
        call { native.registerAdapter(name, HostAdapter(adapter)) }
    }

    /** For Java: [registerAdapter] with an adapter whose methods answer with `CompletableFuture`s. */
    fun registerAdapterAsync(name: String, adapter: AsyncHarnessAdapter) {
        requireUnicode("name" to name)
        call { native.registerAdapter(name, HostAdapter.of(adapter)) }
    }

    /**
     * Adds [interceptor] to this client's calls, after those already added (one of the same
     * name is replaced, in its place); returns its name. Only the functions it overrides are
     * called; they run on [Dispatchers.IO], never on an engine thread (see [Interceptor]). A bad
     * name, level or service, or an interceptor with neither `before` nor `after`, is a
     * [HarnessException.Config] naming the field.
     *
     * ```kotlin
     * client.addInterceptor(object : Interceptor {
     *     override val name = "tenant"
     *     override suspend fun before(request: InterceptedRequest) = RequestChanges(headers = mapOf("x-tenant" to tenant()))
     * })
     * ```
     */
    fun addInterceptor(interceptor: Interceptor): String {
        val (host, phases) = HostInterceptor.of(interceptor)
        return register(interceptor.name, interceptor.level, interceptor.services, interceptor.wantBody, host, phases)
    }

    /** For Java: [addInterceptor] with an interceptor whose methods answer with `CompletableFuture`s. */
    fun addInterceptorAsync(interceptor: AsyncInterceptor): String {
        val (host, phases) = HostInterceptor.of(interceptor)
        return register(interceptor.name, interceptor.level, interceptor.services, interceptor.wantBody, host, phases)
    }

    private fun register(name: String, level: InterceptorLevel?, services: List<String>, wantBody: Boolean, host: HostInterceptor, phases: HostInterceptor.Phases): String {
        requireUnicode("name" to name)
        services.forEachIndexed { i, s -> requireUnicode("services[$i]" to s) }
        val registration = NativeRegistration(name, level?.value, services, phases.before, phases.after, wantBody)
        call { native.addInterceptor(registration, host) }
        return name
    }

    /** Removes the interceptor named [name]; whether there was one. */
    fun removeInterceptor(name: String): Boolean = native.removeInterceptor(name)

    /**
     * Sets the weight of [provider] on [route] at runtime, as a reload would (validated, with a
     * [HarnessEvent.ConfigReloaded]); returns the new [configVersion]. 0 takes the provider out
     * of rotation. A [HarnessException.Config] for an unknown route or provider.
     */
    fun setWeight(route: String, provider: String, weight: Int): String {
        requireUnicode("route" to route, "provider" to provider)
        if (weight < 0) throw HarnessException.config("weight: must not be negative, got $weight")
        return call { native.setWeight(route, provider, weight.toUInt()) }
    }

    /**
     * Answers [service]'s requests for [method] (`""` or `"*"`: any) on the path template
     * [path] (relative to the service's base URL: `/orders/{id}`, or `*`) with no network,
     * from now on and across reloads; the latest mock that matches wins. The whole pipeline
     * still runs (timeouts, retries, breaker, metrics, schema validation, events). A `{name}`
     * captured by the path is substituted into the string values of [json]. Give [json] (any
     * value a request's `json` takes) or a text [body], not both. A request of a mocked
     * service that no mock matches fails with [HarnessException.Config] naming its method and
     * path; bad input (unknown service, a path not starting with `/`, a status below 200) is a
     * [HarnessException.Config] naming the field.
     *
     * ```kotlin
     * client.mock("orders", "GET", "/orders/{id}", json = mapOf("id" to "{id}", "state" to "paid"))
     * ```
     */
    @JvmOverloads
    fun mock(
        service: String,
        method: String,
        path: String,
        status: Int = 200,
        json: Any? = null,
        body: String? = null,
        headers: Map<String, String> = emptyMap(),
        latencyMs: Long = 0,
    ) {
        requireUnicode("service" to service, "mock.match.method" to method, "mock.match.path" to path, "mock.body" to body)
        for ((k, v) in headers) requireUnicode("mock.headers" to k, "mock.headers.$k" to v)
        val response = NativeMockResponse(
            status = status,
            json = json?.let { Json.encode(it, "mock.json") },
            body = body,
            headers = headers.map { (k, v) -> NativeEntry(k, v) },
            latencyMs = latencyMs,
        )
        call { native.mock(service, method, path, response) }
    }

    /** Removes the mocks [mock] set for [service] (every service when null): it reaches the network again. */
    @JvmOverloads
    fun clearMocks(service: String? = null) {
        requireUnicode("service" to service)
        call { native.clearMocks(service) }
    }

    /**
     * Drops the stored answers of [name], a service or a route (its HTTP cache entries, or its
     * exact chat answers), or of every service and route when null; returns how many were
     * dropped. The next call fetches again. A [HarnessException.Config] for an unknown name.
     */
    @JvmOverloads
    fun cacheClear(name: String? = null): Int {
        requireUnicode("name" to name)
        return call { native.cacheClear(name).toInt() }
    }

    /**
     * Refuses new requests (they fail with [HarnessException.Other]); requests in flight
     * finish. Stops watching the config file and delivers this client's queued log records
     * and events.
     */
    override fun close() {
        // A collector of `events` that is behind must not hold up the flush.
        eventFlow?.close()
        native.shutdown()
    }

    val isClosed: Boolean get() = native.isClosed()

    override fun toString(): String = "HarnessClient(closed=$isClosed)"

    companion object {
        init {
            // Before the native library loads and registers its callbacks.
            EventThreads.ensure()
        }

        /**
         * From a `.yaml`, `.json` or `.toml` config file. With [watch], the client reloads
         * within a second of the file changing; an invalid edit is rejected (a
         * [HarnessEvent.ConfigRejected] and a log line say why) and the old config stays.
         */
        @JvmStatic
        @JvmOverloads
        fun fromFile(path: String, watch: Boolean = false): HarnessClient {
            requireUnicode("config file" to path)
            return HarnessClient(create { NativeClient.fromFile(path, watch, Slf4jLog) })
        }

        /** [fromFile] with a [Path]. */
        @JvmStatic
        @JvmOverloads
        fun fromFile(path: Path, watch: Boolean = false): HarnessClient = fromFile(path.toString(), watch)

        /** From the config as JSON text. */
        @JvmStatic
        fun fromJson(json: String): HarnessClient {
            requireUnicode("config" to json)
            return HarnessClient(create { NativeClient.fromJson(json, Slf4jLog) })
        }

        /** Every error kind name the engine can raise, base (`HarnessError`) first. */
        @JvmStatic
        val errorKinds: List<String> get() = dev.harness.ffi.errorKindNames()

        private inline fun create(make: () -> NativeClient): NativeClient {
            NativeLibrary.ensure()
            return call(make)
        }

        private inline fun <T> call(f: () -> T): T = try {
            f()
        } catch (e: NativeException) {
            throw HarnessException.from(e)
        }
    }
}

/**
 * The request as the engine reads it ([RequestPath.request]): its head as the core's `Request`
 * JSON, whose field names and rules are the core's, and the body beside it. A string that is
 * not valid Unicode (a lone surrogate) is refused here, naming its field.
 */
private fun HarnessRequest.encode(): java.nio.ByteBuffer {
    if (json != null && body != null) throw HarnessException.config("body: give either json or body, not both")
    val head = Json.Head()
        .string("service", service).string("method", method).string("path", path).string("endpoint", endpoint)
        .pairs("query", query).pairs("headers", headers, headerList)
        .string("idempotency_key", idempotencyKey).long("timeout_ms", timeoutMs)
        .string("traceparent", HostTrace.resolve(traceparent, headers, headerList)).string("principal", principal)
        .bytes()
    return when {
        json != null -> RequestPath.request(RequestPath.BODY_JSON, head, Json.encode(json, "json").toByteArray(Charsets.UTF_8))
        body != null -> RequestPath.request(RequestPath.BODY_BYTES, head, body)
        else -> RequestPath.request(RequestPath.BODY_NONE, head, null)
    }
}

/** The identity, for a future whose value is the outcome itself (one object, no allocation per call). */
@Suppress("UNCHECKED_CAST")
private fun <T> same(): (T) -> T = SAME as (T) -> T

private val SAME: (Any?) -> Any? = { it }
