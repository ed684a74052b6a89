package dev.harness

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import java.io.File

/**
 * Runs every scenario of tests/vectors/scenarios.json through the Kotlin API, one JUnit test each
 * (keys: tests/README.md; routing scenarios use simulated model providers, chat and chat streams). The file is read with [OrderedJson], so a `json` body keeps its key
 * order and integers their exact value, as a caller's LinkedHashMap would.
 */
class VectorsTest {
    private val base = """{"client":{"name":"vectors"},"log":{"enabled":false},"services":{"svc":{"base_url":"{upstream}"}}}"""

    /**
     * A call's outcome: the response (or chat answer, or chat chunks) or the exception, and the
     * wall time it took. A chat stream that failed keeps the chunks it gave before.
     */
    private class Outcome(
        val response: HarnessResponse?,
        val error: HarnessException?,
        val cancelled: Boolean,
        val ms: Double,
        val chat: ChatResponse? = null,
        val chunks: List<ChatChunk>? = null,
    ) {
        val label: String get() = response?.status?.toString() ?: if (chat != null || (chunks != null && error == null)) "200" else if (cancelled) "CancelledError" else error!!.kind
        val errorKind: String? get() = if (cancelled) "CancelledError" else error?.kind
        val done: ChatChunk? get() = chunks?.lastOrNull()?.takeIf { it.kind == ChatChunkKind.DONE }
        val succeeded: Boolean get() = error == null && !cancelled && (response != null || chat != null || done != null)
    }

    @TestFactory
    fun everyScenarioVector(): List<DynamicTest> {
        val file = File(TestUpstream.repoRoot, "tests/vectors/scenarios.json")
        val scenarios = obj(OrderedJson.parse(file.readText())).list("scenarios")!!.map(::obj)
        assertTrue(scenarios.size >= 30, "expected the shared vectors, found ${scenarios.size}")
        val only = System.getenv("HARNESS_SCENARIO")
        return scenarios
            .filter { only == null || it.str("name")!!.contains(only) }
            .map { s -> DynamicTest.dynamicTest(s.str("name")) { runScenario(s) } }
    }

