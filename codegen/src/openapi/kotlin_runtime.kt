// What the package's clients and models share: reading a JSON tree into typed values (a value
// that does not match throws HarnessException.Schema naming its JSON pointer), writing values
// as JSON and as parameters, and one request path over HarnessClient that turns a declared
// error response into its typed error. Internal: nothing here is the package's API.

import dev.harness.HarnessClient
import dev.harness.HarnessErrorInfo
import dev.harness.HarnessException
import dev.harness.HarnessRequest
import dev.harness.HarnessResponse
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.future.future
import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.descriptors.SerialDescriptor
import kotlinx.serialization.descriptors.buildClassSerialDescriptor
import kotlinx.serialization.encoding.Decoder
import kotlinx.serialization.encoding.Encoder
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonDecoder
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonEncoder
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import java.math.BigDecimal
import java.math.BigInteger
import java.time.LocalDate
import java.time.OffsetDateTime
import java.time.format.DateTimeFormatter
import java.time.format.DateTimeParseException
import java.util.Base64
import java.util.UUID
import java.util.concurrent.CompletableFuture

internal typealias JsonRead<T> = (JsonElement, String) -> T

/** The error for a value that is not what the document declares; the client adds the call's context. */
internal fun schemaError(reason: String): HarnessException.Schema =
    HarnessException.Schema(HarnessErrorInfo(kind = "SchemaError", message = "SchemaError: $reason", reason = reason))

internal fun jsonDrift(at: String, expected: String, got: JsonElement?): HarnessException.Schema =
    schemaError("${at.ifEmpty { "/" }}: expected $expected, got ${jsonShown(got)}")

internal fun jsonShown(v: JsonElement?): String = when (v) {
    null, JsonNull -> "null"
    is JsonObject -> "an object"
    is JsonArray -> "an array"
    is JsonPrimitive -> when {
        v.isString -> "a string"
        v.content == "true" || v.content == "false" -> "a boolean"
        INTEGER.matches(v.content) -> "an integer"
        else -> "a number"
    }
}

private val INTEGER = Regex("-?\\d+")
private val INTEGRAL = Regex("-?\\d+(\\.0+)?([eE][+]?\\d+)?")

/** The pointer of [key] below [at]. */
internal fun jsonChild(at: String, key: String): String = at + "/" + key.replace("~", "~0").replace("/", "~1")

internal fun jsonObject(v: JsonElement, at: String): JsonObject = v as? JsonObject ?: throw jsonDrift(at, "an object", v)

internal fun <T> jsonRequired(d: JsonObject, key: String, at: String, read: JsonRead<T>): T {
    val v = d[key] ?: throw schemaError("${at.ifEmpty { "/" }}: the required key '$key' is missing")
    return read(v, jsonChild(at, key))
}

/** Absent and null read alike, as null. */
internal fun <T> jsonOptional(d: JsonObject, key: String, at: String, read: JsonRead<T>): T? {
    val v = d[key]
    return if (v == null || v == JsonNull) null else read(v, jsonChild(at, key))
}

internal fun <T> jsonDefaulted(d: JsonObject, key: String, at: String, read: JsonRead<T>, default: T): T {
    val v = d[key]
    return if (v == null || v == JsonNull) default else read(v, jsonChild(at, key))
}

/** The keys an object has beside its declared properties (`additionalProperties`). */
internal fun <T> jsonRest(d: JsonObject, known: Set<String>, at: String, read: JsonRead<T>): Map<String, T> {
    val out = LinkedHashMap<String, T>()
    for ((k, v) in d) if (k !in known) out[k] = read(v, jsonChild(at, k))
    return out
}

private fun primitive(v: JsonElement, at: String, expected: String): JsonPrimitive =
    v as? JsonPrimitive ?: throw jsonDrift(at, expected, v)

internal fun jsonString(v: JsonElement, at: String): String {
    val p = primitive(v, at, "a string")
    if (!p.isString) throw jsonDrift(at, "a string", v)
    return p.content
}

