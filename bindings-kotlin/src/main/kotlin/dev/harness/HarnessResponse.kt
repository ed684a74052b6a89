package dev.harness

import java.nio.charset.Charset

/**
 * A successful response (any status the engine did not turn into a [HarnessException]).
 *
 * A request that named a route (`request("chat", "POST", "/v1/chat/completions", ...)`) also
 * says who answered and how: [route], [provider], [model], [attemptsByProvider], [fallback]
 * ([stale]), [usage] and [cost]; all null (or empty) when the request was not routed.
 * When a cache had a part in the answer (README "Caching and coalescing"), [cache] says what it
 * did, and [fromCache] and [revalidated] sum it up.
 */
data class HarnessResponse @JvmOverloads constructor(
    val status: Int,
    /** Lower-case header names in the order received, each with every value in order ([HarnessHeaders.values]). */
    val headers: HarnessHeaders,
    val body: ByteArray,
    /** Wall time of the whole call, every attempt and backoff included. */
    val elapsedMs: Double,
    /** Attempts made, 1 when the first one succeeded. */
    val attempts: Int,
    val traceId: String,
    /** The route the request named, or null when it named a service. */
    val route: String? = null,
    /** The provider that answered (null for a static fallback, or when not routed). */
    val provider: String? = null,
    /** The model that answered (the provider's report, else its configured model). */
    val model: String? = null,
    /** Attempts each provider got, in the order they were first tried. */
    val attemptsByProvider: List<Pair<String, Int>> = emptyList(),
    /** `cache` or `static` when no provider could answer; see [stale]. */
    val fallback: String? = null,
    /** Token counts, for a route with the `openai-compatible` adapter. */
    val usage: Usage? = null,
    /** From the answering provider's configured prices and [usage]. */
    val cost: Double? = null,
    /** What a cache did for this answer (`hit`, `revalidated`, `stale`, `coalesced`, `miss`, `bypass`...), or null when no cache had a part in it. */
    val cache: CacheStamp? = null,
) {
    constructor(status: Int, headers: Map<String, List<String>>, body: ByteArray, elapsedMs: Double, attempts: Int, traceId: String) :
        this(status, HarnessHeaders(headers), body, elapsedMs, attempts, traceId)

    /** A cached answer, served because no provider of the route could answer now. */
    val stale: Boolean get() = fallback == "cache"

    /**
     * Served from a store, not fetched for this call: a fresh stored answer (`hit`, which makes
     * no attempt), one the origin confirmed with a 304 (`revalidated`) or one served past its
     * freshness (`stale`).
     */
    val fromCache: Boolean get() = servedFromCache(cache?.outcome)

    /** A stored answer the origin confirmed with a 304 (the caller sees the stored 200). */
    val revalidated: Boolean get() = cache?.outcome == "revalidated"

    /** The body decoded as text (UTF-8 unless told). */
    @JvmOverloads
    fun text(charset: Charset = Charsets.UTF_8): String = String(body, charset)

    /**
     * The first value of a header, by case-insensitive name, or null; a repeated header
     * (`set-cookie`) has more: [HarnessHeaders.values] gives every one.
     */
    fun header(name: String): String? = headers.first(name)

    override fun equals(other: Any?): Boolean =
        other is HarnessResponse && status == other.status && headers == other.headers &&
            body.contentEquals(other.body) && elapsedMs == other.elapsedMs &&
            attempts == other.attempts && traceId == other.traceId && route == other.route &&
            provider == other.provider && model == other.model && attemptsByProvider == other.attemptsByProvider &&
            fallback == other.fallback && usage == other.usage && cost == other.cost && cache == other.cache

    override fun hashCode(): Int = ((status * 31 + headers.hashCode()) * 31 + body.contentHashCode()) * 31 + traceId.hashCode()

    override fun toString(): String =
        "HarnessResponse(status=$status, body=${body.size} bytes, elapsedMs=$elapsedMs, attempts=$attempts, traceId=$traceId" +
            (if (route == null) "" else ", route=$route, provider=$provider, model=$model, fallback=$fallback, cost=$cost") +
            (if (cache == null) ")" else ", cache=${cache.outcome})")
}

/** The cache outcomes that mean "served from a store" (the core's `CacheStamp::from_cache`). */
internal fun servedFromCache(outcome: String?): Boolean =
    outcome == "hit" || outcome == "revalidated" || outcome == "stale" || outcome == "exact" || outcome == "semantic"

/**
 * Response headers: a read-only map from lower-case name to every value received for it, in
 * order (`headers["set-cookie"]` is a list), plus case-insensitive lookups:
 *
 * ```kotlin
 * r.headers.values("Set-Cookie")   // ["a=1; Path=/", "b=2"]: every value, in order; [] if absent
 * r.headers.first("Content-Type")  // the first value, or null (what r.header(name) returns)
 * ```
 *
 * `toString()` prints the names only: values (cookies, tokens) are not logged by accident.
 */
class HarnessHeaders(headers: Map<String, List<String>>) : Map<String, List<String>> {
    private val map: Map<String, List<String>> =
        if (headers.keys.all { it == it.lowercase() }) {
            headers
        } else {
            LinkedHashMap<String, MutableList<String>>().also { m ->
                for ((k, v) in headers) m.getOrPut(k.lowercase()) { ArrayList(v.size) }.addAll(v)
            }
        }

    /** Every value of the header [name] (case-insensitive), in the order received; empty if absent. */
    fun values(name: String): List<String> = map[name.lowercase()] ?: emptyList()

    /** The first value of the header [name] (case-insensitive), or null. */
    fun first(name: String): String? = map[name.lowercase()]?.firstOrNull()

    override val entries: Set<Map.Entry<String, List<String>>> get() = map.entries
    override val keys: Set<String> get() = map.keys
    override val values: Collection<List<String>> get() = map.values
    override val size: Int get() = map.size
    override fun isEmpty(): Boolean = map.isEmpty()
    override fun containsKey(key: String): Boolean = map.containsKey(key)
    override fun containsValue(value: List<String>): Boolean = map.containsValue(value)
    override fun get(key: String): List<String>? = map[key]

    override fun equals(other: Any?): Boolean = other is Map<*, *> && map == other
    override fun hashCode(): Int = map.hashCode()
    override fun toString(): String = "HarnessHeaders${map.keys}"
}