    private fun runScenario(scenario: Map<String, Any?>) = runBlocking {
        val name = scenario.str("name")!!
        TestUpstream.putScript(name, scenario["steps"] ?: emptyList<Any>())
        // Simulated model providers, `{name}-{id}` on the upstream (`{llm}` in the config).
        scenario.obj("providers")?.forEach { (id, spec) -> TestUpstream.putProvider("$name-$id", spec!!) }
        // The OAuth2 token endpoint `{token_url}` points at.
        scenario["token_steps"]?.let { TestUpstream.putScript("$name-token", it) }
        val config = obj(OrderedJson.parse(base)).toMutableDeep()
        scenario.obj("config")?.let { merge(config, it) }
        @Suppress("UNCHECKED_CAST")
        val configMap = substitute(config, name) as Map<String, Any?>
        val errors = mutableListOf<String>()
        scenario.str("config_error")?.let { want ->
            try {
                HarnessClient(configMap).close()
                errors += "expected a ConfigError containing \"$want\", the client was built"
            } catch (e: HarnessException.Config) {
                if (!e.message!!.contains(want)) errors += "expected a ConfigError containing \"$want\", got ${e.message}"
                scenario.str("config_error_excludes")?.let { x ->
                    if (e.message!!.contains(x) || e.toString().contains(x)) errors += "config error shows \"$x\": $e"
                }
            } catch (e: HarnessException) {
                errors += "expected a ConfigError containing \"$want\", got $e"
            }
            assertTrue(errors.isEmpty(), "$name:\n" + errors.joinToString("\n"))
            return@runBlocking
        }
        val client = HarnessClient(configMap)
        // Declarative interceptors (tests/README.md, "Interceptor scenarios"), in order.
        scenario.list("interceptors")?.forEach { client.addInterceptor(vectorInterceptor(obj(it))) }
        client.use {
            val background = mutableListOf<Triple<Int, Map<String, Any?>, kotlinx.coroutines.Deferred<Outcome>>>()
            coroutineScope {
                for ((i, call) in scenario.list("calls")!!.map(::obj).withIndex()) {
                    call.long("wait_ms")?.let { delay(it) }
                    call.obj("reload")?.let { over ->
                        // `base` merged with the object (not the scenario's config, so a service can be removed).
                        val cfg = obj(OrderedJson.parse(base)).toMutableDeep()
                        merge(cfg, over)
                        @Suppress("UNCHECKED_CAST")
                        reload(i, client, substitute(cfg, name) as Map<String, Any?>, call.obj("expect")!!, errors)
                        continue
                    }
                    call.str("routing_state")?.let { route ->
                        routingState(i, client, route, call.obj("expect")!!, errors)
                        continue
                    }
                    call.list("set_weight")?.let { args ->
                        setWeight(i, client, args, call.obj("expect")!!, errors)
                        continue
                    }
                    // A chat call (`route` and `chat`, a chat stream with `stream`), or a request.
                    val run: suspend () -> Outcome = when {
                        call.containsKey("chat") -> ({ runChat(client, call) })
                        call["stream"] == true -> {
                            val req = buildRequest(name, call)
                            ({ runStream(client, req, call.long("read_chunks")) })
                        }
                        else -> {
                            val req = buildRequest(name, call)
                            ({ runOne(client, req, call.long("cancel_after_ms")) })
                        }
                    }
                    if (call["background"] == true) {
                        background += Triple(i, call, async { run() })
                        continue
                    }
                    val parallel = call.long("parallel")
                    if (parallel != null) {
                        val outcomes = (0 until parallel).map { async { run() } }.awaitAll()
                        val counts = outcomes.groupingBy { it.label }.eachCount().toSortedMap()
                        call.obj("expect")!!.obj("outcomes")?.let { want ->
                            val wanted = want.mapValues { (_, v) -> (v as Number).toInt() }.toSortedMap()
                            if (wanted != counts) errors += "call $i: expected outcomes $wanted, got $counts"
                        }
                        checkState(i, name, call, client, errors)
                    } else {
                        check(i, name, call, client, run(), errors)
                    }
                }
                for ((i, call, d) in background) check(i, name, call, client, d.await(), errors)
            }
        }
        scenario.obj("upstream")?.let { checkUpstream(name, it, errors) }
        scenario.obj("token_upstream")?.let { checkUpstream("$name-token", it, errors, "token upstream") }
        scenario.obj("provider_upstream")?.let { checkProviders(name, it, errors) }
        assertTrue(errors.isEmpty(), "$name:\n" + errors.joinToString("\n"))
    }

    /** A scenario's declarative interceptor, built as every runner builds it (core/tests/vectors.rs, `vector_interceptor`). */
    private fun vectorInterceptor(spec: Map<String, Any?>): Interceptor {
        val level = when (spec.str("level")) {
            "attempt" -> Level.ATTEMPT
            "application" -> Level.APPLICATION
            else -> null
        }
        val before: (suspend (InterceptedRequest) -> RequestChanges?)? = spec.obj("before")?.let { b ->
            { request ->
                b.long("sleep_ms")?.let { delay(it) }
                b.str("raise")?.let { throw IllegalStateException(it) }
                val headers = LinkedHashMap<String, String?>()
                b.obj("headers")?.forEach { (k, v) -> headers[k] = v as String? }
                b.str("attempt_header")?.let { headers[it] = request.attempt?.toString() ?: "none" }
                val json = b.obj("json_set")?.let { set ->
                    val body = (request.json as? JsonObject).orEmpty().toMutableMap()
                    for ((k, v) in set) body[k] = toJson(v)
                    JsonObject(body)
                }
                val changes = RequestChanges(
                    headers = headers.ifEmpty { null },
                    query = b.obj("query")?.mapValues { (_, v) -> v?.toString() },
                    path = b.str("path"),
                    json = json,
                )
                changes.takeIf { it != RequestChanges() }
            }
        }
        val after: (suspend (InterceptedResponse) -> Unit)? = spec.obj("after")?.let { a ->
            { response ->
                a.str("raise")?.let { throw IllegalStateException(it) }
                val want = a["reject_when_json"]
                if (want != null && contains(response.json, toJson(want))) {
                    throw Reject("rejected by the vector", retryable = a["retryable"] == true, code = a.str("code"))
                }
            }
        }
        @Suppress("UNCHECKED_CAST")
        val services = spec.list("services") as List<String>? ?: emptyList()
        return interceptor(spec.str("name")!!, level, services, spec["want_body"] == true, before, after)
    }

