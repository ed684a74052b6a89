package dev.harness

import dev.harness.ffi.NativeChatChunk
import dev.harness.ffi.NativeChatChunkKind
import dev.harness.ffi.NativeChatRequest
import dev.harness.ffi.NativeChatResponse
import dev.harness.ffi.NativeEntry
import dev.harness.ffi.NativeProviderAttempts
import dev.harness.ffi.NativeUsage

/**
 * One chat call on a route with `adapter: openai-compatible` ([HarnessClient.chat],
 * [HarnessClient.chatStream]; Java [HarnessClient.chatAsync], [HarnessClient.chatStreamAsync]).
 * The route picks the provider, its model and its parameter spelling; the engine validates
 * [messages] and [params] (a [HarnessException.Config] names the field).
 *
 * ```java
 * new ChatRequest("chat", List.of(Map.of("role", "user", "content", "Hi"))).withParam("temperature", 0.2)
 * ```
 */
data class ChatRequest @JvmOverloads constructor(
    val route: String,
    /** `[{"role": "user", "content": "..."}, ...]`: any JSON the provider takes (tool calls too), written as [HarnessRequest.json] is. */
    val messages: List<Map<String, Any?>>,
    /** Other chat-completions parameters (`temperature`, `max_tokens`, `tools`, ...); `model` is set per provider. */
    val params: Map<String, Any?> = emptyMap(),
    /** One value per name; replaces the provider service's header of that name. */
    val headers: Map<String, String> = emptyMap(),
    /** Overrides the route's total deadline across providers. */
    val timeoutMs: Long? = null,
    /** The caller's W3C `traceparent`, continued downstream. */
    val traceparent: String? = null,
    /** Who the call is made for (a user or tenant id), kept in the audit record only; never sent. */
    val principal: String? = null,
) {
    fun withParam(name: String, value: Any?) = copy(params = params + (name to value))
    fun withParams(params: Map<String, Any?>) = copy(params = params)
    fun withHeader(name: String, value: String) = copy(headers = headers + (name to value))
    fun withTimeoutMs(timeoutMs: Long?) = copy(timeoutMs = timeoutMs)
    fun withTraceparent(traceparent: String?) = copy(traceparent = traceparent)
    fun withPrincipal(principal: String?) = copy(principal = principal)

    // Header values may be credentials, and messages the user's words: neither is printed.
    override fun toString(): String =
        "ChatRequest(route=$route, messages=${messages.size}, params=${params.keys}, headers=${headers.keys})"
}

/** Token counts as the provider reported them. */
data class Usage(val promptTokens: Long, val completionTokens: Long, val totalTokens: Long)

/**
 * A chat answer, the same shape whichever provider gave it.
 *
 * @property content the assistant's text.
 * @property finishReason `stop`, `length`, `tool_calls`, ... as the provider said.
 * @property usage token counts, when the provider reported them.
 * @property provider the provider id that answered (null for a static fallback).
 * @property model the model that answered (the provider's report, else its configured model).
 * @property cost from the answering provider's configured prices and [usage].
 * @property fallback `cache` or `static` when no provider could answer; see [stale].
 * @property attempts attempts across every provider.
 * @property attemptsByProvider attempts each provider got, in the order they were first tried.
 * @property raw the provider's whole answer (JSON), for fields Harness does not normalise.
 */
data class ChatResponse(
    val content: String,
    val finishReason: String?,
    val usage: Usage?,
    val route: String,
    val provider: String?,
    val model: String?,
    val cost: Double?,
    val fallback: String?,
    val attempts: Int,
    val attemptsByProvider: List<Pair<String, Int>>,
    val traceId: String,
    val elapsedMs: Double,
    val raw: ByteArray,
) {
    /** A cached answer, served because no provider could answer now. */
    val stale: Boolean get() = fallback == "cache"

    override fun equals(other: Any?): Boolean =
        other is ChatResponse && content == other.content && finishReason == other.finishReason && usage == other.usage &&
            route == other.route && provider == other.provider && model == other.model && cost == other.cost &&
            fallback == other.fallback && attempts == other.attempts && attemptsByProvider == other.attemptsByProvider &&
            traceId == other.traceId && elapsedMs == other.elapsedMs && raw.contentEquals(other.raw)

    override fun hashCode(): Int = (content.hashCode() * 31 + traceId.hashCode()) * 31 + raw.contentHashCode()

    // The answer may hold what the user said: its size only.
    override fun toString(): String =
        "ChatResponse(route=$route, provider=$provider, model=$model, content=${content.length} chars, finishReason=$finishReason, " +
            "usage=$usage, cost=$cost, fallback=$fallback, attempts=$attempts, attemptsByProvider=$attemptsByProvider, traceId=$traceId)"
}