private fun integral(v: JsonElement, at: String): BigInteger {
    val p = primitive(v, at, "an integer")
    if (p.isString || v == JsonNull || !INTEGRAL.matches(p.content)) throw jsonDrift(at, "an integer", v)
    return try {
        BigDecimal(p.content).toBigIntegerExact()
    } catch (e: ArithmeticException) {
        throw jsonDrift(at, "an integer", v)
    }
}

internal fun jsonLong(v: JsonElement, at: String): Long {
    val n = integral(v, at)
    if (n.bitLength() > 63) throw schemaError("${at.ifEmpty { "/" }}: expected an integer that fits 64 bits, got ${p(n)}")
    return n.toLong()
}

internal fun jsonInt(v: JsonElement, at: String): Int {
    val n = integral(v, at)
    if (n.bitLength() > 31) throw schemaError("${at.ifEmpty { "/" }}: expected an integer that fits 32 bits, got ${p(n)}")
    return n.toInt()
}

private fun p(n: BigInteger): String = n.toString().let { if (it.length > 40) it.take(40) + "..." else it }

internal fun jsonDouble(v: JsonElement, at: String): Double {
    val p = primitive(v, at, "a number")
    if (p.isString || v == JsonNull) throw jsonDrift(at, "a number", v)
    return p.content.toDoubleOrNull()?.takeIf { p.content != "true" && p.content != "false" } ?: throw jsonDrift(at, "a number", v)
}

internal fun jsonBoolean(v: JsonElement, at: String): Boolean {
    val p = primitive(v, at, "a boolean")
    if (p.isString || (p.content != "true" && p.content != "false")) throw jsonDrift(at, "a boolean", v)
    return p.content == "true"
}

internal fun jsonAny(v: JsonElement, @Suppress("UNUSED_PARAMETER") at: String): JsonElement = v

/** An RFC 3339 date-time (`Z` or an offset; `t`, `z` and a space separator accepted). */
internal fun jsonDateTime(v: JsonElement, at: String): OffsetDateTime {
    var s = jsonString(v, at).trim()
    if (s.length > 10 && (s[10] == 't' || s[10] == ' ')) s = s.substring(0, 10) + "T" + s.substring(11)
    if (s.endsWith("z")) s = s.dropLast(1) + "Z"
    return try {
        OffsetDateTime.parse(s)
    } catch (e: DateTimeParseException) {
        throw jsonDrift(at, "an RFC 3339 date-time", v)
    }
}

internal fun jsonDate(v: JsonElement, at: String): LocalDate = try {
    LocalDate.parse(jsonString(v, at))
} catch (e: DateTimeParseException) {
    throw jsonDrift(at, "a date (YYYY-MM-DD)", v)
}

