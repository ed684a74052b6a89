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
    val headers: Map<String, String> = emptyMap(),
    /** A JSON body as a Map/List/scalar tree (sent as `application/json`). */
    val json: Any? = null,
    /** A raw body; give either [json] or [body]. */
    val body: ByteArray? = null,
    /** Sent as `Idempotency-Key`; makes any method safe to retry. */
    val idempotencyKey: String? = null,
    /** Overrides the service's total timeout (`timeouts.request_ms`). */
    val timeoutMs: Long? = null,
    /** The caller's W3C `traceparent`, continued downstream. */
    val traceparent: String? = null,
) {
    fun withEndpoint(endpoint: String?) = copy(endpoint = endpoint)
    fun withQuery(name: String, value: String) = copy(query = query + (name to value))
    fun withHeader(name: String, value: String) = copy(headers = headers + (name to value))
    fun withJson(json: Any?) = copy(json = json)
    fun withBody(body: ByteArray?) = copy(body = body)
    fun withIdempotencyKey(key: String?) = copy(idempotencyKey = key)
    fun withTimeoutMs(timeoutMs: Long?) = copy(timeoutMs = timeoutMs)
    fun withTraceparent(traceparent: String?) = copy(traceparent = traceparent)

    // Header values may be credentials: only their names are printed.
    override fun toString(): String =
        "HarnessRequest(service=$service, method=$method, path=$path, endpoint=$endpoint, headers=${headers.keys})"
}
