package dev.harness

import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.ConcurrentLinkedQueue

/**
 * Routes over the test upstream's simulated OpenAI-compatible providers (tests/README.md,
 * "Routing scenarios"): each provider `id` of a test is the upstream's provider `<test>-<id>`,
 * reached through a service of the same id.
 */
class RoutingTest {
    private val hi = listOf(mapOf("role" to "user", "content" to "Say hello"))

    /**
     * A client with route `chat` over [providers] (id to its route entry: model `<id>-model` and
     * weight 100 unless given), priority order unless [route] says otherwise.
     */
    private fun client(
        test: String,
        providers: List<Pair<String, Map<String, Any?>>>,
        route: Map<String, Any?> = emptyMap(),
        service: (String) -> Map<String, Any?> = { emptyMap() },
    ): HarnessClient = HarnessClient(
        mapOf(
            "client" to mapOf("name" to "kotlin-routing"),
            "log" to mapOf("enabled" to false),
            "services" to providers.associate { (id, _) ->
                id to mapOf("base_url" to TestUpstream.llm("$test-$id"), "timeouts" to mapOf("request_ms" to 10_000)) + service(id)
            },
            "routes" to mapOf(
                "chat" to mapOf(
                    "adapter" to "openai-compatible",
                    "strategy" to "priority",
                    "providers" to providers.map { (id, p) -> mapOf("id" to id, "service" to id, "model" to "$id-model", "weight" to 100) + p },
                ) + route,
            ),
        ),
    )

    private fun provider(test: String, id: String, vararg spec: Pair<String, Any?>) =
        TestUpstream.putProvider("$test-$id", mapOf("reset" to true, *spec))

    @Test
    fun `a chat answer says who answered, with usage and cost`() = runBlocking<Unit> {
        provider("kt_chat", "primary", "prompt_tokens" to 10, "completion_tokens" to 5)
        val price = mapOf("input_per_1k" to 1.0, "output_per_1k" to 2.0)
        client("kt_chat", listOf("primary" to mapOf("model" to "model-a", "price" to price))).use { h ->
            val r = h.chat("chat", hi, params = mapOf("temperature" to 0.2, "max_tokens" to 50))
            assertEquals("Hello from kt_chat-primary", r.content)
            assertEquals("primary", r.provider)
            assertEquals("model-a", r.model)
            assertEquals("stop", r.finishReason)
            assertEquals(Usage(10, 5, 15, 0, 0), r.usage)
            assertEquals(0.02, r.cost!!, 1e-12)
            assertEquals("chat", r.route)
            assertNull(r.fallback)
            assertFalse(r.stale)
            assertEquals(1, r.attempts)
            assertEquals(listOf("primary" to 1), r.attemptsByProvider)
            assertEquals(32, r.traceId.length)
            assertTrue(String(r.raw).contains("chat.completion"))
            assertFalse(r.toString().contains("Hello"), "toString prints the answer's size, not the answer: $r")

            val sent = TestUpstream.providerLog("kt_chat-primary").getJSONArray("requests").getJSONObject(0).getJSONObject("body")
            assertEquals("model-a", sent.getString("model"))
            assertEquals(0.2, sent.getDouble("temperature"))
            assertEquals("Say hello", sent.getJSONArray("messages").getJSONObject(0).getString("content"))

            // A plain request naming the route is routed too, and says so.
            val plain = h.post("chat", "/v1/chat/completions", json = mapOf("messages" to hi))
            assertEquals(200, plain.status)
            assertEquals("chat", plain.route)
            assertEquals("primary", plain.provider)
            assertEquals("model-a", plain.model)
            assertEquals(Usage(10, 5, 15, 0, 0), plain.usage)
            assertEquals(0.02, plain.cost!!, 1e-12)
            assertEquals(listOf("primary" to 1), plain.attemptsByProvider)
        }
    }