    /** A value of the scenario file as kotlinx JSON. */
    private fun toJson(v: Any?): JsonElement = ViewJson.json.parseToJsonElement(Json.encode(v, "json"))

    /** Whether [have] has every field of [want] (objects recursively, anything else equal). */
    private fun contains(have: JsonElement?, want: JsonElement): Boolean = when {
        have is JsonObject && want is JsonObject -> want.all { (k, v) -> contains(have[k], v) }
        else -> have == want
    }

    private fun reload(i: Int, client: HarnessClient, config: Map<String, Any?>, exp: Map<String, Any?>, errors: MutableList<String>) {
        val before = client.configVersion
        val want = exp.str("error")
        try {
            val version = client.reload(config)
            if (want != null) errors += "call $i: reload expected $want, it succeeded"
            if (version != client.configVersion) errors += "call $i: reload returned $version, configVersion is ${client.configVersion}"
        } catch (e: HarnessException) {
            if (want == null) errors += "call $i: reload expected to succeed, got $e"
            if (want != null && e.kind != want) errors += "call $i: reload expected $want, got $e"
            exp.str("message")?.let { if (!e.message!!.contains(it)) errors += "call $i: reload error ${e.message} lacks \"$it\"" }
            if (client.configVersion != before) errors += "call $i: a failed reload changed the config version"
        }
    }

    /** A streamed call: the body read chunk by chunk (all of it, or `read_chunks` and then stop), folded into a response. */
    private suspend fun runStream(client: HarnessClient, req: HarnessRequest, readChunks: Long?): Outcome {
        val start = System.nanoTime()
        fun ms() = (System.nanoTime() - start) / 1e6
        return try {
            val s = client.stream(req)
            val body = java.io.ByteArrayOutputStream()
            // Stopping early is `take`: the collection ends and the stream is cancelled in the engine.
            val chunks = if (readChunks == null) s.body else s.body.take(readChunks.toInt())
            chunks.collect { body.write(it) }
            Outcome(HarnessResponse(s.status, s.headers, body.toByteArray(), ms(), s.attempts, s.traceId), null, false, ms())
        } catch (e: HarnessException) {
            Outcome(null, e, false, ms())
        }
    }

    /** A chat call: `chat.messages` and `chat.params` on `route`; with `stream`, the chat stream read to its end. */
    private suspend fun runChat(client: HarnessClient, call: Map<String, Any?>): Outcome {
        val chat = call.obj("chat")!!
        @Suppress("UNCHECKED_CAST")
        val request = ChatRequest(
            route = call.str("route")!!,
            messages = chat.list("messages")!! as List<Map<String, Any?>>,
            params = chat.obj("params") ?: emptyMap(),
            headers = call.obj("headers")?.mapValues { (_, v) -> v as String } ?: emptyMap(),
            timeoutMs = call.long("timeout_ms"),
            traceparent = call.str("traceparent"),
        )
        val start = System.nanoTime()
        fun ms() = (System.nanoTime() - start) / 1e6
        if (call["stream"] != true) {
            return try {
                // The answer first: arguments run in order, and the elapsed time must include the call.
                val answer = client.chat(request)
                Outcome(null, null, false, ms(), chat = answer)
            } catch (e: HarnessException) {
                Outcome(null, e, false, ms())
            }
        }
        val chunks = mutableListOf<ChatChunk>()
        return try {
            client.chatStream(request).collect { chunks += it }
            Outcome(null, null, false, ms(), chunks = chunks)
        } catch (e: HarnessException) {
            Outcome(null, e, false, ms(), chunks = chunks)
        }
    }

