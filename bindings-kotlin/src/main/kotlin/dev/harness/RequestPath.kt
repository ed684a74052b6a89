package dev.harness

import com.sun.jna.Native
import com.sun.jna.Pointer
import dev.harness.ffi.FfiConverterTypeNativeChatStreamHead
import dev.harness.ffi.FfiConverterTypeNativeError
import dev.harness.ffi.FfiConverterTypeNativeLease
import dev.harness.ffi.FfiConverterTypeNativeReceiverCall
import dev.harness.ffi.FfiConverterTypeNativeResponse
import dev.harness.ffi.FfiConverterTypeNativeStreamHead
import dev.harness.ffi.NativeClient
import dev.harness.ffi.NativeReceiverCall
import dev.harness.ffi.NativeResponse
import dev.harness.ffi.NativeStreamHead
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.asExecutor
import kotlinx.coroutines.suspendCancellableCoroutine
import java.lang.ref.Reference
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.Executor
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException

/**
 * The request path (Rust side: `src/request_path.rs`; the pattern is in the README, "How
 * outcomes come back"): one downcall starts a request or a chat call, opens a stream or a
 * chat stream, asks for a stream's next chunk, or runs a receiver's step ([Idempotency]);
 * outcomes come back in batches, with no upcall: one daemon thread ([drainer]) waits in
 * `harness_kotlin_wait`, which returns every outcome queued by the time it wakes; one
 * downcall drops the engine task (or closes the stream).
 *
 * Nothing crosses as an address. The JVM names each waiting caller by a *ticket*, its key in
 * [calls]; Rust objects (the client, a running task, an open stream) are named by
 * generation-checked *handles* that stop matching once the object is gone. Only integers
 * and one byte array cross (a request's head and a chat call as the core's JSON, a receiver's
 * step in UniFFI's encoding), which keeps JNA from allocating (and later cleaning)
 * structures on every request.
 */
internal object RequestPath {
    private const val NO_TASK = 0L
    private const val RELEASED = -1L

    // What the outcome bytes hold (`request_path.rs`).
    private const val RESPONSE = 0
    private const val ERROR = 1
    private const val STREAM = 2
    private const val CHUNK = 3
    private const val END = 4
    private const val CHAT = 5
    private const val CHAT_STREAM = 6
    private const val CHAT_CHUNK = 7
    private const val LEASE = 8
    private const val STORED = 9
    private const val EMBED = 10

    /**
     * One waiting caller: where its outcome goes, and the engine task to drop once. The value
     * is a [HarnessResponse] (request), a [StreamHead] (open), a [ByteArray] (chunk), a
     * [ChatResponse] (chat), a [ChatStreamHead] (chat open), a [ChatChunk] (chat chunk), an
     * [EmbedResult] (embeddings), a
     * `NativeLease` (a claim to run), a [String] (a claim's stored result) or null (end).
     */
    abstract class Call<T> {
        internal val ticket: Long = tickets.incrementAndGet()
        private val task = AtomicLong(NO_TASK)

        /** Called on the drainer thread: hand off, never run caller code here. */
        abstract fun complete(value: T?, error: HarnessException?)

        /** Drops the engine task (aborting it if still running and freeing its permits); idempotent. */
        fun release() {
            val t = task.getAndSet(RELEASED)
            if (t != NO_TASK && t != RELEASED) harness_kotlin_drop(t)
        }

        /** False if the call was released first; then the task is dropped here. */
        internal fun attach(t: Long): Boolean {
            if (t == NO_TASK || task.compareAndSet(NO_TASK, t)) return true
            harness_kotlin_drop(t)
            return false
        }
    }

    /**
     * Suspends until the call [begin] starts has its outcome. Cancelling the coroutine cancels
     * the call in the engine; its task is released either way. An outcome that arrives for a
     * caller cancelled meanwhile goes to [discard] (an opened stream is closed).
     */
    suspend inline fun <T> await(noinline discard: ((T) -> Unit)? = null, crossinline begin: (Call<T>) -> Unit): T {
        var call: Call<T>? = null
        try {
            return suspendCancellableCoroutine { cont ->
                val c = object : Call<T>() {
                    override fun complete(value: T?, error: HarnessException?) {
                        @Suppress("UNCHECKED_CAST")
                        when {
                            error != null -> cont.resumeWithException(error)
                            discard == null -> cont.resume(value as T)
                            else -> cont.resume(value as T) { _, v, _ -> discard(v) }
                        }
                    }
                }
                call = c
                begin(c)
                cont.invokeOnCancellation { cancel(c) }
            }
        } finally {
            call?.release()
        }
    }