    @Test
    fun `a response from a plain service has no routing fields`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_unrouted", listOf(mapOf("status" to 200)))
        HarnessClient(mapOf("log" to mapOf("enabled" to false), "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url)))).use { h ->
            val r = h.get("svc", "/s/kt_unrouted/x")
            assertNull(r.route)
            assertNull(r.provider)
            assertNull(r.usage)
            assertNull(r.cost)
            assertTrue(r.attemptsByProvider.isEmpty())
            assertFalse(r.stale)
        }
    }

    @Test
    fun `a chat stream gives the deltas, then done with usage and cost`() = runBlocking<Unit> {
        provider("kt_stream", "primary", "content" to "one two three four", "prompt_tokens" to 7)
        val price = mapOf("input_per_1k" to 1.0, "output_per_1k" to 1.0)
        client("kt_stream", listOf("primary" to mapOf("model" to "model-s", "price" to price))).use { h ->
            val chunks = h.chatStream("chat", hi).toList()
            val deltas = chunks.filter { it.kind == ChatChunkKind.DELTA }
            assertEquals("one two three four", deltas.joinToString("") { it.content })
            assertTrue(deltas.size >= 2, "streamed in pieces: $chunks")
            assertTrue(deltas.all { it.provider == "primary" })
            val done = chunks.last()
            assertEquals(ChatChunkKind.DONE, done.kind)
            assertEquals("done", done.kind.value)
            assertEquals("stop", done.finishReason)
            assertEquals("primary", done.provider)
            assertEquals("model-s", done.model)
            assertEquals(Usage(7, 4, 11, 0, 0), done.usage)
            assertEquals(0.011, done.cost!!, 1e-12)
            assertEquals(1, chunks.count { it.kind == ChatChunkKind.DONE })
            assertTrue(TestUpstream.providerLog("kt_stream-primary").getJSONArray("requests").getJSONObject(0).getBoolean("stream"))

            // Opened by hand: the route and trace are known before the first chunk.
            h.openChatStream(ChatRequest("chat", hi)).use { s ->
                assertEquals("chat", s.route)
                assertEquals(32, s.traceId.length)
                assertEquals("one two three four", s.chunks.toList().joinToString("") { it.content })
                assertThrows<IllegalStateException> { s.read() }
            }
        }
    }

    @Test
    fun `a stream cut mid-answer restarts on the backup with a restart chunk`() = runBlocking<Unit> {
        provider("kt_restart", "primary", "content" to "alpha beta gamma delta", "stream" to mapOf("cut_after" to 2))
        provider("kt_restart", "backup", "content" to "the backup answer")
        client("kt_restart", listOf("primary" to emptyMap(), "backup" to emptyMap()), route = mapOf("stream" to mapOf("mid_stream" to "restart"))).use { h ->
            val events = ConcurrentLinkedQueue<HarnessEvent>()
            h.addListener { events += it }
            val chunks = h.chatStream("chat", hi).toList()
            val kinds = chunks.map { it.kind }
            val restart = kinds.indexOf(ChatChunkKind.RESTART)
            assertTrue(restart > 0, "a restart after the first deltas: $kinds")
            assertEquals("alpha beta", chunks.take(restart).joinToString("") { it.content })
            assertEquals("backup", chunks[restart].provider)
            assertEquals("backup-model", chunks[restart].model)
            assertNotNull(chunks[restart].reason)
            val after = chunks.drop(restart + 1)
            assertEquals("the backup answer", after.filter { it.kind == ChatChunkKind.DELTA }.joinToString("") { it.content })
            assertEquals(ChatChunkKind.DONE, after.last().kind)
            assertEquals("backup", after.last().provider)
            h.flush()
            val restarted = events.filterIsInstance<HarnessEvent.StreamRestarted>().single()
            assertEquals("primary" to "backup", restarted.from to restarted.to)
            assertEquals("restart", restarted.mode)
            assertEquals("stream_restarted", restarted.fields()["type"])
        }
    }

