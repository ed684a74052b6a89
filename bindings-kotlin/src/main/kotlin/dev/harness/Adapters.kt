package dev.harness

import dev.harness.ffi.AdapterException
import dev.harness.ffi.NativeAdapter
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.future.await
import kotlinx.coroutines.withContext
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.jsonObject
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import java.util.concurrent.ExecutionException

/**
 * A provider's wire format written in Kotlin, for a model server with its own JSON
 * ([HarnessClient.registerAdapter]). A provider with `adapter: <name>` on an
 * `adapter: openai-compatible` route uses it; the engine still does routing, retries,
 * failover, breakers, timeouts and pricing. JSON crosses each way (the shapes are the core's,
 * `core/src/adapters/host.rs`):
 *
 * - [buildRequest]: `{"request": <the OpenAI-shaped chat body, model set>, "provider": {"id", "model"},
 *   "stream": bool}` -> `{"path": "/...", "body": <JSON>, "headers"?: {"name": "value"}}`;
 * - [parseResponse]: `{"status", "headers": {...}, "body": <text>}` -> `{"content", "tool_calls"?,
 *   "finish_reason"?, "usage"?: {"prompt_tokens", "completion_tokens"}, "model"?}` or
 *   `{"error": {"code", "message"}}` (also how an error status is given its code);
 * - [parseStreamEvent]: `{"event", "data"}` -> null (nothing for the caller), `{"content"?, "tool_calls"?,
 *   "finish_reason"?, "usage"?, "done"?: true}` or `{"error": {"code", "message"}}`.
 *
 * The methods run on [Dispatchers.Default], never on an engine thread (wrap blocking work in
 * `withContext(Dispatchers.IO)`), within the call's deadline (past it they are cancelled). An
 * exception is a [HarnessException.Protocol] for that provider's attempt naming the adapter
 * and the step (``adapter `inhouse` raised in build_request: IllegalStateException: ...``), and
 * the route fails over; it never crashes the engine.
 */
interface HarnessAdapter {
    suspend fun buildRequest(request: JsonObject): JsonObject
    suspend fun parseResponse(response: JsonObject): JsonObject
    suspend fun parseStreamEvent(event: JsonObject): JsonObject?
}

/**
 * For Java: a [HarnessAdapter] whose methods answer with a [CompletableFuture]
 * ([HarnessClient.registerAdapterAsync]). A future that completes exceptionally, or a method
 * that throws, is the adapter raising; [parseStreamEvent]'s future may complete with null.
 */
interface AsyncHarnessAdapter {
    fun buildRequest(request: JsonObject): CompletableFuture<JsonObject>
    fun parseResponse(response: JsonObject): CompletableFuture<JsonObject>
    fun parseStreamEvent(event: JsonObject): CompletableFuture<JsonObject?>
}

/**
 * The engine's view of a host adapter (`src/adapters.rs`). The engine awaits [call] from its
 * runtime; the adapter runs on [Dispatchers.Default], never on an engine thread, and a call
 * past its deadline is cancelled. Whatever the adapter throws becomes `<SimpleName>: <message>`.
 */
internal class HostAdapter(private val adapter: HarnessAdapter) : NativeAdapter {
    override suspend fun call(step: String, input: String): String = try {
        withContext(Dispatchers.Default) {
            val value = ViewJson.json.parseToJsonElement(input).jsonObject
            val out: JsonElement = when (step) {
                "build_request" -> adapter.buildRequest(value)
                "parse_response" -> adapter.parseResponse(value)
                "parse_stream_event" -> adapter.parseStreamEvent(value) ?: JsonNull
                else -> throw IllegalArgumentException("unknown step `$step`")
            }
            out.toString()
        }
    } catch (e: CancellationException) {
        throw e
    } catch (t: Throwable) {
        throw AdapterException.Raised(describeHostException(t))
    }

    companion object {
        fun of(adapter: AsyncHarnessAdapter) = HostAdapter(object : HarnessAdapter {
            override suspend fun buildRequest(request: JsonObject): JsonObject =
                awaitFuture(adapter.buildRequest(request), "buildRequest") ?: throw NullPointerException("buildRequest's future completed with null")

            override suspend fun parseResponse(response: JsonObject): JsonObject =
                awaitFuture(adapter.parseResponse(response), "parseResponse") ?: throw NullPointerException("parseResponse's future completed with null")

            override suspend fun parseStreamEvent(event: JsonObject): JsonObject? =
                awaitFuture(adapter.parseStreamEvent(event), "parseStreamEvent")
        })

        // Java may return null whatever the signature says.
        private suspend fun <T> awaitFuture(future: CompletableFuture<T>?, method: String): T? {
            if (future == null) throw NullPointerException("$method returned no future")
            return future.await()
        }
    }
}

/** A host exception as the engine is told it: its class's simple name and message (unwrapping a future's wrapper). */
internal fun describeHostException(t: Throwable): String {
    var e = t
    while ((e is CompletionException || e is ExecutionException) && e.cause != null) e = e.cause!!
    val name = e.javaClass.simpleName.ifEmpty { e.javaClass.name }
    return e.message?.let { "$name: $it" } ?: name
}
