package dev.harness

import com.sun.jna.Callback
import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import com.sun.jna.Pointer
import dev.harness.ffi.FfiConverterTypeNativeError
import dev.harness.ffi.FfiConverterTypeNativeRequest
import dev.harness.ffi.FfiConverterTypeNativeResponse
import dev.harness.ffi.NativeClient
import dev.harness.ffi.NativeRequest
import dev.harness.ffi.NativeResponse
import java.lang.ref.Reference
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

/**
 * The request path (Rust side: `src/request_path.rs`): one downcall starts a request, one
 * upcall from the engine's thread delivers its outcome, one downcall drops the engine task.
 * Only integers and one byte array cross, in UniFFI's own encoding of the records, which
 * keeps JNA from allocating (and later cleaning) structures on every request.
 */
internal object RequestPath {
    private const val NO_TASK = 0L
    private const val RELEASED = -1L

    /** One request in flight: where its outcome goes, and the engine task to drop once. */
    abstract class Call {
        internal val ticket: Long = tickets.incrementAndGet()
        private val task = AtomicLong(NO_TASK)

        /** Called on an engine thread: hand off, never run caller code here. */
        abstract fun complete(response: HarnessResponse?, error: HarnessException?)

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

    private val tickets = AtomicLong()
    private val calls = ConcurrentHashMap<Long, Call>()

    /** The completion function the engine calls, on its own (kept attached) threads. */
    internal interface Completion : Callback {
        fun invoke(ticket: Long, data: Pointer?, len: Long)
    }

    private val completion = object : Completion {
        override fun invoke(ticket: Long, data: Pointer?, len: Long) {
            val call = calls.remove(ticket) ?: return // cancelled meanwhile
            val (response, error) = try {
                val buf = data!!.getByteBuffer(0, len).order(ByteOrder.BIG_ENDIAN) // UniFFI's byte order; JNA gives native
                if (buf.get() == 0.toByte()) {
                    FfiConverterTypeNativeResponse.read(buf).toResponse() to null
                } else {
                    null to HarnessException.from(FfiConverterTypeNativeError.read(buf))
                }
            } catch (e: Exception) {
                null to HarnessException.of(HarnessErrorInfo("HarnessError", "HarnessError: the outcome did not decode: $e"))
            }
            call.complete(response, error)
        }
    }

    init {
        val library = System.getProperty("uniffi.component.harness_kotlin.libraryOverride") ?: "harness_kotlin"
        Native.register(RequestPath::class.java, library)
        // Keep the engine's threads attached to the JVM instead of attaching one per completion.
        Native.setCallbackThreadInitializer(completion, CallbackThreadInitializer(true, false, "harness-worker"))
        harness_kotlin_set_completion(completion)
    }

    /** The request in UniFFI's encoding; throws before anything reaches the engine. */
    fun encode(request: NativeRequest): ByteBuffer {
        val buf = ByteBuffer.allocate(FfiConverterTypeNativeRequest.allocationSize(request).toInt())
        FfiConverterTypeNativeRequest.write(request, buf)
        return buf
    }

    /** Starts [encoded] on [client]; the outcome reaches [call] (possibly before this returns). */
    fun start(client: NativeClient, address: Long, encoded: ByteBuffer, call: Call) {
        calls[call.ticket] = call
        val task = try {
            harness_kotlin_start(address, call.ticket, encoded.array(), encoded.position().toLong())
        } catch (e: Throwable) {
            calls.remove(call.ticket)
            throw e
        } finally {
            Reference.reachabilityFence(client) // `address` is only valid while the object lives
        }
        if (!call.attach(task)) calls.remove(call.ticket)
    }

    /** The caller gave up: forget the call and abort its engine task. */
    fun cancel(call: Call) {
        calls.remove(call.ticket)
        call.release()
    }

    private external fun harness_kotlin_set_completion(completion: Completion)
    private external fun harness_kotlin_start(client: Long, ticket: Long, request: ByteArray, len: Long): Long
    private external fun harness_kotlin_drop(task: Long)
}

/** Every value of a repeated header is kept, in order (the engine gives lower-case names). */
internal fun NativeResponse.toResponse(): HarnessResponse {
    val grouped = LinkedHashMap<String, MutableList<String>>()
    for (h in headers) grouped.getOrPut(h.name) { ArrayList(1) }.add(h.value)
    return HarnessResponse(status.toInt(), HarnessHeaders(grouped), body, elapsedMs, attempts.toInt(), traceId)
}