    @Test
    fun `by default a stream cut while held restarts unseen, giving only the backup's answer`() = runBlocking<Unit> {
        provider("kt_hold", "primary", "content" to "alpha beta gamma delta", "stream" to mapOf("cut_after" to 2))
        provider("kt_hold", "backup", "content" to "the backup answer")
        client("kt_hold", listOf("primary" to emptyMap(), "backup" to emptyMap())).use { h ->
            val chunks = h.chatStream("chat", hi).toList()
            assertTrue(chunks.none { it.kind == ChatChunkKind.RESTART }, "$chunks")
            assertEquals("the backup answer", chunks.filter { it.kind == ChatChunkKind.DELTA }.joinToString("") { it.content })
            assertEquals("backup", chunks.last().provider)
        }
    }

    @Test
    fun `a failing provider fails over, with an event and the routed request record`() = runBlocking<Unit> {
        provider("kt_failover", "primary", "fail_rate" to 1.0, "fail_status" to 503, "error_code" to "overloaded")
        provider("kt_failover", "backup", "prompt_tokens" to 1, "completion_tokens" to 1)
        val price = mapOf("input_per_1k" to 1.0, "output_per_1k" to 1.0)
        client(
            "kt_failover",
            listOf("primary" to emptyMap(), "backup" to mapOf("model" to "model-b", "price" to price)),
            route = mapOf("same_provider_retries" to 0),
        ).use { h ->
            val events = ConcurrentLinkedQueue<HarnessEvent>()
            h.addListener { events += it }
            val r = h.chat("chat", hi)
            assertEquals("backup", r.provider)
            assertEquals(listOf("primary" to 1, "backup" to 1), r.attemptsByProvider)
            assertEquals(2, r.attempts)
            h.flush()
            val f = events.filterIsInstance<HarnessEvent.ProviderFailover>().single()
            assertEquals(listOf("chat", "primary", "backup", "HttpStatusError", 503, "overloaded"), listOf(f.route, f.from, f.to, f.reason, f.status, f.code))
            assertEquals(r.traceId, f.traceId)
            val done = events.filterIsInstance<HarnessEvent.RequestFinished>().single()
            assertEquals("chat", done.route)
            assertEquals("backup", done.provider)
            assertEquals("model-b", done.model)
            assertEquals(0.002, done.cost!!, 1e-12)
            assertNull(done.fallback)
            assertEquals("backup", done.fields()["provider"])
            assertFalse(done.fields().containsKey("fallback"), "null routing fields are left out, as in the log line")

            val state = h.routingState("chat")
            assertTrue(state.provider("primary")!!.lastError!!.contains("HttpStatusError"), "${state.provider("primary")}")
        }
    }

    @Test
    fun `a malformed chunk is skipped and a static fallback is served, each with its event`() = runBlocking<Unit> {
        provider("kt_degrade", "primary", "content" to "fine words here", "stream" to mapOf("malformed_at" to 1))
        client("kt_degrade", listOf("primary" to emptyMap())).use { h ->
            val events = ConcurrentLinkedQueue<HarnessEvent>()
            h.addListener { events += it }
            val chunks = h.chatStream("chat", hi).toList()
            assertEquals("fine words here", chunks.filter { it.kind == ChatChunkKind.DELTA }.joinToString("") { it.content })
            h.flush()
            val skipped = events.filterIsInstance<HarnessEvent.StreamChunkSkipped>().single()
            assertEquals("chat" to "primary", skipped.route to skipped.provider)
            assertEquals("stream_chunk_skipped", skipped.type)
        }
        provider("kt_degrade", "primary", "fail_rate" to 1.0, "fail_status" to 503)
        client(
            "kt_degrade",
            listOf("primary" to emptyMap()),
            route = mapOf("criticality" to "non-core", "same_provider_retries" to 0, "fallback" to mapOf("static" to "Busy, try later.")),
        ).use { h ->
            val events = ConcurrentLinkedQueue<HarnessEvent>()
            h.addListener { events += it }
            val r = h.chat("chat", hi)
            assertEquals("Busy, try later.", r.content)
            assertEquals("static", r.fallback)
            assertNull(r.provider)
            assertFalse(r.stale)
            h.flush()
            val served = events.filterIsInstance<HarnessEvent.FallbackServed>().single()
            assertEquals("static", served.kind)
            assertEquals(r.traceId, served.traceId)
            assertEquals("static", events.filterIsInstance<HarnessEvent.RequestFinished>().single().fallback)
        }
    }

