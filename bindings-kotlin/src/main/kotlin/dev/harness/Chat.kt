package dev.harness


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

/** The chat call as the engine reads it ([RequestPath.chat]): the route, then the call as the core's `ChatRequest` JSON. */
internal fun ChatRequest.encode(): java.nio.ByteBuffer {
    requireUnicode("route" to route)
    val call = Json.Head(512)
        .json("messages", Json.encode(messages, "messages"))
        .json("params", if (params.isEmpty()) null else Json.encode(params, "params"))
        .pairs("headers", headers).long("timeout_ms", timeoutMs)
        .string("traceparent", HostTrace.resolve(traceparent, headers), "traceparent").string("principal", principal)
        .bytes()
    return RequestPath.chat(route.toByteArray(Charsets.UTF_8), call)
}

