package dev.harness

import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.boolean
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import kotlinx.serialization.json.putJsonObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentLinkedQueue

/**
 * A host adapter written in Kotlin for the test upstream's in-house format
 * (`/llm/{name}/inhouse/generate`, tests/upstream/src/formats/inhouse.rs), next to a native
 * Gemini provider on one priority route. Mirrors core/tests/adapters.rs.
 */
class HostAdapterTest {
    private val hi = listOf(mapOf("role" to "system", "content" to "Be brief."), mapOf("role" to "user", "content" to "hi"))
    private val gemSecret = "sk-kt-gem-secret"
    private val houseSecret = "sk-kt-house-secret"

    /** The in-house format in Kotlin; records the threads it ran on. */
    private class InHouse(private val raise: Boolean = false) : HarnessAdapter {
        val threads = ConcurrentLinkedQueue<String>()

        override suspend fun buildRequest(request: JsonObject): JsonObject {
            threads.add(Thread.currentThread().name)
            if (raise) throw IllegalStateException("the adapter is broken")
            val prompt = request.getValue("request").jsonObject.getValue("messages").jsonArray
                .mapNotNull { (it.jsonObject["content"] as? JsonPrimitive)?.content }.joinToString("\n")
            return buildJsonObject {
                put("path", "/inhouse/generate")
                putJsonObject("body") {
                    put("prompt", prompt)
                    put("stream", request.getValue("stream").jsonPrimitive.boolean)
                }
                putJsonObject("headers") { put("x-tenant", "t1") }
            }
        }

        override suspend fun parseResponse(response: JsonObject): JsonObject {
            threads.add(Thread.currentThread().name)
            val body = runCatching { ViewJson.json.parseToJsonElement(response.getValue("body").jsonPrimitive.content).jsonObject }.getOrNull()
            if (response.getValue("status").jsonPrimitive.int != 200) {
                val kind = (body?.get("failure")?.jsonObject?.get("kind") as? JsonPrimitive)?.content ?: "busy"
                return buildJsonObject {
                    putJsonObject("error") {
                        put("code", if (kind == "busy") "overloaded" else "invalid_request")
                        put("message", kind)
                    }
                }
            }
            val tokens = body!!.getValue("tokens").jsonObject
            return buildJsonObject {
                put("content", body.getValue("output").jsonObject.getValue("text"))
                put("finish_reason", "stop")
                putJsonObject("usage") {
                    put("prompt_tokens", tokens.getValue("in"))
                    put("completion_tokens", tokens.getValue("out"))
                }
            }
        }

        override suspend fun parseStreamEvent(event: JsonObject): JsonObject? {
            threads.add(Thread.currentThread().name)
            val data = ViewJson.json.parseToJsonElement(event.getValue("data").jsonPrimitive.content).jsonObject
            if ((data["end"] as? JsonPrimitive)?.booleanOrNull == true) {
                val tokens = data.getValue("tokens").jsonObject
                return buildJsonObject {
                    put("done", true)
                    put("finish_reason", "stop")
                    putJsonObject("usage") {
                        put("prompt_tokens", tokens.getValue("in"))
                        put("completion_tokens", tokens.getValue("out"))
                    }
                }
            }
            val token = data["token"] ?: return null
            return buildJsonObject { put("content", token) }
        }
    }

    /** Route `chat`, priority: `house` (adapter inhouse) then `gem` (adapter gemini), at upstream providers `<test>-house` / `<test>-gem`. */
    private fun client(test: String): HarnessClient {
        val retry = mapOf("jitter" to false, "base_delay_ms" to 5, "max_delay_ms" to 20)
        val timeouts = mapOf("response_ms" to 3000, "idle_ms" to 2000)
        val price = mapOf("input_per_1k" to 1.0, "output_per_1k" to 2.0)
        return HarnessClient(
            mapOf(
                "log" to mapOf("enabled" to false),
                "services" to mapOf(
                    "house" to mapOf(
                        "base_url" to TestUpstream.llm("$test-house"), "retry" to retry, "timeouts" to timeouts,
                        "auth" to mapOf("type" to "bearer", "token" to mapOf("value" to houseSecret)),
                    ),
                    "gem" to mapOf(
                        "base_url" to TestUpstream.llm("$test-gem"), "retry" to retry, "timeouts" to timeouts,
                        "auth" to mapOf("type" to "header", "header" to "x-goog-api-key", "keys" to listOf(mapOf("value" to gemSecret))),
                    ),
                ),
                "routes" to mapOf(
                    "chat" to mapOf(
                        "adapter" to "openai-compatible",
                        "strategy" to "priority",
                        "providers" to listOf(
                            mapOf("id" to "house", "service" to "house", "model" to "house-model", "adapter" to "inhouse", "weight" to 1, "price" to price),
                            mapOf("id" to "gem", "service" to "gem", "model" to "gem-model", "adapter" to "gemini", "weight" to 1, "price" to price),
                        ),
                    ),
                ),
            ),
        )
    }

    private fun provider(name: String, vararg spec: Pair<String, Any?>) = TestUpstream.putProvider(name, mapOf("reset" to true, *spec))

    private fun noSecret(vararg shown: Any?) {
        for (s in shown) {
            val text = s.toString()
            assertFalse(text.contains(gemSecret) || text.contains(houseSecret), text)
        }
    }

