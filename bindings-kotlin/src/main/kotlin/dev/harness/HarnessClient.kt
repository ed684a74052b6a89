package dev.harness

import dev.harness.ffi.NativeClient
import dev.harness.ffi.NativeEntry
import dev.harness.ffi.NativeException
import dev.harness.ffi.NativeRequest
import kotlinx.coroutines.CancellableContinuation
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.asExecutor
import kotlinx.coroutines.suspendCancellableCoroutine
import java.nio.charset.CharacterCodingException
import java.nio.file.Path
import java.util.concurrent.CompletableFuture
import java.util.concurrent.Executor
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException

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
 * Every behaviour (timeouts, retries, breaker, bulkhead, metrics) is the Rust engine's; this
 * class only translates. Cancelling the calling coroutine (or the [CompletableFuture]) drops
 * the request in the engine and frees every permit it held.
 */
class HarnessClient private constructor(private val native: NativeClient) : AutoCloseable {

    /** From the config as a map (the same shape as the YAML/JSON/TOML file). */
    constructor(config: Map<String, Any?>) : this(create { NativeClient.fromJson(Json.encode(config, "config")) })

    /** From a `.yaml`, `.json` or `.toml` config file. */
    constructor(path: Path) : this(create { NativeClient.fromPath(path.toString()) })

    private val address: Long = native.address().toLong()

    /** Runs one request through the engine's pipeline. */
    suspend fun request(request: HarnessRequest): HarnessResponse {
        val encoded = request.encode()
        var call: RequestPath.Call? = null
        try {
            return suspendCancellableCoroutine { cont ->
                val c = ContinuationCall(cont)
                call = c
                RequestPath.start(native, address, encoded, c)
                cont.invokeOnCancellation { RequestPath.cancel(c) }
            }
        } finally {
            call?.release()
        }
    }

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
    ): HarnessResponse = request(
        HarnessRequest(service, method, path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent, headerList),
    )

    suspend fun get(
        service: String,
        path: String,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
    ): HarnessResponse = request(service, "GET", path, endpoint, query, headers, null, null, null, timeoutMs, traceparent)

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
    ): HarnessResponse = request(service, "POST", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent)

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
    ): HarnessResponse = request(service, "PUT", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent)

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
    ): HarnessResponse = request(service, "PATCH", path, endpoint, query, headers, json, body, idempotencyKey, timeoutMs, traceparent)

    suspend fun delete(
        service: String,
        path: String,
        query: Map<String, String> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
        endpoint: String? = null,
        idempotencyKey: String? = null,
        timeoutMs: Long? = null,
        traceparent: String? = null,
    ): HarnessResponse = request(service, "DELETE", path, endpoint, query, headers, null, null, idempotencyKey, timeoutMs, traceparent)

    /**
     * For Java: the same call as a [CompletableFuture]. It completes exceptionally with a
     * [HarnessException] (wrapped in a `CompletionException` by `join()`); `cancel(true)`
     * cancels the request in the engine.
     */
    fun requestAsync(request: HarnessRequest): CompletableFuture<HarnessResponse> {
        val encoded = try {
            request.encode()
        } catch (e: Exception) {
            return CompletableFuture<HarnessResponse>().apply { completeExceptionally(e) }
        }
        val call = FutureCall()
        RequestPath.start(native, address, encoded, call)
        // Any completion not ours (cancel(true), complete(x)) gives the request up; after ours it is a no-op.
        call.future.whenComplete { _, _ -> RequestPath.cancel(call) }
        return call.future
    }

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

    /** This client's metrics in the Prometheus text format. */
    fun metrics(): String = native.metricsText()

    /** `closed`, `open` or `half_open` for (service, endpoint, method); endpoint defaults to the path's template. */
    @JvmOverloads
    fun breakerState(service: String, method: String, path: String, endpoint: String? = null): String {
        requireUnicode("service" to service, "method" to method, "path" to path, "endpoint" to endpoint)
        return native.breakerState(service, method, path, endpoint)
    }

    /** Bulkhead permits currently held on [service]; a [HarnessException.Config] for an unknown service. */
    fun bulkheadInUse(service: String): Int {
        requireUnicode("service" to service)
        return call { native.bulkheadInUse(service).toInt() }
    }

    /** Refuses new requests (they fail with [HarnessException.Other]); requests in flight finish. */
    override fun close() {
        native.shutdown()
    }

    val isClosed: Boolean get() = native.isClosed()

    override fun toString(): String = "HarnessClient(closed=$isClosed)"

    companion object {
        /** From a `.yaml`, `.json` or `.toml` config file. */
        @JvmStatic
        fun fromFile(path: String): HarnessClient {
            requireUnicode("config file" to path)
            return HarnessClient(Path.of(path))
        }

        /** From the config as JSON text. */
        @JvmStatic
        fun fromJson(json: String): HarnessClient {
            requireUnicode("config" to json)
            return HarnessClient(create { NativeClient.fromJson(json) })
        }

        /** Every error kind name the engine can raise, base (`HarnessError`) first. */
        @JvmStatic
        val errorKinds: List<String> get() = dev.harness.ffi.errorKindNames()

        private inline fun create(make: () -> NativeClient): NativeClient = call(make)

        private inline fun <T> call(f: () -> T): T = try {
            f()
        } catch (e: NativeException) {
            throw HarnessException.from(e)
        }
    }
}

/**
 * The request in the engine's encoding. A string that is not valid Unicode (a lone surrogate)
 * cannot become UTF-8: UniFFI's encoder refuses it, and only then are the fields searched,
 * so the hot path pays nothing for the check.
 */
private fun HarnessRequest.encode(): java.nio.ByteBuffer {
    val native = toNative()
    return try {
        RequestPath.encode(native)
    } catch (e: CharacterCodingException) {
        throw loneSurrogateIn(native)
    }
}

private fun HarnessRequest.toNative(): NativeRequest {
    if (json != null && body != null) throw HarnessException.config("body: give either json or body, not both")
    if (timeoutMs != null && timeoutMs < 0) throw HarnessException.config("timeout_ms: must not be negative, got $timeoutMs")
    val headerEntries = ArrayList<NativeEntry>(headers.size + headerList.size)
    for ((k, v) in headers) headerEntries.add(NativeEntry(k, v))
    for ((k, v) in headerList) headerEntries.add(NativeEntry(k, v))
    return NativeRequest(
        service = service,
        method = method,
        path = path,
        endpoint = endpoint,
        query = query.map { (k, v) -> NativeEntry(k, v) },
        headers = headerEntries,
        json = json?.let { Json.encode(it, "json") },
        body = body,
        idempotencyKey = idempotencyKey,
        timeoutMs = timeoutMs?.toULong(),
        traceparent = traceparent,
    )
}

/** A suspended caller: resumed from the engine's thread (the continuation dispatches to its own dispatcher). */
private class ContinuationCall(private val cont: CancellableContinuation<HarnessResponse>) : RequestPath.Call() {
    override fun complete(response: HarnessResponse?, error: HarnessException?) {
        if (error == null) cont.resume(response!!) else cont.resumeWithException(error)
    }
}

// Futures for Java callers complete off the engine's threads, so dependent stages never run on them.
private val futureExecutor: Executor = Dispatchers.Default.asExecutor()

private class FutureCall : RequestPath.Call() {
    val future = CompletableFuture<HarnessResponse>()

    override fun complete(response: HarnessResponse?, error: HarnessException?) {
        futureExecutor.execute {
            release()
            if (error == null) future.complete(response) else future.completeExceptionally(error)
        }
    }
}