    private fun routingState(i: Int, client: HarnessClient, route: String, exp: Map<String, Any?>, errors: MutableList<String>) {
        fun fail(what: String) { errors += "call $i: routing_state($route): $what" }
        val state = try {
            client.routingState(route)
        } catch (e: HarnessException) {
            if (exp.str("error") != e.kind) fail("expected ${exp.str("error") ?: "a state"}, got $e")
            exp.str("message")?.let { if (!e.message!!.contains(it)) fail("error ${e.message} lacks \"$it\"") }
            return
        }
        exp.str("error")?.let { fail("expected $it, got $state") }
        exp.str("strategy")?.let { if (state.strategy != it) fail("expected strategy $it, got ${state.strategy}") }
        exp.obj("providers")?.forEach { (id, want) ->
            val p = state.provider(id)
            if (p == null) {
                fail("no provider $id in ${state.providers.map { it.id }}")
                return@forEach
            }
            // The provider as the core's `RouteState::to_value()` names its fields.
            val got = mapOf(
                "id" to p.id, "service" to p.service, "model" to p.model, "weight" to p.weight,
                "effective_weight" to p.effectiveWeight, "health" to p.health, "success_rate" to p.successRate,
                "latency_ewma_ms" to p.latencyEwmaMs, "breaker" to p.breaker, "in_flight" to p.inFlight,
                "cooling_ms" to p.coolingMs, "last_error" to p.lastError,
            )
            for ((k, v) in obj(want)) {
                when (k) {
                    "last_error_contains" -> if (p.lastError?.contains(v as String) != true) fail("$id: last_error ${p.lastError} lacks \"$v\"")
                    else -> if (k !in got) fail("$id: unknown field $k") else if (!jsonEquals(got[k], v)) fail("$id: expected $k $v, got ${got[k]}")
                }
            }
        }
    }

    private fun setWeight(i: Int, client: HarnessClient, args: List<Any?>, exp: Map<String, Any?>, errors: MutableList<String>) {
        val (route, provider, weight) = Triple(args[0] as String, args[1] as String, (args[2] as Number).toInt())
        val before = client.configVersion
        val want = exp.str("error")
        try {
            val version = client.setWeight(route, provider, weight)
            if (want != null) errors += "call $i: set_weight expected $want, it succeeded"
            if (version != client.configVersion) errors += "call $i: set_weight returned $version, configVersion is ${client.configVersion}"
        } catch (e: HarnessException) {
            if (want == null) errors += "call $i: set_weight expected to succeed, got $e"
            if (want != null && e.kind != want) errors += "call $i: set_weight expected $want, got $e"
            exp.str("message")?.let { if (!e.message!!.contains(it)) errors += "call $i: set_weight error ${e.message} lacks \"$it\"" }
            if (client.configVersion != before) errors += "call $i: a failed set_weight changed the config version"
        }
    }

    private suspend fun runOne(client: HarnessClient, req: HarnessRequest, cancelAfterMs: Long?): Outcome {
        val start = System.nanoTime()
        fun ms() = (System.nanoTime() - start) / 1e6
        return try {
            if (cancelAfterMs == null) {
                Outcome(client.request(req), null, false, ms())
            } else {
                // The coroutine cancel: withTimeoutOrNull cancels the call, which drops the Rust future.
                val r = withTimeoutOrNull(cancelAfterMs) { client.request(req) }
                Outcome(r, null, r == null, ms())
            }
        } catch (e: HarnessException) {
            Outcome(null, e, false, ms())
        }
    }

    private fun buildRequest(scenario: String, call: Map<String, Any?>): HarnessRequest {
        // `headers` is {name: value}, or [[name, value], ...] when a name repeats.
        val headers = call.obj("headers")?.mapValues { (_, v) -> v as String } ?: emptyMap()
        val headerList = call.list("headers")?.map { p -> (p as List<*>).let { it[0] as String to it[1] as String } } ?: emptyList()
        val json: Any? = when {
            call.containsKey("json_depth") -> {
                // N nested lists around 0, built without recursion.
                var v: Any = 0L
                repeat(call.long("json_depth")!!.toInt()) { v = listOf(v) }
                v
            }
            else -> call["json"]
        }
        // A call naming a `route` sends to the route as it would to a service; its path is the provider's.
        val route = call.str("route")
        return HarnessRequest(
            service = route ?: call.str("service") ?: "svc",
            method = call.str("method")!!,
            path = if (route != null) call.str("path")!! else "/s/$scenario" + call.str("path"),
            endpoint = call.str("endpoint"),
            headers = headers,
            json = json,
            body = if (json == null) call.str("body")?.toByteArray() else null,
            idempotencyKey = call.str("idempotency_key"),
            timeoutMs = call.long("timeout_ms"),
            traceparent = call.str("traceparent"),
            headerList = headerList,
        )
    }

