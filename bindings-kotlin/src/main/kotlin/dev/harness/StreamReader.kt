package dev.harness

import kotlinx.coroutines.suspendCancellableCoroutine
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException

/**
 * Reads and closes one of the engine's open streams (a response body's chunks, a chat
 * answer's chunks): one read at a time through [RequestPath]. It holds no reference to the
 * stream object it serves, so it can be that object's cleaner action ([run] closes it).
 */
internal class StreamReader<T : Any>(private val stream: Long) : Runnable {
    override fun run() = RequestPath.close(stream)

    /** The next chunk, or null at the end; cancelling the coroutine cancels the stream. */
    suspend fun next(): T? = suspendCancellableCoroutine { cont ->
        val call = object : RequestPath.Call<T>() {
            override fun complete(value: T?, error: HarnessException?) {
                if (error == null) cont.resume(value) else cont.resumeWithException(error)
            }
        }
        RequestPath.next(stream, call)
        cont.invokeOnCancellation {
            RequestPath.cancel(call)
            RequestPath.close(stream)
        }
    }

    /** The blocking reader saw the end: later reads give null again. */
    @Volatile
    private var ended = false

    /**
     * For Java: blocks until the next chunk (null at the end). An interrupt cancels the stream,
     * sets the thread's flag again and throws [interrupted]; an engine error is thrown as [failed] makes it.
     */
    fun nextBlocking(interrupted: () -> Exception, failed: (Throwable) -> Exception): T? {
        if (ended) return null
        val f = CompletableFuture<T?>()
        val call = object : RequestPath.Call<T>() {
            // Only the reader's own thread waits on `f`: nothing else runs on the engine's thread.
            override fun complete(value: T?, error: HarnessException?) {
                if (error == null) f.complete(value) else f.completeExceptionally(error)
            }
        }
        RequestPath.next(stream, call)
        return try {
            f.get().also { if (it == null) ended = true }
        } catch (e: InterruptedException) {
            RequestPath.cancel(call)
            RequestPath.close(stream)
            Thread.currentThread().interrupt()
            throw interrupted()
        } catch (e: ExecutionException) {
            throw failed(e.cause ?: e)
        }
    }
}
