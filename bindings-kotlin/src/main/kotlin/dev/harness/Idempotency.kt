package dev.harness

import dev.harness.ffi.NativeException
import dev.harness.ffi.NativeIdempotency
import dev.harness.ffi.NativeLease
import dev.harness.ffi.NativeReceiverCall
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.await
import kotlinx.coroutines.future.future
import kotlinx.coroutines.withContext
import java.util.concurrent.CompletableFuture
import java.util.concurrent.atomic.AtomicBoolean
import java.util.function.Supplier

/**
 * The idempotent receiver, for webhooks and event consumers: a handler runs at most once per
 * message, across every process that shares its store (`redis_url`; without it, this
 * process's memory).
 *
 * ```kotlin
 * val idem = Idempotency(mapOf("redis_url" to "redis://127.0.0.1:6379/0", "signature" to mapOf("secret" to mapOf("env" to "WEBHOOK_SECRET"))))
 * idem.verify(timestamp, body, signature)                          // AuthError: nothing runs
 * val result = idem.run(idem.key("acme", "invoice.paid", msgId)) {
 *     ledger.credit(msgId)                                          // once per message
 *     mapOf("credited" to true)                                     // stored, returned to every delivery
 * }
 * ```
 *
 * The config takes `prefix` (`harness:idem:`), `ttl_ms` (24 h), `lease_ms` (30 s),
 * `retry_failed` (true), `redis_url`, `on_store_down` (`reject` or `process`) and
 * `signature: { secret: {env|file|value}, max_skew_ms }`; a bad one is a
 * [HarnessException.Config] naming the field. Every behaviour (claims, leases and fencing,
 * the store's outages, signatures) is the engine's: [run] only calls its claim, then the
 * handler, then its complete (or fail).
 *
 * [close] frees the receiver (and its Redis connection); deliveries already running finish.
 */
class Idempotency private constructor(private val native: NativeIdempotency) : AutoCloseable {

    /** From the receiver's config as a map. */
    constructor(config: Map<String, Any?>) : this(call { NativeIdempotency.fromJson(Json.encode(config, "config")) })

    private val handle: Long = native.handle().toLong()
    private val description: String = native.describe()
    private val closed = AtomicBoolean(false)

    /**
     * `{prefix}{tenant}:{event_type}:{msg_id}`. Each part is printable text of 1 to 256
     * characters, or a [HarnessException.Config] naming the part (`msg_id: ...`).
     */
    fun key(tenant: String, eventType: String, msgId: String): String {
        requireUnicode("tenant" to tenant, "event_type" to eventType, "msg_id" to msgId)
        return live { native.key(tenant, eventType, msgId) }
    }

    /**
     * Runs [handler] at most once for [key] and returns its result, read back from the store,
     * to this and every later delivery of the message:
     * - the first delivery runs [handler]; its result is written as JSON (as a `json` body is,
     *   see `Json`) and stored for `ttl_ms`;
     * - a delivery after it gets the stored result; [handler] does not run;
     * - a delivery while another runs (here or in another process) gets a
     *   [HarnessException.DuplicateInFlight] with the lease time left as `retryAfterMs`;
     * - if [handler] throws (or its result cannot be written as JSON), the claim is marked
     *   failed and the exception is rethrown; with `retry_failed` (the default) a redelivery
     *   runs it again, without it a redelivery gets a [HarnessException.Other] with code
     *   `failed_before`;
     * - when the store is down: `on_store_down: reject` (the default) is a
     *   [HarnessException.Other] with code `store_unavailable` and nothing runs; `process`
     *   runs [handler] without dedup.
     *
     * Every delivery returns the result as read back, so all of them return equal values:
     * a `Map` (a `LinkedHashMap<String, Any?>`, key order kept), a `List` (`ArrayList`), a
     * `String`, a `Boolean`, null, an integer as a `Long` (a `BigInteger` past Long's range)
     * and any other number as a `Double` (a `BigDecimal` when a Double cannot hold it exactly
     * as written). So `mapOf("n" to 1)` comes back as `{n=1L}`; use the [ResultCodec]
     * overload for your own types.
     *
     * [handler] runs in the caller's coroutine. Cancelling the caller while [handler] runs
     * counts as a failure; once [handler] has returned, its result is stored even if the
     * caller is cancelled meanwhile. A claim cancelled before [handler] starts leaves the key
     * claimed until its lease ends, as a crashed worker would.
     */
    suspend fun run(key: String, handler: suspend () -> Any?): Any? =
        deliver(key, handler, { Json.encode(it, "result") }, ::readBack, { _, text -> readBack(text) })

    /**
     * [run] with your own result type: [codec] writes the result as JSON text (so that a
     * receiver in another language can read it too) and reads a stored one back. The first
     * delivery returns the handler's own value; later ones `codec.decode` of what it stored.
     */
    suspend fun <T> run(key: String, codec: ResultCodec<T>, handler: suspend () -> T): T =
        deliver(key, handler, codec::encode, codec::decode) { value, _ -> value }

