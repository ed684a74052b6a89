package dev.harness

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit

/**
 * Embeddings over the test upstream's simulated OpenAI embeddings endpoint
 * (`/llm/{name}/v1/embeddings`, tests/upstream/src/formats/embeddings.rs): element `k` of the
 * vector for text `t` is `(len(t) + k * 0.25) / 8`. Mirrors core/tests/adapters.rs.
 */
class EmbeddingsTest {
    private val texts = listOf("a", "bb", "ccc", "dddd", "eeeee")
    private val secret = "sk-kt-embed-secret"

    private fun expected(text: String, dims: Int) = FloatArray(dims) { k -> (text.length + k * 0.25f) / 8f }

    /** Route `embed` (kind embeddings) over provider `oa` at upstream provider [upstream], and a chat route `chat`. */
    private fun client(upstream: String): HarnessClient = HarnessClient(
        mapOf(
            "log" to mapOf("enabled" to false),
            "services" to mapOf(
                "oa" to mapOf(
                    "base_url" to TestUpstream.llm(upstream),
                    "retry" to mapOf("jitter" to false, "base_delay_ms" to 5),
                    "auth" to mapOf("type" to "bearer", "token" to mapOf("value" to secret)),
                ),
            ),
            "routes" to mapOf(
                "embed" to mapOf(
                    "kind" to "embeddings",
                    "adapter" to "openai-compatible",
                    "providers" to listOf(
                        mapOf("id" to "oa", "service" to "oa", "model" to "e", "weight" to 1, "max_batch" to 2, "price" to mapOf("input_per_1k" to 0.1, "output_per_1k" to 0.0)),
                    ),
                ),
                "chat" to mapOf(
                    "adapter" to "openai-compatible",
                    "providers" to listOf(mapOf("id" to "oa", "service" to "oa", "model" to "m", "weight" to 1)),
                ),
            ),
        ),
    )

    private fun checkVectors(r: EmbedResult) {
        assertEquals(5, r.count)
        assertEquals(3, r.dimensions)
        assertEquals(3, r.batches, "5 inputs in batches of at most 2")
        assertEquals(5, r.vectors.size)
        texts.forEachIndexed { i, t -> assertArrayEquals(expected(t, 3), r.vectors[i], "input $i") }
        assertArrayEquals(expected("ccc", 3), r.vector(2))
    }

    @Test
    fun `5 inputs in batches of 2 come back as 3 batches, in input order, with usage and cost`() = runBlocking<Unit> {
        TestUpstream.putProvider("kt_embed-oa", mapOf("reset" to true, "max_batch" to 2, "dimensions" to 6))
        client("kt_embed-oa").use { h ->
            val r = h.embed("embed", texts, dimensions = 3)
            checkVectors(r)
            assertEquals("embed", r.route)
            assertEquals("oa", r.provider)
            assertEquals(3, r.attempts)
            assertEquals(32, r.traceId.length)
            assertTrue(r.elapsedMs > 0.0)
            // ceil(chars / 4) per text, summed over every batch: 1+1+1+1+2.
            assertEquals(6L, r.usage!!.promptTokens)
            assertEquals(6 * 0.1 / 1000, r.cost!!, 1e-12)

            val log = TestUpstream.providerLog("kt_embed-oa")
            assertEquals(3, log.getInt("count"))
            val first = log.getJSONArray("requests").getJSONObject(0)
            assertEquals("/llm/kt_embed-oa/v1/embeddings", first.getString("path"))
            assertEquals(3, first.getJSONObject("body").getInt("dimensions"))
            assertEquals("e", first.getJSONObject("body").getString("model"))

            val shown = r.toString()
            assertFalse(shown.contains(secret), shown)
            assertFalse(shown.contains("0.125"), "toString prints sizes, not vectors: $shown")
            assertTrue(shown.contains("count=5") && shown.contains("dimensions=3"), shown)
        }
    }

    @Test
    fun `the CompletableFuture form gives the same vectors and fails with the HarnessException`() {
        TestUpstream.putProvider("kt_embed_async-oa", mapOf("reset" to true, "max_batch" to 2, "dimensions" to 6))
        client("kt_embed_async-oa").use { h ->
            checkVectors(h.embedAsync("embed", texts, 3).get(10, TimeUnit.SECONDS))
            checkVectors(h.embedAsync(EmbedRequest("embed", texts).withDimensions(3)).get(10, TimeUnit.SECONDS))
            val e = assertThrows<ExecutionException> { h.embedAsync("embed", emptyList()).get(10, TimeUnit.SECONDS) }
            val cause = e.cause
            assertTrue(cause is HarnessException.Config, "$cause")
            assertTrue((cause as HarnessException).reason.startsWith("inputs:"), cause.reason)
            // A bad argument caught before the engine fails the future too (never throws from embedAsync).
            val bad = assertThrows<ExecutionException> { h.embedAsync("embed", texts, 0).get(10, TimeUnit.SECONDS) }
            assertTrue(bad.cause is HarnessException.Config, "${bad.cause}")
        }
    }

    @Test
    fun `wrong calls are config errors naming the field`() = runBlocking<Unit> {
        TestUpstream.putProvider("kt_embed_bad-oa", mapOf("reset" to true))
        client("kt_embed_bad-oa").use { h ->
            val empty = assertThrows<HarnessException.Config> { h.embed("embed", emptyList()) }
            assertTrue(empty.reason.startsWith("inputs:"), empty.reason)
            val blank = assertThrows<HarnessException.Config> { h.embed("embed", listOf("a", "")) }
            assertTrue(blank.reason.startsWith("inputs[1]"), blank.reason)
            for (d in listOf(0, -1)) {
                val dims = assertThrows<HarnessException.Config> { h.embed("embed", texts, dimensions = d) }
                assertTrue(dims.reason.startsWith("dimensions:"), dims.reason)
            }
            val chat = assertThrows<HarnessException.Config> { h.embed("chat", listOf("x")) }
            assertEquals("routes.chat.kind: embed needs a route of kind embeddings", chat.reason)
            val unknown = assertThrows<HarnessException.Config> { h.embed("nowhere", listOf("x")) }
            assertTrue(unknown.reason.contains("nowhere"), unknown.reason)
            val surrogate = assertThrows<HarnessException.Config> { h.embed("embed", listOf("ok", "\uD800")) }
            assertTrue(surrogate.reason.startsWith("inputs[1]"), surrogate.reason)
            for (e in listOf(empty, blank, chat, unknown, surrogate)) assertFalse(e.toString().contains(secret), "$e")
            assertEquals(0, TestUpstream.providerLog("kt_embed_bad-oa").getInt("count"), "nothing was sent")
        }
    }
}