    private suspend fun check(i: Int, name: String, call: Map<String, Any?>, client: HarnessClient, o: Outcome, errors: MutableList<String>) {
        val exp = call.obj("expect")!!
        fun fail(what: String) { errors += "call $i: $what" }
        val e = o.error
        exp.long("status")?.let { if (o.response?.status?.toLong() != it) fail("expected status $it, got ${o.response?.status ?: o.label} ${e?.message ?: ""}") }
        exp.str("error")?.let { if (o.errorKind != it) fail("expected $it, got ${o.response?.status ?: e?.message}") }
        if (e != null && o.errorKind != null && !o.cancelled) {
            // The class must agree with the kind name.
            if (HarnessException.of(HarnessErrorInfo(e.kind, ""))::class != e::class) fail("class ${e::class.simpleName} for kind ${e.kind}")
        }
        exp.str("phase")?.let { if (e?.phase != it) fail("expected phase $it, got ${e?.phase}") }
        exp.long("error_status")?.let { if (e?.status?.toLong() != it) fail("expected error status $it, got ${e?.status}") }
        exp.str("code")?.let { if (e?.code != it) fail("expected code $it, got ${e?.code}") }
        exp.str("message")?.let { if (e?.message?.contains(it) != true) fail("expected message containing $it, got ${e?.message}") }
        exp.str("message_excludes")?.let {
            if (e == null || e.message!!.contains(it) || e.toString().contains(it)) fail("expected an error whose message excludes ${it.quoted()}, got $e")
        }
        exp.long("message_max_chars")?.let { n ->
            // The engine's message (what the engine caps); `message` adds the kind and the context.
            val len = e?.reason?.let { it.codePointCount(0, it.length) }
            if (len == null || len > n) fail("expected a message of at most $n characters, got $len: ${e?.reason}")
        }
        exp.str("body")?.let { if (o.response?.text() != it) fail("expected body ${it.quoted()}, got ${o.response?.text()?.quoted()}") }
        exp.long("error_body_len")?.let { n -> if (e?.body?.size?.toLong() != n) fail("expected an error body of $n bytes, got ${e?.body?.size}") }
        exp.obj("headers")?.let { want ->
            for ((k, v) in want) {
                val got = o.response?.headers?.values(k) ?: emptyList()
                if (got != v) fail("response header $k: expected $v, got $got")
            }
        }
        exp.long("retry_after_ms")?.let { if (e?.retryAfterMs != it) fail("expected retry_after_ms $it, got ${e?.retryAfterMs}") }
        exp.str("trace_id")?.let { if (o.response?.traceId != it) fail("expected trace id $it, got ${o.response?.traceId}") }
        exp.long("attempts")?.let {
            val got = o.response?.attempts ?: o.chat?.attempts ?: e?.attempts
            if (got?.toLong() != it) fail("expected $it attempts, got $got (${e?.message})")
        }
        exp.double("min_ms")?.let { if (o.ms < it) fail("took ${"%.1f".format(o.ms)} ms, expected at least $it") }
        exp.double("max_ms")?.let { if (o.ms > it) fail("took ${"%.1f".format(o.ms)} ms, expected at most $it") }
        checkRouted(exp, o, ::fail)
        if (call["stream"] != true) checkCache(exp, o, ::fail)
        checkState(i, name, call, client, errors)
    }