    /**
     * For Java: [run] with a handler answering with a [CompletableFuture]; the result (or the
     * [HarnessException], or the handler's exception) completes the returned future.
     * `cancel(true)` on it while the handler runs counts as a failure, as in [run].
     *
     * ```java
     * idem.runAsync(idem.key("acme", "invoice.paid", msgId), () -> ledger.creditAsync(msgId).thenApply(r -> Map.of("credited", true)))
     *     .thenAccept(result -> ...);
     * ```
     */
    fun runAsync(key: String, handler: Supplier<out CompletableFuture<*>?>): CompletableFuture<Any?> =
        javaScope.future { run(key) { awaitJava(handler) } }

    /** For Java: the [ResultCodec] form of [run], with a handler answering with a [CompletableFuture]. */
    fun <T> runAsync(key: String, codec: ResultCodec<T>, handler: Supplier<out CompletableFuture<T>?>): CompletableFuture<T> =
        javaScope.future {
            run(key, codec) {
                @Suppress("UNCHECKED_CAST")
                awaitJava(handler) as T
            }
        }

    /**
     * Checks a signed delivery: [signature] is hex HMAC-SHA256 of `{timestamp}.{body}` (a
     * `sha256=` prefix is accepted) with the configured secret, [timestamp] Unix seconds
     * within `signature.max_skew_ms`. Throws [HarnessException.Auth] (code `bad_signature` or
     * `stale_signature`); a [HarnessException.Config] if no `signature` is configured.
     */
    fun verify(timestamp: String, body: ByteArray, signature: String) {
        requireUnicode("timestamp" to timestamp, "signature" to signature)
        live { native.verify(timestamp, body, signature) }
    }

    /** Signs `{timestamp}.{body}` as [verify] expects (for senders and tests): hex HMAC-SHA256. */
    fun sign(timestamp: String, body: ByteArray): String {
        requireUnicode("timestamp" to timestamp)
        return live { native.sign(timestamp, body) }
    }

    /** This receiver's counters (`harness_idempotency_total{outcome}`) in the Prometheus text format. */
    fun metricsText(): String = live { native.metricsText() }

    /** Frees the receiver; later calls throw [HarnessException.Other]. Idempotent. */
    override fun close() {
        if (closed.compareAndSet(false, true)) native.destroy()
    }

    val isClosed: Boolean get() = closed.get()

    /** Prefix, backend and whether deliveries are signed: never the secret or a Redis password. */
    override fun toString(): String = description

    private suspend fun <T> deliver(
        key: String,
        handler: suspend () -> T,
        encode: (T) -> String,
        stored: (String) -> T,
        ran: (T, String) -> T,
    ): T {
        requireUnicode("key" to key)
        val lease = when (val claim = step(NativeReceiverCall.Claim(key))) {
            is String -> return stored(claim)
            else -> claim as NativeLease
        }
        val value: T
        val text: String
        try {
            value = handler()
            text = encode(value)
            requireUnicode("result" to text)
        } catch (t: Throwable) {
            withContext(NonCancellable) {
                try {
                    step(NativeReceiverCall.Fail(lease))
                } catch (e: Throwable) {
                    t.addSuppressed(e)
                }
            }
            throw t
        }
        // The handler ran: its result is stored whatever happens to the caller now.
        withContext(NonCancellable) { step(NativeReceiverCall.Complete(lease, text)) }
        return ran(value, text)
    }

    /** One step through the request path: a `NativeLease` or the stored [String] for a claim, null for the others. */
    private suspend fun step(call: NativeReceiverCall): Any? {
        if (closed.get()) throw closedError()
        val encoded = RequestPath.encode(call)
        return RequestPath.await<Any?> { RequestPath.receive(native, handle, encoded, it) }
    }

    private inline fun <T> live(f: () -> T): T {
        if (closed.get()) throw closedError()
        return try {
            call(f)
        } catch (e: IllegalStateException) {
            // Closed by another thread between the check and the call.
            if (closed.get()) throw closedError() else throw e
        }
    }

    private companion object {
        /** Where Java's [runAsync] coroutines run; one failing never cancels another. */
        val javaScope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

        inline fun <T> call(f: () -> T): T = try {
            f()
        } catch (e: NativeException) {
            throw HarnessException.from(e)
        }

        fun closedError() = HarnessException.of(HarnessErrorInfo("HarnessError", "HarnessError: the receiver is closed"))

        fun readBack(text: String): Any? = try {
            Json.decode(text)
        } catch (e: IllegalArgumentException) {
            throw HarnessException.of(HarnessErrorInfo("HarnessError", "HarnessError: result: the stored result is not JSON (${e.message})"))
        }

        suspend fun awaitJava(handler: Supplier<out CompletableFuture<*>?>): Any? {
            // Java may return null whatever the signature says.
            val future = handler.get() ?: throw NullPointerException("the handler returned no future")
            return future.await()
        }
    }
}

/**
 * How [Idempotency.run] stores your result type: [encode] writes it as JSON text (a receiver
 * in any language may read it back), [decode] reads a stored one. Make them round-trip, so a
 * duplicate gets a value equal to the first delivery's. E.g. with kotlinx.serialization:
 *
 * ```kotlin
 * object Receipts : ResultCodec<Receipt> {
 *     override fun encode(value: Receipt) = Json.encodeToString(value)
 *     override fun decode(json: String) = Json.decodeFromString<Receipt>(json)
 * }
 * ```
 */
interface ResultCodec<T> {
    fun encode(value: T): String

    fun decode(json: String): T
}