private val UUID_TEXT = Regex("(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

internal fun jsonUuid(v: JsonElement, at: String): UUID {
    val s = jsonString(v, at)
    if (!UUID_TEXT.matches(s)) throw jsonDrift(at, "a UUID", v)
    return UUID.fromString(s)
}

internal fun jsonBytes(v: JsonElement, at: String): ByteArray = try {
    Base64.getDecoder().decode(jsonString(v, at))
} catch (e: IllegalArgumentException) {
    throw jsonDrift(at, "base64 text", v)
}

/** One of [values] (`1` is not `true`, `"1"` is not `1`). */
internal fun jsonLiteral(v: JsonElement, at: String, values: List<JsonPrimitive>): JsonPrimitive {
    val p = v as? JsonPrimitive
    if (p != null && values.any { it.isString == p.isString && it.content == p.content }) return p
    val got = if (p != null && p != JsonNull && p.content.length <= 40 && (p.isString || INTEGER.matches(p.content))) jsonText(p) else jsonShown(v)
    throw schemaError("${at.ifEmpty { "/" }}: expected one of ${values.joinToString(", ") { jsonText(it) }}, got $got")
}

internal fun <T> jsonList(v: JsonElement, at: String, item: JsonRead<T>): List<T> {
    val a = v as? JsonArray ?: throw jsonDrift(at, "an array", v)
    return a.mapIndexed { i, x -> item(x, "$at/$i") }
}

internal fun <T> jsonMap(v: JsonElement, at: String, value: JsonRead<T>): Map<String, T> {
    val out = LinkedHashMap<String, T>()
    for ((k, x) in jsonObject(v, at)) out[k] = value(x, jsonChild(at, k))
    return out
}

internal fun <T> jsonNullable(v: JsonElement, at: String, read: JsonRead<T>): T? = if (v == JsonNull) null else read(v, at)

/** A union's tag property, if [data] is an object that has it as a string. */
internal fun jsonTag(data: JsonElement, key: String): String? =
    ((data as? JsonObject)?.get(key) as? JsonPrimitive)?.takeIf { it.isString }?.content

/**
 * An untagged union: of the members that read [data], the one that knows most of its keys
 * (the first on a tie). Each member is its reader and the keys it declares (null: not an object).
 */
internal fun <T> jsonBestOf(data: JsonElement, at: String, members: List<Pair<JsonRead<T>, Set<String>?>>, expected: String): T {
    var best: T? = null
    var found = false
    var bestScore = -1
    val errors = ArrayList<String>()
    for ((read, keys) in members) {
        val v = try {
            read(data, at)
        } catch (e: HarnessException.Schema) {
            errors.add(e.reason)
            continue
        }
        val score = if (keys != null && data is JsonObject) keys.count { it in data } else 0
        if (score > bestScore) {
            best = v
            found = true
            bestScore = score
        }
    }
    if (!found) throw schemaError("${at.ifEmpty { "/" }}: expected $expected, and it is none of them (${errors.take(3).joinToString("; ")})")
    @Suppress("UNCHECKED_CAST")
    return best as T
}

// ---- writing ----

internal fun jsonText(v: JsonElement): String = v.toString()

/** A JSON value as a parameter: a string or other scalar as its text, anything else as JSON. */
internal fun paramText(v: JsonElement): String = if (v is JsonPrimitive && v != JsonNull) v.content else v.toString()

private val DATE_TIME: DateTimeFormatter = DateTimeFormatter.ISO_OFFSET_DATE_TIME

internal fun writeDateTime(v: OffsetDateTime): String = DATE_TIME.format(v)

internal fun writeBytes(v: ByteArray): String = Base64.getEncoder().encodeToString(v)

/** A JSON tree as the Map/List/scalar tree [HarnessRequest.json] takes (numbers exact). */
internal fun jsonTree(v: JsonElement): Any? = when (v) {
    JsonNull -> null
    is JsonObject -> LinkedHashMap<String, Any?>().also { m -> for ((k, x) in v) m[k] = jsonTree(x) }
    is JsonArray -> v.map { jsonTree(it) }
    is JsonPrimitive -> when {
        v.isString -> v.content
        v.content == "true" -> true
        v.content == "false" -> false
        INTEGER.matches(v.content) -> v.content.toLongOrNull() ?: BigInteger(v.content)
        else -> BigDecimal(v.content)
    }
}

/** A path parameter, percent-encoded: everything but `A-Z a-z 0-9 - . _ ~`. */
internal fun pathSegment(text: String): String {
    val out = StringBuilder()
    for (b in text.toByteArray(Charsets.UTF_8)) {
        val c = b.toInt() and 0xff
        if ((c in 'a'.code..'z'.code) || (c in 'A'.code..'Z'.code) || (c in '0'.code..'9'.code) || c == '-'.code || c == '.'.code || c == '_'.code || c == '~'.code) {
            out.append(c.toChar())
        } else {
            out.append('%').append("0123456789ABCDEF"[c shr 4]).append("0123456789ABCDEF"[c and 15])
        }
    }
    return out.toString()
}

/** The query as the path's `?...` (form-encoded, a name repeated as often as given). */
internal fun queryString(query: List<Pair<String, String>>): String =
    if (query.isEmpty()) "" else query.joinToString("&", prefix = "?") { (k, v) -> form(k) + "=" + form(v) }

private fun form(s: String): String = java.net.URLEncoder.encode(s, Charsets.UTF_8)

/** A model's kotlinx.serialization serializer: the generated reader and writer over the JSON tree. */
internal class ModelSerializer<T>(name: String, private val read: JsonRead<T>, private val write: (T) -> JsonElement) : KSerializer<T> {
    override val descriptor: SerialDescriptor = buildClassSerialDescriptor(name)

    override fun deserialize(decoder: Decoder): T {
        val json = decoder as? JsonDecoder ?: throw SerializationException("${descriptor.serialName} reads JSON only")
        return read(json.decodeJsonElement(), "")
    }

    override fun serialize(encoder: Encoder, value: T) {
        val json = encoder as? JsonEncoder ?: throw SerializationException("${descriptor.serialName} writes JSON only")
        json.encodeJsonElement(write(value))
    }
}

// ---- calls ----

/** One operation's request, how its answer is read, and its typed errors. */
internal class Operation<T>(
    val method: String,
    val path: String,
    val endpoint: String,
    val decode: (HarnessResponse) -> T,
    val errors: (HarnessException) -> Throwable?,
    val query: List<Pair<String, String>> = emptyList(),
    val headers: Map<String, String> = emptyMap(),
    val json: JsonElement? = null,
    val idempotencyKey: String? = null,
) {
    fun request(service: String, timeoutMs: Long?): HarnessRequest = HarnessRequest(
        service, method, path + queryString(query), endpoint = endpoint, headers = headers,
        json = json?.let { jsonTree(it) }, idempotencyKey = idempotencyKey, timeoutMs = timeoutMs,
    )
}

internal fun responseJson(r: HarnessResponse): JsonElement = try {
    Json.parseToJsonElement(r.text())
} catch (e: SerializationException) {
    throw schemaError("the body is not JSON")
}

/** The JSON body of an error response, or null when it has none or it is not JSON. */
internal fun errorJson(e: HarnessException): JsonElement? {
    val body = e.body ?: return null
    return try {
        Json.parseToJsonElement(String(body, Charsets.UTF_8))
    } catch (x: SerializationException) {
        null
    }
}

/** A typed error's model, or null when the body does not read as the declared type (Harness's error then stays as it was). */
internal fun <T> errorModel(e: HarnessException, read: JsonRead<T>): T? {
    val body = errorJson(e) ?: return null
    return try {
        read(body, "")
    } catch (x: HarnessException.Schema) {
        null
    }
}

/**
 * Which of an operation's declared error keys (`404`, `4XX`, `default`) an error status
 * Harness raised is: exact first, then the range, then default; null for any other error.
 */
internal fun statusKey(e: HarnessException, keys: Set<String>): String? {
    if (e !is HarnessException.HttpStatus && e !is HarnessException.Auth && e !is HarnessException.RateLimited) return null
    val status = e.status
    if (status == null || status < 400) return null
    return listOf(status.toString(), "${status / 100}XX", "default").firstOrNull { it in keys }
}

private fun <T> decoded(op: Operation<T>, service: String, r: HarnessResponse): T = try {
    op.decode(r)
} catch (e: HarnessException.Schema) {
    val reason = "${op.endpoint}: the ${r.status} response does not match the document: ${e.reason}"
    throw HarnessException.Schema(
        HarnessErrorInfo(
            kind = "SchemaError", message = "SchemaError: $reason", service = service, endpoint = op.endpoint,
            method = op.method, attempts = r.attempts, status = r.status, traceId = r.traceId, reason = reason,
        ),
    )
}

internal suspend fun <T> send(client: HarnessClient, service: String, op: Operation<T>, timeoutMs: Long?): T {
    val r = try {
        client.request(op.request(service, timeoutMs))
    } catch (e: HarnessException) {
        throw op.errors(e) ?: e
    }
    return decoded(op, service, r)
}

/** [send] for Java: cancelling the future cancels the call in the engine. */
internal fun <T> sendAsync(client: HarnessClient, service: String, op: Operation<T>, timeoutMs: Long?): CompletableFuture<T> =
    CoroutineScope(Dispatchers.Default).future { send(client, service, op, timeoutMs) }