/** What a [ChatChunk] is. [value] is the cross-language name. */
enum class ChatChunkKind(val value: String) {
    /** More of the answer ([ChatChunk.content]). */
    DELTA("delta"),
    /** The answer so far is void: the provider failed mid-answer and a new answer, from another provider, follows. */
    RESTART("restart"),
    /** The end: [ChatChunk.finishReason], [ChatChunk.usage] and [ChatChunk.cost]. Always the last chunk. */
    DONE("done"),
    ;

    override fun toString(): String = value
}

/**
 * One piece of a streamed chat answer ([HarnessClient.chatStream]).
 *
 * @property content a [ChatChunkKind.DELTA]'s new text (empty otherwise).
 * @property provider the provider the chunk is from (for a restart: the one taking over).
 * @property reason a [ChatChunkKind.RESTART]'s reason (the error and the provider that failed).
 */
data class ChatChunk(
    val kind: ChatChunkKind,
    val content: String,
    val provider: String?,
    val model: String?,
    val finishReason: String?,
    val usage: Usage?,
    val cost: Double?,
    val reason: String?,
) {
    // The content may hold what the user said: its size only.
    override fun toString(): String =
        "ChatChunk(kind=$kind, content=${content.length} chars, provider=$provider, model=$model, finishReason=$finishReason, " +
            "usage=$usage, cost=$cost, reason=$reason)"
}

internal fun ChatRequest.toNative(): NativeChatRequest {
    if (timeoutMs != null && timeoutMs < 0) throw HarnessException.config("timeout_ms: must not be negative, got $timeoutMs")
    requireUnicode("route" to route, "traceparent" to traceparent, "request.principal" to principal)
    for ((k, v) in headers) requireUnicode("request.headers" to k, "request.headers.$k" to v)
    val headerEntries = headers.map { (k, v) -> NativeEntry(k, v) }
    return NativeChatRequest(
        route = route,
        messages = Json.encode(messages, "messages"),
        params = if (params.isEmpty()) null else Json.encode(params, "params"),
        headers = headerEntries,
        timeoutMs = timeoutMs?.toULong(),
        traceparent = HostTrace.resolve(traceparent, headerEntries),
        principal = principal,
    )
}

internal fun NativeUsage.toUsage() = Usage(promptTokens.toLong(), completionTokens.toLong(), totalTokens.toLong())

internal fun List<NativeProviderAttempts>.toPairs(): List<Pair<String, Int>> = map { it.provider to it.attempts.toInt() }

internal fun NativeChatResponse.toChatResponse() = ChatResponse(
    content = content,
    finishReason = finishReason,
    usage = usage?.toUsage(),
    route = route,
    provider = provider,
    model = model,
    cost = cost,
    fallback = fallback,
    attempts = attempts.toInt(),
    attemptsByProvider = attemptsByProvider.toPairs(),
    traceId = traceId,
    elapsedMs = elapsedMs,
    raw = raw,
)

internal fun NativeChatChunk.toChunk() = ChatChunk(
    kind = when (kind) {
        NativeChatChunkKind.DELTA -> ChatChunkKind.DELTA
        NativeChatChunkKind.RESTART -> ChatChunkKind.RESTART
        NativeChatChunkKind.DONE -> ChatChunkKind.DONE
    },
    content = content,
    provider = provider,
    model = model,
    finishReason = finishReason,
    usage = usage?.toUsage(),
    cost = cost,
    reason = reason,
)