    @Test
    fun `routing state shows each provider and setWeight changes one`() = runBlocking<Unit> {
        provider("kt_state", "a")
        provider("kt_state", "b")
        client("kt_state", listOf("a" to mapOf("model" to "m-a"), "b" to mapOf("weight" to 30)), route = mapOf("strategy" to "weighted-health")).use { h ->
            val events = ConcurrentLinkedQueue<HarnessEvent>()
            h.addListener { events += it }
            val s = h.routingState("chat")
            assertEquals("chat", s.route)
            assertEquals("weighted-health", s.strategy)
            assertEquals(listOf("a", "b"), s.providers.map { it.id })
            val a = s.provider("a")!!
            assertEquals("a", a.service)
            assertEquals("m-a", a.model)
            assertEquals(100, a.weight)
            assertEquals(30, s.provider("b")!!.weight)
            assertEquals("closed", a.breaker)
            assertEquals(0, a.inFlight)
            assertEquals(1.0, a.health)
            assertNull(a.coolingMs)
            assertNull(a.lastError)
            assertNull(s.provider("nope"))

            val before = h.configVersion
            val version = h.setWeight("chat", "b", 0)
            assertNotEquals(before, version)
            assertEquals(h.configVersion, version)
            assertEquals(0, h.routingState("chat").provider("b")!!.weight)
            // Weight 0: out of rotation.
            repeat(5) { assertEquals("a", h.chat("chat", hi).provider) }
            h.flush()
            assertTrue(events.any { it is HarnessEvent.ConfigReloaded && it.version == version }, "$events")

            val e = assertThrows<HarnessException.Config> { h.setWeight("chat", "ghost", 5) }
            assertTrue(e.reason.contains("ghost"), e.reason)
            assertEquals(version, h.configVersion, "a refused setWeight keeps the config")
            assertThrows<HarnessException.Config> { h.setWeight("chat", "a", -1) }
            val unknown = assertThrows<HarnessException.Config> { h.routingState("nowhere") }
            assertTrue(unknown.reason.startsWith("route:"), unknown.reason)
        }
    }

    @Test
    fun `no provider able to answer lists each one's error, and no error shows the credential`() = runBlocking<Unit> {
        val secret = "sk-live-0123456789abcdef"
        provider("kt_nohealthy", "primary", "fail_rate" to 1.0, "fail_status" to 503)
        provider("kt_nohealthy", "backup", "fail_rate" to 1.0, "fail_status" to 500)
        client(
            "kt_nohealthy",
            listOf("primary" to emptyMap(), "backup" to emptyMap()),
            route = mapOf("same_provider_retries" to 0, "max_attempts" to 2),
            service = { mapOf("auth" to mapOf("type" to "bearer", "token" to mapOf("value" to secret))) },
        ).use { h ->
            for (call in listOf<suspend () -> Unit>({ h.chat("chat", hi) }, { h.chatStream("chat", hi).toList() })) {
                val e = assertThrows<HarnessException.NoHealthyProvider> { runBlocking { call() } }
                assertEquals("NoHealthyProviderError", e.kind)
                assertEquals(listOf("primary", "backup"), e.providerErrors.map { it.first })
                assertTrue(e.providerErrors[0].second.contains("503"), "${e.providerErrors}")
                assertTrue(e.providerErrors[1].second.contains("500"), "${e.providerErrors}")
                assertTrue(e.message!!.contains("primary") && e.message!!.contains("backup"), e.message)
                val printed = listOf(e.message, e.reason, e.toString(), e.stackTraceToString(), e.providerErrors.toString(), e.body?.let { String(it) })
                for (p in printed) assertFalse(p?.contains(secret) == true, "the credential leaked: $p")
            }
            // The provider did get the credential.
            val sent = TestUpstream.providerLog("kt_nohealthy-primary").getJSONArray("requests")
            assertTrue(sent.length() >= 1)
        }
    }

