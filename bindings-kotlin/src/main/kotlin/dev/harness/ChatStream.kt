package dev.harness

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import java.lang.ref.Cleaner
import java.util.concurrent.atomic.AtomicReference

/**
 * An open streamed chat answer ([HarnessClient.openChatStream], Java
 * [HarnessClient.chatStreamAsync]): a provider has answered, and its chunks are pulled from
 * the engine as the reader asks for them. Most Kotlin code uses [HarnessClient.chatStream],
 * a Flow that opens and closes one of these.
 *
 * Read it once, as [chunks] (a Flow) or with [read] (blocking, for Java). The last chunk is
 * [ChatChunkKind.DONE] (finish reason, usage, cost); a [ChatChunkKind.RESTART] chunk means the
 * answer so far is void and a new one follows. A failure nobody could take over throws the
 * first provider's error. Stopping early (`take`, an exception in the collector, a cancelled
 * coroutine, [close]) cancels the answer in the engine, which releases the connection and
 * permits at once; a stream dropped unread is cancelled when it is garbage collected.
 */
class ChatStream internal constructor(head: ChatStreamHead) : AutoCloseable {
    val route: String = head.route
    val traceId: String = head.traceId

    private val reader = StreamReader<ChatChunk>(head.stream)
    private val cleanable = cleaner.register(this, reader)
    private val takenBy = AtomicReference<String?>(null)

    /** The chunks as a cold Flow, for one collection; the stream is closed when it ends, however it ends. */
    val chunks: Flow<ChatChunk> = flow {
        take("chunks")
        try {
            while (true) emit(reader.next() ?: break)
        } finally {
            close()
        }
    }

    /**
     * For Java: blocks until the next chunk and returns it, or null after the [ChatChunkKind.DONE]
     * chunk. Throws the [HarnessException]; an interrupt cancels the stream (and throws
     * [HarnessException.Cancelled] with the thread's interrupt flag set).
     */
    fun read(): ChatChunk? {
        if (takenBy.get() != "read()") take("read()")
        return reader.nextBlocking(
            { HarnessException.of(HarnessErrorInfo("CancelledError", "CancelledError: interrupted while reading the chat stream; it is cancelled")) },
            { it as? Exception ?: RuntimeException(it) },
        )
    }

    /** Cancels the answer in the engine if it is still open (idempotent). */
    override fun close() = cleanable.clean()

    override fun toString(): String = "ChatStream(route=$route, traceId=$traceId)"

    private fun take(how: String) {
        val was = takenBy.compareAndExchange(null, how)
        check(was == null) { "a chat stream can be read once (already read through $was, again through $how)" }
    }

    private companion object {
        /** Cancels chat streams dropped unread, so their permits come back. */
        val cleaner: Cleaner = Cleaner.create()
    }
}
