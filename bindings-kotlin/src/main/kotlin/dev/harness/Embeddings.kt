package dev.harness

import java.nio.ByteBuffer
import java.nio.ByteOrder

/**
 * One embeddings call on a route of `kind: embeddings` ([HarnessClient.embed]; Java
 * [HarnessClient.embedAsync]). The engine checks the call (at least one input, none empty,
 * `dimensions` >= 1): a [HarnessException.Config] names the field.
 *
 * ```java
 * new EmbedRequest("embed", List.of("first text", "second text")).withDimensions(256)
 * ```
 */
data class EmbedRequest @JvmOverloads constructor(
    val route: String,
    /** The texts to embed, one vector each, in order. */
    val inputs: List<String>,
    /** Shorter vectors, for models that can give them (OpenAI's `dimensions`, Gemini's `outputDimensionality`). */
    val dimensions: Int? = null,
    /** One value per name; replaces the provider service's header of that name. */
    val headers: Map<String, String> = emptyMap(),
    /** Overrides the route's total deadline, across every batch. */
    val timeoutMs: Long? = null,
    /** The caller's W3C `traceparent`, continued downstream. */
    val traceparent: String? = null,
    /** Who the call is made for (a user or tenant id), kept in the audit record only; never sent. */
    val principal: String? = null,
) {
    fun withDimensions(dimensions: Int?) = copy(dimensions = dimensions)
    fun withHeader(name: String, value: String) = copy(headers = headers + (name to value))
    fun withTimeoutMs(timeoutMs: Long?) = copy(timeoutMs = timeoutMs)
    fun withTraceparent(traceparent: String?) = copy(traceparent = traceparent)
    fun withPrincipal(principal: String?) = copy(principal = principal)

    // Header values may be credentials, and inputs the user's words: neither is printed.
    override fun toString(): String =
        "EmbedRequest(route=$route, inputs=${inputs.size}, dimensions=$dimensions, headers=${headers.keys})"
}

/** The embeddings call as the engine reads it ([RequestPath.embed]): the route, then the call as the core's `EmbedRequest` JSON. */
internal fun EmbedRequest.encode(): ByteBuffer {
    requireUnicode("route" to route)
    // The core's words for 0; a negative number cannot even cross as its unsigned type.
    dimensions?.let { if (it < 1) throw HarnessException.config("dimensions: expected an integer >= 1, got $it") }
    val call = Json.Head(64 + inputs.sumOf { it.length + 3 })
        .json("inputs", Json.encode(inputs, "inputs"))
        .long("dimensions", dimensions?.toLong())
        .pairs("headers", headers).long("timeout_ms", timeoutMs)
        .string("traceparent", HostTrace.resolve(traceparent, headers), "traceparent").string("principal", principal)
        .bytes()
    return RequestPath.chat(route.toByteArray(Charsets.UTF_8), call)
}

/**
 * The vectors of an embeddings call, one per input in input order (every one [dimensions]
 * long), with who answered and what it cost. [toString] prints sizes, never the vectors.
 */
class EmbedResult internal constructor(
    /** Input `i`'s vector at index `i`. */
    val vectors: List<FloatArray>,
    /** How many vectors (one per input). */
    val count: Int,
    /** The length of every vector. */
    val dimensions: Int,
    /** Tokens across every batch (null when the provider reports none, e.g. Gemini). */
    val usage: Usage?,
    /** The price of [usage] per the route's `price` (null without a price). */
    val cost: Double?,
    val route: String,
    /** The provider that answered the first batch. */
    val provider: String?,
    val model: String?,
    /** How many calls the inputs were split into (per the providers' `max_batch`). */
    val batches: Int,
    /** Attempts across every batch. */
    val attempts: Int,
    /** The first batch's trace id. */
    val traceId: String,
    val elapsedMs: Double,
) {
    /** Input [i]'s vector. */
    fun vector(i: Int): FloatArray = vectors[i]

    override fun toString(): String =
        "EmbedResult(count=$count, dimensions=$dimensions, usage=$usage, cost=$cost, route=$route, provider=$provider, model=$model, " +
            "batches=$batches, attempts=$attempts, traceId=$traceId, elapsedMs=$elapsedMs)"

    internal companion object {
        /** The core's view and the vectors as little-endian float32s, read with one bulk copy per vector. */
        fun of(view: EmbedResponse, vectors: ByteBuffer): EmbedResult {
            val floats = vectors.slice().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer()
            val expected = view.count.toLong() * view.dimensions
            check(floats.remaining().toLong() == expected) { "${floats.remaining()} floats for ${view.count} vectors of ${view.dimensions}" }
            val list = List(view.count) { FloatArray(view.dimensions).also { v -> floats.get(v) } }
            return EmbedResult(
                list, view.count, view.dimensions, view.usage, view.cost, view.route, view.provider, view.model,
                view.batches, view.attempts, view.traceId, view.elapsedMs,
            )
        }
    }
}