    /**
     * For Java: the call [begin] starts (with what [encode] wrote) as a [CompletableFuture] of
     * [wrap] of its outcome, completed off the engine's threads so dependent stages never run
     * on them. A failure to encode completes it exceptionally; any completion not ours
     * (`cancel(true)`, `complete(x)`) gives the call up; a wrapped value nobody will read
     * (cancelled meanwhile) goes to [discard].
     */
    inline fun <T, R> future(
        encode: () -> ByteBuffer,
        noinline wrap: (T) -> R,
        noinline discard: ((R) -> Unit)?,
        begin: (ByteBuffer, Call<T>) -> Unit,
    ): CompletableFuture<R> {
        val encoded = try {
            encode()
        } catch (e: Exception) {
            return CompletableFuture<R>().apply { completeExceptionally(e) }
        }
        val call = FutureCall(wrap, discard)
        begin(encoded, call)
        call.future.whenComplete { _, _ -> cancel(call) }
        return call.future
    }

    class FutureCall<T, R>(private val wrap: (T) -> R, private val discard: ((R) -> Unit)?) : Call<T>() {
        val future = CompletableFuture<R>()

        override fun complete(value: T?, error: HarnessException?) {
            futureExecutor.execute {
                release()
                if (error != null) {
                    future.completeExceptionally(error)
                } else {
                    @Suppress("UNCHECKED_CAST")
                    val r = wrap(value as T)
                    if (!future.complete(r)) discard?.invoke(r)
                }
            }
        }
    }

    private val futureExecutor: Executor = Dispatchers.Default.asExecutor()

    private val tickets = AtomicLong()
    private val calls = ConcurrentHashMap<Long, Call<*>>()

    /**
     * Takes outcomes as they come, in batches, for as long as the JVM runs: the engine's
     * threads only queue them (waking this one when it sleeps), so no JVM code runs on them.
     */
    private val drainer = Thread({
        while (true) {
            try {
                drain(harness_kotlin_wait(WAIT_MS))
            } catch (e: Throwable) {
                Thread.currentThread().let { t -> t.uncaughtExceptionHandler?.uncaughtException(t, e) }
            }
        }
    }, "harness-outcomes").apply { isDaemon = true }

    /** How long one wait lasts (it returns at once when outcomes come). */
    private const val WAIT_MS = 1000

    /** One row of a batch (`request_path.rs`, `Row`): ticket, tag, padding, data address, length. */
    private const val ROW = 32L

    /** Completes each call of [batch] (0: none came) and frees it (once, here). */
    private fun drain(batch: Long) {
        if (batch == 0L) return
        try {
            val head = Pointer(batch)
            val count = head.getLong(0)
            val rows = head.getPointer(8).getByteBuffer(0, count * ROW).order(ByteOrder.nativeOrder())
            for (i in 0 until count.toInt()) {
                val at = i * ROW.toInt()
                val len = rows.getLong(at + 24)
                val data = if (len == 0L) null else Pointer(rows.getLong(at + 16))
                try {
                    complete(rows.getLong(at), rows.getInt(at + 8), data, len)
                } catch (e: Throwable) {
                    // One call's bug must not strand the rest of the batch.
                    Thread.currentThread().let { t -> t.uncaughtExceptionHandler?.uncaughtException(t, e) }
                }
            }
        } finally {
            harness_kotlin_free(batch)
        }
    }

    private fun complete(ticket: Long, tag: Int, data: Pointer?, len: Long) {
        @Suppress("UNCHECKED_CAST")
        val call = calls.remove(ticket) as Call<Any>?
        if (call == null) {
            // Its caller has gone (cancelled): an opened stream is closed at once.
            if ((tag == STREAM || tag == CHAT_STREAM) && data != null && len >= 8) {
                harness_kotlin_close(data.getByteBuffer(0, 8).order(ByteOrder.BIG_ENDIAN).getLong()) // `stream` comes first
            }
            return
        }
        val (value, error) = try {
            decode(tag, data, len)
        } catch (e: Exception) {
            null to HarnessException.of(HarnessErrorInfo("HarnessError", "HarnessError: the outcome did not decode: $e"))
        }
        call.complete(value, error)
    }

