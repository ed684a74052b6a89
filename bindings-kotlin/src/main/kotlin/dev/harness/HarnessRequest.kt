package dev.harness

/**
 * One call: which service, which method and path, which payload. Everything else
 * (timeouts, retries, breaking, isolation) is the engine's, from the config.
 *
 * Kotlin callers usually use [HarnessClient.request]'s named arguments; Java callers build
 * one of these and chain the `with*` copies: `new HarnessRequest("orders", "GET", "/x").withHeader("a", "b")`.
 */
data class HarnessRequest @JvmOverloads constructor(
    val service: String,
    val method: String,
    val path: String,
    /** Label for breaker keys and metrics; default: the path with IDs collapsed to `{id}`. */
    val endpoint: String? = null,
    val query: Map<String, String> = emptyMap(),
    /** One value per name; a name given here replaces the config's header of that name. */
    val headers: Map<String, String> = emptyMap(),
    /**
     * A JSON body as a Map/List/scalar tree, sent as `application/json` exactly as written:
     * map key order kept, integers of any size exact, NaN/Infinity, lone surrogates and
     * nesting past 512 refused with a [HarnessException.Config] (see the README).
     */
    val json: Any? = null,
    /** A raw body; give either [json] or [body]. */
    val body: ByteArray? = null,
    /** Sent as `Idempotency-Key`; makes any method safe to retry. */
    val idempotencyKey: String? = null,
    /** Overrides the service's total timeout (`timeouts.request_ms`). */
    val timeoutMs: Long? = null,
    /** The caller's W3C `traceparent`, continued downstream. */
    val traceparent: String? = null,
    /**
     * More headers, sent after [headers] in this order; a name may repeat (`cookie`, `x-a`),
     * and every value is sent.
     */
    val headerList: List<Pair<String, String>> = emptyList(),
    /**
     * Who the call is made for (a user or tenant id), kept in the audit record only: never
     * sent downstream, never in the log line. 1 to 256 characters, no control characters.
     */
    val principal: String? = null,
) {
    fun withEndpoint(endpoint: String?) = copy(endpoint = endpoint)
    fun withQuery(name: String, value: String) = copy(query = query + (name to value))
    /** Sets [name] to [value], replacing an earlier [withHeader] of the same name. */
    fun withHeader(name: String, value: String) = copy(headers = headers + (name to value))
    /** Adds one more value for [name] ([headerList]): repeated names are all sent, in order. */
    fun withAddedHeader(name: String, value: String) = copy(headerList = headerList + (name to value))
    fun withJson(json: Any?) = copy(json = json)
    fun withBody(body: ByteArray?) = copy(body = body)
    fun withIdempotencyKey(key: String?) = copy(idempotencyKey = key)
    fun withTimeoutMs(timeoutMs: Long?) = copy(timeoutMs = timeoutMs)
    fun withTraceparent(traceparent: String?) = copy(traceparent = traceparent)
    fun withPrincipal(principal: String?) = copy(principal = principal)

    // Header values may be credentials: only their names are printed.
    override fun toString(): String =
        "HarnessRequest(service=$service, method=$method, path=$path, endpoint=$endpoint, headers=${headers.keys + headerList.map { it.first }})"
}