    /** `from_cache` and `cache` (the stamp's outcome, or null) on a response or a chat answer. */
    private fun checkCache(exp: Map<String, Any?>, o: Outcome, fail: (String) -> Unit) {
        if (!exp.containsKey("from_cache") && !exp.containsKey("cache")) return
        val (fromCache, stamp) = o.response?.let { it.fromCache to it.cache } ?: o.chat?.let { it.fromCache to it.cache }
            ?: return fail("expected from_cache/cache, got ${o.errorKind}: ${o.error?.message}")
        if (exp.containsKey("from_cache") && fromCache != exp["from_cache"]) fail("expected from_cache ${exp["from_cache"]}, got $fromCache (cache $stamp)")
        if (exp.containsKey("cache") && stamp?.outcome != exp["cache"]) fail("expected cache ${exp["cache"]}, got ${stamp?.outcome}")
    }

    /**
     * The routing `expect` keys (tests/README.md, "Routing scenarios"): who answered and how, from
     * a routed response, a chat answer or a chat stream's `done` chunk.
     */
    private fun checkRouted(exp: Map<String, Any?>, o: Outcome, fail: (String) -> Unit) {
        val r = o.response
        val c = o.chat
        val done = o.done
        val e = o.error
        fun answered(key: String): Boolean {
            if (!o.succeeded) fail("expected $key ${exp[key]}, got ${o.errorKind}: ${e?.message}")
            return o.succeeded
        }
        if (exp.containsKey("provider") && answered("provider")) {
            val got = r?.provider ?: c?.provider ?: done?.provider
            if (got != exp["provider"]) fail("expected provider ${exp["provider"]}, got $got")
        }
        if (exp.containsKey("model") && answered("model")) {
            val got = r?.model ?: c?.model ?: done?.model
            if (got != exp["model"]) fail("expected model ${exp["model"]}, got $got")
        }
        if (exp.containsKey("content") && answered("content")) {
            // A stream's answer is the deltas after its last restart.
            val got = c?.content ?: o.chunks?.let { all ->
                all.drop(all.indexOfLast { it.kind == ChatChunkKind.RESTART } + 1).filter { it.kind == ChatChunkKind.DELTA }.joinToString("") { it.content }
            } ?: r?.text()
            if (got != exp["content"]) fail("expected content ${(exp["content"] as String).quoted()}, got ${got?.quoted()}")
        }
        if (exp.containsKey("fallback") && answered("fallback")) {
            val got = r?.fallback ?: c?.fallback
            if (got != exp["fallback"]) fail("expected fallback ${exp["fallback"]}, got $got")
        }
        if (exp.containsKey("finish_reason") && answered("finish_reason")) {
            val got = c?.finishReason ?: done?.finishReason
            if (got != exp["finish_reason"]) fail("expected finish_reason ${exp["finish_reason"]}, got $got")
        }
        if (exp.containsKey("tool_calls") && answered("tool_calls")) {
            val calls = c?.toolCalls ?: done?.toolCalls
            val got = calls?.map { mapOf("id" to it.id, "name" to it.name, "arguments" to it.arguments) }
            if (got == null || !jsonEquals(got, exp["tool_calls"])) fail("expected tool_calls ${exp["tool_calls"]}, got $got")
        }
        exp.obj("usage")?.let { want ->
            if (!answered("usage")) return@let
            val u = r?.usage ?: c?.usage ?: done?.usage
            val got = u?.let { mapOf("prompt_tokens" to it.promptTokens, "completion_tokens" to it.completionTokens, "total_tokens" to it.totalTokens, "cached_tokens" to it.cachedTokens) }
            for ((k, v) in want) if (got == null || !jsonEquals(got[k], v)) fail("expected usage.$k $v, got ${got?.get(k)} ($u)")
        }
        if (exp.containsKey("cost") && answered("cost")) {
            val got = r?.cost ?: c?.cost ?: done?.cost
            val want = (exp["cost"] as Number?)?.toDouble()
            if ((got == null) != (want == null) || (got != null && Math.abs(got - want!!) > 1e-9)) fail("expected cost $want, got $got")
        }
        exp.list("attempts_by_provider")?.let { want ->
            if (!answered("attempts_by_provider")) return@let
            val got = (r?.attemptsByProvider ?: c?.attemptsByProvider ?: emptyList()).map { listOf(it.first, it.second.toLong()) }
            if (!jsonEquals(got, want)) fail("expected attempts_by_provider $want, got $got")
        }
        exp.list("provider_errors")?.let { want ->
            val got = e?.providerErrors?.map { it.first }
            if (got != want) fail("expected provider_errors for $want, got ${e?.providerErrors ?: o.label}")
        }
        if (exp.containsKey("error_provider")) {
            if (e?.provider != exp["error_provider"]) fail("expected the error's provider ${exp["error_provider"]}, got ${e?.provider} ($e)")
        }
        exp.list("chunk_kinds")?.let { want ->
            val kinds = mutableListOf<String>()
            for (k in o.chunks.orEmpty().map { it.kind.value }) if (!((k == "delta" || k == "tool_call") && kinds.lastOrNull() == k)) kinds += k
            if (kinds != want) fail("expected chunk kinds $want, got $kinds")
        }
    }