    private fun decode(tag: Int, data: Pointer?, len: Long): Pair<Any?, HarnessException?> {
        if (tag == END) return null to null
        if (tag == CHUNK) return (if (len == 0L) ByteArray(0) else data!!.getByteArray(0, len.toInt())) to null
        if (tag == STORED) return (if (len == 0L) "" else String(data!!.getByteArray(0, len.toInt()), Charsets.UTF_8)) to null
        if (tag == CHAT_CHUNK) return ViewJson.decode<ChatChunk>(String(data!!.getByteArray(0, len.toInt()), Charsets.UTF_8)) to null
        if (tag == CHAT) {
            // The view's length (4 bytes, big-endian), the view as JSON, then the raw answer.
            val bytes = data!!.getByteArray(0, len.toInt())
            val n = ByteBuffer.wrap(bytes, 0, 4).order(ByteOrder.BIG_ENDIAN).getInt()
            val view = ViewJson.decode<ChatResponse>(String(bytes, 4, n, Charsets.UTF_8))
            return view.copy(raw = bytes.copyOfRange(4 + n, bytes.size)) to null
        }
        if (tag == EMBED) {
            // The view's length (4 bytes, big-endian), the view as JSON, then the vectors as little-endian float32s.
            val bytes = data!!.getByteArray(0, len.toInt())
            val n = ByteBuffer.wrap(bytes, 0, 4).order(ByteOrder.BIG_ENDIAN).getInt()
            val view = ViewJson.decode<EmbedResponse>(String(bytes, 4, n, Charsets.UTF_8))
            return EmbedResult.of(view, ByteBuffer.wrap(bytes, 4 + n, bytes.size - 4 - n)) to null
        }
        val buf = data!!.getByteBuffer(0, len).order(ByteOrder.BIG_ENDIAN) // UniFFI's byte order; JNA gives native
        return when (tag) {
            RESPONSE -> FfiConverterTypeNativeResponse.read(buf).toResponse() to null
            STREAM -> FfiConverterTypeNativeStreamHead.read(buf).toHead() to null
            CHAT_STREAM -> FfiConverterTypeNativeChatStreamHead.read(buf).let { ChatStreamHead(it.stream.toLong(), it.route, it.traceId) } to null
            LEASE -> FfiConverterTypeNativeLease.read(buf) to null
            else -> null to HarnessException.from(FfiConverterTypeNativeError.read(buf))
        }
    }

    init {
        val library = System.getProperty("uniffi.component.harness_kotlin.libraryOverride") ?: "harness_kotlin"
        Native.register(RequestPath::class.java, library)
        drainer.start()
    }

    // A request frame's first byte: what its body is (`request_path.rs`).
    const val BODY_NONE = 0
    const val BODY_JSON = 1
    const val BODY_BYTES = 2

    /**
     * A request as the engine reads it: the body's kind, the head's length (4 bytes,
     * big-endian), the head (the core's `Request` as JSON, [Json.Head]), then the body.
     */
    fun request(kind: Int, head: ByteArray, body: ByteArray?): ByteBuffer =
        ByteBuffer.allocate(5 + head.size + (body?.size ?: 0)).put(kind.toByte()).putInt(head.size).put(head).also { if (body != null) it.put(body) }

    /** A chat call as the engine reads it: the route's length (4 bytes, big-endian), the route, then the call as JSON. */
    fun chat(route: ByteArray, call: ByteArray): ByteBuffer =
        ByteBuffer.allocate(4 + route.size + call.size).putInt(route.size).put(route).put(call)

    /** A receiver's step in UniFFI's encoding. */
    fun encode(call: NativeReceiverCall): ByteBuffer {
        val buf = ByteBuffer.allocate(FfiConverterTypeNativeReceiverCall.allocationSize(call).toInt())
        FfiConverterTypeNativeReceiverCall.write(call, buf)
        return buf
    }

    /** Starts [encoded] on [client]; the [HarnessResponse] reaches [call] (possibly before this returns). */
    fun start(client: NativeClient, handle: Long, encoded: ByteBuffer, call: Call<HarnessResponse>) =
        begin(client, handle, encoded, call, ::harness_kotlin_start)

    /** Opens [encoded] as a stream on [client]; the [StreamHead] reaches [call]. */
    fun open(client: NativeClient, handle: Long, encoded: ByteBuffer, call: Call<StreamHead>) =
        begin(client, handle, encoded, call, ::harness_kotlin_open)

    /** Starts the chat call [encoded] on [client]; the [ChatResponse] reaches [call]. */
    fun chat(client: NativeClient, handle: Long, encoded: ByteBuffer, call: Call<ChatResponse>) =
        begin(client, handle, encoded, call, ::harness_kotlin_chat)

