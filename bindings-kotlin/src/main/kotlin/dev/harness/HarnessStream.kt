package dev.harness

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import java.io.IOException
import java.io.InputStream
import java.io.InterruptedIOException
import java.lang.ref.Cleaner
import java.util.Objects
import java.util.concurrent.atomic.AtomicBoolean

/**
 * A streamed response ([HarnessClient.stream], Java [HarnessClient.streamAsync]): the head is
 * in, and the body is pulled from the engine chunk by chunk, as the consumer asks for it
 * (nothing is read ahead beyond the socket's buffer).
 *
 * ```kotlin
 * client.stream("llm", "POST", "/v1/complete", json = prompt).use { s ->
 *     s.body.collect { chunk -> out.write(chunk) }
 * }
 * ```
 *
 * Read the body once, as [body] (a Flow) or [inputStream] (Java). Stopping early (`take`,
 * `first`, an exception in the collector, a cancelled coroutine, [close]) cancels the stream
 * in the engine, which releases the connection and the bulkhead permit at once. Errors
 * while reading are the engine's: an idle timeout is a [HarnessException.Timeout] with phase
 * `idle`, a body cut before its end a [HarnessException.Connect] or [HarnessException.Protocol].
 * A stream that is dropped unread is cancelled when it is garbage collected; [close] it
 * (or `use` it) to release it at once.
 */
class HarnessStream internal constructor(head: StreamHead) : AutoCloseable {
    val status: Int = head.status
    /** Lower-case header names in the order received, each with every value in order. */
    val headers: HarnessHeaders = head.headers
    /** Attempts made to get the head, 1 when the first one succeeded. */
    val attempts: Int = head.attempts
    val traceId: String = head.traceId

    private val reader = StreamReader<ByteArray>(head.stream)
    private val cleanable = cleaner.register(this, reader)
    private val taken = AtomicBoolean()

    /** The first value of a header, by case-insensitive name, or null. */
    fun header(name: String): String? = headers.first(name)

    /**
     * The body as a cold Flow of chunks, for one collection. The stream is closed when the
     * collection ends, however it ends.
     */
    val body: Flow<ByteArray> = flow {
        take("body")
        try {
            while (true) emit(reader.next() ?: break)
        } finally {
            close()
        }
    }

    /**
     * The body as a blocking [InputStream] (for Java). `read` throws an [IOException] whose
     * cause is the [HarnessException]; an interrupt cancels the stream
     * ([InterruptedIOException]); `close()` cancels it.
     */
    fun inputStream(): InputStream {
        take("inputStream()")
        return ChunkInputStream()
    }

    /** Cancels the stream in the engine if it is still open (idempotent). */
    override fun close() = cleanable.clean()

    override fun toString(): String = "HarnessStream(status=$status, attempts=$attempts, traceId=$traceId)"

    private fun take(how: String) {
        check(taken.compareAndSet(false, true)) { "the body of a stream can be read once (again through $how)" }
    }

    private inner class ChunkInputStream : InputStream() {
        private var chunk = ByteArray(0)
        private var pos = 0
        private var ended = false

        override fun read(): Int {
            val one = ByteArray(1)
            return if (read(one, 0, 1) == -1) -1 else one[0].toInt() and 0xff
        }

        override fun read(b: ByteArray, off: Int, len: Int): Int {
            Objects.checkFromIndexSize(off, len, b.size)
            if (len == 0) return 0
            while (pos == chunk.size) {
                if (ended) return -1
                val next = try {
                    reader.nextBlocking(
                        { InterruptedIOException("interrupted while reading the stream; it is cancelled") },
                        { IOException(it.message, it) },
                    )
                } catch (e: IOException) {
                    ended = true
                    throw e
                }
                if (next == null) {
                    ended = true
                    return -1
                }
                chunk = next
                pos = 0
            }
            val n = minOf(len, chunk.size - pos)
            System.arraycopy(chunk, pos, b, off, n)
            pos += n
            return n
        }

        override fun available(): Int = chunk.size - pos

        override fun close() = this@HarnessStream.close()
    }

    private companion object {
        /** Cancels streams dropped unread, so their permits come back. */
        val cleaner: Cleaner = Cleaner.create()
    }
}