    @Test
    fun `a chat request's string form shows no header value or message`() {
        val r = ChatRequest("chat", hi, headers = mapOf("authorization" to "Bearer sk-live-xyz"))
        assertFalse(r.toString().contains("sk-live-xyz"), r.toString())
        assertFalse(r.toString().contains("Say hello"), r.toString())
        assertTrue(r.toString().contains("authorization"))
    }

    @Test
    fun `bad messages and params are config errors naming the field`() = runBlocking<Unit> {
        provider("kt_badchat", "primary")
        client("kt_badchat", listOf("primary" to emptyMap())).use { h ->
            val empty = assertThrows<HarnessException.Config> { runBlocking { h.chat("chat", emptyList()) } }
            assertTrue(empty.reason.startsWith("messages"), empty.reason)
            val noRole = assertThrows<HarnessException.Config> { runBlocking { h.chat("chat", listOf(mapOf("content" to "x"))) } }
            assertTrue(noRole.reason.startsWith("messages[0].role"), noRole.reason)
            val stream = assertThrows<HarnessException.Config> { runBlocking { h.chat("chat", hi, params = mapOf("stream" to true)) } }
            assertTrue(stream.reason.startsWith("params.stream"), stream.reason)
            val nan = assertThrows<HarnessException.Config> { runBlocking { h.chat("chat", hi, params = mapOf("temperature" to Double.NaN)) } }
            assertTrue(nan.reason.startsWith("params.temperature"), nan.reason)
            val route = assertThrows<HarnessException.Config> { runBlocking { h.chat("nowhere", hi) } }
            assertTrue(route.reason.contains("nowhere"), route.reason)
            val surrogate = assertThrows<HarnessException.Config> { runBlocking { h.chat("chat\uD800", hi) } }
            assertTrue(surrogate.reason.startsWith("route"), surrogate.reason)
            assertEquals(0, TestUpstream.providerLog("kt_badchat-primary").getInt("count"), "nothing was sent")
        }
    }

    @Test
    fun `cancelling a chat or a chat stream frees the provider's permits`() = runBlocking<Unit> {
        provider("kt_chatcancel", "slow", "silence" to true)
        provider("kt_chatcancel", "drip", "content" to "a b c d e f g h", "stream" to mapOf("delay_ms" to 200))
        client(
            "kt_chatcancel",
            listOf("slow" to emptyMap(), "drip" to emptyMap()),
            route = mapOf("stream" to mapOf("mid_stream" to "restart")),
            service = { mapOf("bulkhead" to mapOf("max_concurrency" to 10)) },
        ).use { h ->
            // The coroutine cancel drops the Rust future: the silent provider's permit comes back.
            val job = launch(Dispatchers.Default) { h.chat("chat", hi) }
            withTimeout(5_000) { while (h.bulkheadInUse("slow") < 1) delay(5) }
            job.cancel()
            withTimeout(2_000) { while (h.bulkheadInUse("slow") != 0) delay(5) }
            assertEquals(0, h.routingState("chat").provider("slow")!!.inFlight)
            assertNull(withTimeoutOrNull(100) { h.chat("chat", hi) })

            h.setWeight("chat", "slow", 0)
            // Stopping after the first chunk cancels the stream in the engine.
            val first = h.chatStream("chat", hi).first()
            assertEquals(ChatChunkKind.DELTA, first.kind)
            withTimeout(2_000) { while (h.bulkheadInUse("drip") != 0) delay(5) }
        }
    }
}