    @Test
    fun `a Kotlin adapter answers in its own format, streams, and fails over to gemini on a 503`() = runBlocking<Unit> {
        provider("kt_adapter-house", "content" to "from the house model")
        provider("kt_adapter-gem")
        client("kt_adapter").use { h ->
            // Not registered yet: the provider is refused (nothing sent), the route fails over.
            assertEquals("gem", h.chat("chat", hi).provider)
            assertEquals(0, TestUpstream.providerLog("kt_adapter-house").getInt("count"))

            val adapter = InHouse()
            h.registerAdapter("inhouse", adapter)
            val a = h.chat("chat", hi)
            assertEquals("house", a.provider)
            assertEquals("house-model", a.model)
            assertEquals("from the house model", a.content)
            assertEquals("stop", a.finishReason)
            val usage = a.usage!!
            assertTrue(usage.promptTokens > 0 && usage.completionTokens > 0, "$usage")
            assertNotNull(a.cost)
            val sent = TestUpstream.providerLog("kt_adapter-house").getJSONArray("requests").getJSONObject(0)
            assertEquals("/llm/kt_adapter-house/inhouse/generate", sent.getString("path"))
            assertEquals("Be brief.\nhi", sent.getJSONObject("body").getString("prompt"))
            assertEquals(false, sent.getJSONObject("body").getBoolean("stream"))

            // Streamed through the adapter.
            val chunks = h.chatStream("chat", hi).toList()
            assertEquals("from the house model", chunks.filter { it.kind == ChatChunkKind.DELTA }.joinToString("") { it.content })
            assertTrue(chunks.all { it.provider == null || it.provider == "house" }, "$chunks")
            assertEquals(ChatChunkKind.DONE, chunks.last().kind)

            // Kotlin code never runs on the engine's threads.
            assertTrue(adapter.threads.isNotEmpty())
            assertTrue(adapter.threads.none { it.startsWith("harness-worker") }, "${adapter.threads}")

            // The in-house server is busy: the adapter gives the code, and gemini answers.
            provider("kt_adapter-house", "fail_rate" to 1.0, "fail_status" to 503)
            val failedOver = h.chat("chat", hi)
            assertEquals("gem", failedOver.provider)
            assertTrue(TestUpstream.providerLog("kt_adapter-house").getInt("count") >= 1, "house was tried first")
            noSecret(a, failedOver, chunks)
        }
    }

    @Test
    fun `an adapter that throws is an error naming it and the step, and the route fails over`() = runBlocking<Unit> {
        provider("kt_adapter_raise-house")
        provider("kt_adapter_raise-gem")
        client("kt_adapter_raise").use { h ->
            h.registerAdapter("inhouse", InHouse(raise = true))
            assertEquals("gem", h.chat("chat", hi).provider)
            assertEquals(0, TestUpstream.providerLog("kt_adapter_raise-house").getInt("count"), "nothing was sent")

            provider("kt_adapter_raise-gem", "fail_rate" to 1.0, "fail_status" to 503)
            val e = assertThrows<HarnessException.NoHealthyProvider> { h.chat("chat", hi) }
            val expected = "adapter `inhouse` raised in build_request: IllegalStateException: the adapter is broken"
            assertTrue(e.message!!.contains(expected), e.message)
            val house = e.providerErrors.single { it.first == "house" }.second
            assertTrue(house.contains(expected), house)
            noSecret(e, e.message, e.providerErrors)

            // The engine is unharmed: a working adapter replaces it.
            provider("kt_adapter_raise-gem")
            h.registerAdapter("inhouse", InHouse())
            assertEquals("house", h.chat("chat", hi).provider)
        }
    }

    @Test
    fun `a Java style adapter answers with futures, and a failed future fails over`() = runBlocking<Unit> {
        provider("kt_adapter_async-house", "content" to "async house")
        provider("kt_adapter_async-gem")
        client("kt_adapter_async").use { h ->
            val inner = InHouse()
            val fail = java.util.concurrent.atomic.AtomicBoolean(false)
            val async = object : AsyncHarnessAdapter {
                private fun <T> run(f: suspend () -> T): CompletableFuture<T> =
                    if (fail.get()) CompletableFuture.failedFuture(UnsupportedOperationException("no future today"))
                    else CompletableFuture.completedFuture(runBlocking { f() })

                override fun buildRequest(request: JsonObject) = run { inner.buildRequest(request) }
                override fun parseResponse(response: JsonObject) = run { inner.parseResponse(response) }
                override fun parseStreamEvent(event: JsonObject) = run { inner.parseStreamEvent(event) }
            }
            h.registerAdapterAsync("inhouse", async)
            val a = h.chat("chat", hi)
            assertEquals("house" to "async house", a.provider to a.content)
            fail.set(true)
            provider("kt_adapter_async-gem", "fail_rate" to 1.0, "fail_status" to 503)
            val e = assertThrows<HarnessException.NoHealthyProvider> { h.chat("chat", hi) }
            assertTrue(e.message!!.contains("adapter `inhouse` raised in build_request: UnsupportedOperationException: no future today"), e.message)
        }
    }

    @Test
    fun `a built-in or bad adapter name is a config error naming the field`() {
        client("kt_adapter_name").use { h ->
            for (name in listOf("anthropic", "gemini", "openai-compatible", "a b", "")) {
                val e = assertThrows<HarnessException.Config>(name) { h.registerAdapter(name, InHouse()) }
                assertTrue(e.reason.startsWith("name:"), e.reason)
                noSecret(e)
            }
            assertThrows<HarnessException.Config> { h.registerAdapterAsync("azure-openai", object : AsyncHarnessAdapter {
                override fun buildRequest(request: JsonObject) = CompletableFuture.completedFuture(request)
                override fun parseResponse(response: JsonObject) = CompletableFuture.completedFuture(response)
                override fun parseStreamEvent(event: JsonObject) = CompletableFuture.completedFuture<JsonObject?>(null)
            }) }
            h.registerAdapter("in-house_2", InHouse())
        }
    }
}