    /** Opens the chat stream [encoded] on [client]; the [ChatStreamHead] reaches [call]. */
    fun openChat(client: NativeClient, handle: Long, encoded: ByteBuffer, call: Call<ChatStreamHead>) =
        begin(client, handle, encoded, call, ::harness_kotlin_chat_open)

    /** Starts the embeddings call [encoded] on [client]; the [EmbedResult] reaches [call]. */
    fun embed(client: NativeClient, handle: Long, encoded: ByteBuffer, call: Call<EmbedResult>) =
        begin(client, handle, encoded, call, ::harness_kotlin_embed)

    /**
     * Runs the receiver step [encoded] on [receiver] (its handle: [handle]); a claim's lease or
     * stored result, or the end of a `complete` / `fail`, reaches [call].
     */
    fun receive(receiver: Any, handle: Long, encoded: ByteBuffer, call: Call<Any?>) =
        begin(receiver, handle, encoded, call, ::harness_kotlin_receive)

    private inline fun begin(
        owner: Any,
        handle: Long,
        encoded: ByteBuffer,
        call: Call<*>,
        entry: (Long, Long, ByteArray, Long) -> Long,
    ) {
        calls[call.ticket] = call
        val task = try {
            entry(handle, call.ticket, encoded.array(), encoded.position().toLong())
        } catch (e: Throwable) {
            calls.remove(call.ticket)
            throw e
        } finally {
            Reference.reachabilityFence(owner) // the handle names a client (or receiver) only while the object lives
        }
        if (!call.attach(task)) calls.remove(call.ticket)
    }

    /**
     * Asks for the next chunk of [stream]: a [ByteArray] (a body) or a [ChatChunk] (a chat
     * stream), or null at the end, reaches [call].
     */
    fun next(stream: Long, call: Call<*>) {
        calls[call.ticket] = call
        try {
            harness_kotlin_next(stream, call.ticket)
        } catch (e: Throwable) {
            calls.remove(call.ticket)
            throw e
        }
    }

    /** Cancels [stream] in the engine (a waiting read ends); a no-op once it ended or was closed. */
    fun close(stream: Long) = harness_kotlin_close(stream)

    /** The caller gave up: forget the call and abort its engine task. */
    fun cancel(call: Call<*>) {
        calls.remove(call.ticket)
        call.release()
    }

    private external fun harness_kotlin_wait(timeoutMs: Int): Long
    private external fun harness_kotlin_free(batch: Long)
    private external fun harness_kotlin_start(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_open(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_chat(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_chat_open(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_embed(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_receive(receiver: Long, ticket: Long, call: ByteArray, len: Long): Long
    private external fun harness_kotlin_drop(task: Long)
    private external fun harness_kotlin_next(stream: Long, ticket: Long)
    private external fun harness_kotlin_close(stream: Long)
}

/** An opened stream's head and the engine's handle for reading it. */
internal class StreamHead(val stream: Long, val status: Int, val headers: HarnessHeaders, val attempts: Int, val traceId: String)

/** An opened chat stream's handle, route and trace id. */
internal class ChatStreamHead(val stream: Long, val route: String, val traceId: String)

/** Every value of a repeated header is kept, in order (the engine gives lower-case names). */
internal fun NativeResponse.toResponse(): HarnessResponse {
    // What routing did crosses as the core's Routed view (generated in Types.kt).
    val r = routed?.let { ViewJson.decode<Routed>(it) }
    return HarnessResponse(
        status.toInt(), grouped(headers), body, elapsedMs, attempts.toInt(), traceId,
        route = r?.route,
        provider = r?.provider,
        model = r?.model,
        attemptsByProvider = r?.attemptsByProvider ?: emptyList(),
        fallback = r?.fallback,
        usage = r?.usage,
        cost = r?.cost,
        cache = cache?.let { ViewJson.decode<CacheStamp>(it) },
    )
}

private fun NativeStreamHead.toHead(): StreamHead =
    StreamHead(stream.toLong(), status.toInt(), grouped(headers), attempts.toInt(), traceId)

private fun grouped(headers: List<dev.harness.ffi.NativeEntry>): HarnessHeaders {
    val grouped = LinkedHashMap<String, MutableList<String>>()
    for (h in headers) grouped.getOrPut(h.name) { ArrayList(1) }.add(h.value)
    return HarnessHeaders(grouped)
}
