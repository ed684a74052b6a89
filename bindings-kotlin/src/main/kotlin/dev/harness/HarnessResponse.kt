package dev.harness

import java.nio.charset.Charset

/** A successful response (any status the engine did not turn into a [HarnessException]). */
data class HarnessResponse(
    val status: Int,
    /** Lower-case header names, in the order received, each with its values. */
    val headers: Map<String, List<String>>,
    val body: ByteArray,
    /** Wall time of the whole call, every attempt and backoff included. */
    val elapsedMs: Double,
    /** Attempts made, 1 when the first one succeeded. */
    val attempts: Int,
    val traceId: String,
) {
    /** The body decoded as text (UTF-8 unless told). */
    @JvmOverloads
    fun text(charset: Charset = Charsets.UTF_8): String = String(body, charset)

    /** The first value of a header, by case-insensitive name. */
    fun header(name: String): String? = headers[name.lowercase()]?.firstOrNull()

    override fun equals(other: Any?): Boolean =
        other is HarnessResponse && status == other.status && headers == other.headers &&
            body.contentEquals(other.body) && elapsedMs == other.elapsedMs &&
            attempts == other.attempts && traceId == other.traceId

    override fun hashCode(): Int = ((status * 31 + headers.hashCode()) * 31 + body.contentHashCode()) * 31 + traceId.hashCode()

    override fun toString(): String =
        "HarnessResponse(status=$status, body=${body.size} bytes, elapsedMs=$elapsedMs, attempts=$attempts, traceId=$traceId)"
}