    /** `provider_upstream`: each simulated provider's log, `{name}-{id}` on the upstream. */
    private fun checkProviders(name: String, exp: Map<String, Any?>, errors: MutableList<String>) {
        for ((id, w) in exp) {
            val want = obj(w)
            fun fail(what: String) { errors += "provider $id: $what" }
            val log = obj(OrderedJson.parse(TestUpstream.providerLogText("$name-$id")))
            val requests = log.list("requests")!!.map(::obj)
            want.long("requests")?.let { if (log.long("count") != it) fail("expected $it requests, got ${log.long("count")}") }
            val first = requests.firstOrNull()?.obj("body")
            want.obj("first_body")?.let { fields ->
                if (first == null) return@let fail("no request to check first_body against")
                for ((k, v) in fields) if (!jsonEquals(first[k], v)) fail("first request's $k: expected $v, got ${first[k]}")
            }
            want.obj("first_last_message")?.let { m ->
                val last = first?.list("messages")?.lastOrNull()
                if (!jsonEquals(last, m)) fail("first request's last message: expected $m, got $last")
            }
        }
    }

    /** JSON equality: numbers by value (1 == 1.0), objects regardless of key order. */
    private fun jsonEquals(a: Any?, b: Any?): Boolean = when {
        a is Number && b is Number -> java.math.BigDecimal(a.toString()).compareTo(java.math.BigDecimal(b.toString())) == 0
        a is Map<*, *> && b is Map<*, *> -> a.keys == b.keys && a.keys.all { jsonEquals(a[it], b[it]) }
        a is List<*> && b is List<*> -> a.size == b.size && a.indices.all { jsonEquals(a[it], b[it]) }
        else -> a == b
    }

    private suspend fun checkState(i: Int, name: String, call: Map<String, Any?>, client: HarnessClient, errors: MutableList<String>) {
        val exp = call.obj("expect")!!
        val service = call.str("service") ?: "svc"
        exp.str("breaker")?.let { want ->
            val got = client.breakerState(service, call.str("method")!!, "/s/$name" + call.str("path"), call.str("endpoint"))
            if (got != want) errors += "call $i: expected breaker $want, got $got"
        }
        exp.obj("rate_limit")?.let { want ->
            val every = client.rateLimits()
            val got = every.firstOrNull { it.service == service }
            for ((k, w) in want) {
                val value: Any? = when (k) {
                    "paused" -> got?.let { it.pausedMs > 0 }
                    "refused" -> got?.refused
                    "waited" -> got?.waited
                    else -> "unknown key"
                }
                if (!jsonEquals(value, w)) errors += "call $i: expected rate limit $k $w, got $value (of $every)"
            }
        }
        exp.long("bulkhead_in_use")?.let { l ->
            // A cancel frees its permits asynchronously (the task is aborted on the engine's runtime).
            val want = l.toInt()
            val deadline = System.nanoTime() + 1_000_000_000L
            var got = client.bulkheadInUse(service)
            while (got != want && System.nanoTime() < deadline) {
                delay(5)
                got = client.bulkheadInUse(service)
            }
            if (got != want) errors += "call $i: expected $want bulkhead permits in use, got $got"
        }
    }

    private fun checkUpstream(name: String, exp: Map<String, Any?>, errors: MutableList<String>, label: String = "upstream") {
        val list = obj(OrderedJson.parse(TestUpstream.logText(name))).list("requests")!!.map(::obj)
        fun fail(what: String) { errors += "$label: $what" }
        exp.long("requests")?.let { if (list.size.toLong() != it) fail("expected $it requests, got ${list.size}") }
        exp.list("methods")?.let { want ->
            val got = list.map { it["method"] }
            if (want != got) fail("expected methods $want, got $got")
        }
        exp.list("bodies")?.let { want ->
            val got = list.map { it["body"] }
            if (want != got) fail("expected bodies $want, got $got")
        }
        for (r in list) {
            val headers = r.obj("headers")!!
            exp.list("headers_present")?.forEach { h -> if (!headers.containsKey(h)) fail("header $h missing") }
            exp.list("header_absent")?.forEach { h -> if (headers.containsKey(h)) fail("header $h should be absent") }
            exp.obj("header_equals")?.forEach { (k, v) -> if (headers[k] != v) fail("header $k: expected $v, got ${headers[k]}") }
            exp.obj("header_prefix")?.forEach { (k, v) ->
                if (!(headers[k] as? String ?: "").startsWith(v as String)) fail("header $k: expected prefix $v, got ${headers[k]}")
            }
            exp.obj("header_values")?.forEach { (k, want) ->
                // Every value of a repeated name, in the order received.
                val got = r.list("header_list")!!.map { it as List<*> }.filter { it[0] == k }.map { it[1] }
                if (got != want) fail("header $k: expected values $want, got $got")
            }
        }
        exp.obj("header_sequence")?.forEach { (k, want) ->
            // That header's value on each request in order, null when absent.
            val got = list.map { it.obj("headers")!![k] }
            if (got != want) fail("header $k by request: expected $want, got $got")
        }
        exp.double("min_gap_ms")?.let { gap ->
            list.zipWithNext { a, b ->
                val d = a.double("at_ms")!!.let { b.double("at_ms")!! - it }
                if (d < gap) fail("requests ${"%.1f".format(d)} ms apart, expected at least $gap")
            }
        }
    }

    @Suppress("UNCHECKED_CAST")
    private fun merge(base: MutableMap<String, Any?>, over: Map<String, Any?>) {
        for ((k, v) in over) {
            val b = base[k]
            if (v is Map<*, *> && b is MutableMap<*, *>) merge(b as MutableMap<String, Any?>, v as Map<String, Any?>) else base[k] = v
        }
    }

    @Suppress("UNCHECKED_CAST")
    private fun Map<String, Any?>.toMutableDeep(): MutableMap<String, Any?> =
        mapValuesTo(LinkedHashMap()) { (_, v) -> if (v is Map<*, *>) (v as Map<String, Any?>).toMutableDeep() else v }

    /** `{token_url}` and `{llm}` first (they hold `{upstream}` and `{name}`), then the upstream's addresses and `{name}`. */
    private fun substitute(v: Any?, name: String): Any? = when (v) {
        is String -> v.replace("{token_url}", "{upstream}/s/{name}-token/oauth/token").replace("{llm}", "{upstream}/llm/{name}-")
            .replace("{upstream}", TestUpstream.url).replace("{blackhole}", TestUpstream.blackholeUrl).replace("{closed}", TestUpstream.closedUrl)
            .replace("{vectors}", File(TestUpstream.repoRoot, "tests/vectors").path)
            .replace("{name}", name)
        is Map<*, *> -> v.entries.associateTo(LinkedHashMap()) { (k, x) -> k as String to substitute(x, name) }
        is List<*> -> v.map { substitute(it, name) }
        else -> v
    }

    private fun String.quoted() = "\"" + replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "\""

    @Suppress("UNCHECKED_CAST")
    private fun obj(v: Any?): Map<String, Any?> = v as Map<String, Any?>
    @Suppress("UNCHECKED_CAST")
    private fun Map<String, Any?>.obj(k: String): Map<String, Any?>? = this[k] as? Map<String, Any?>
    private fun Map<String, Any?>.list(k: String): List<Any?>? = this[k] as? List<Any?>
    private fun Map<String, Any?>.str(k: String): String? = this[k] as? String
    private fun Map<String, Any?>.long(k: String): Long? = (this[k] as? Number)?.toLong()
    private fun Map<String, Any?>.double(k: String): Double? = (this[k] as? Number)?.toDouble()
}
