package dev.harness

import kotlinx.coroutines.runBlocking
import org.json.JSONObject
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.util.UUID
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/**
 * Shared state on a real redis-server (started here on a free loopback port): client-side
 * rate limits, the receiver across OS processes, and the receiver with its store down.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SharedStateTest {
    private val redis = TestRedis.start()

    @AfterAll
    fun stopRedis() = redis.close()

    private fun client(rateLimit: Map<String, Any?>) = HarnessClient(
        mapOf(
            "log" to mapOf("enabled" to false),
            "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url, "retry" to mapOf("max_retries" to 0), "rate_limit" to rateLimit)),
        ),
    )

    private fun requestsSeen(script: String): Int = TestUpstream.log(script).getJSONArray("requests").length()

    @Test
    fun `a request past the client's rate limit is a RateLimited error and is never sent`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_rate_local", listOf(mapOf("status" to 200)))
        client(mapOf("rps" to 1, "burst" to 1, "max_wait_ms" to 0)).use { h ->
            assertEquals(200, h.get("svc", "/s/kt_rate_local/a").status)
            val e = assertThrows<HarnessException.RateLimited> { runBlocking { h.get("svc", "/s/kt_rate_local/a") } }
            assertEquals("RateLimitedError", e.kind)
            assertEquals("client_rate_limited", e.code)
            assertNull(e.status)
            assertTrue(e.retryAfterMs!! in 1..1000, "retryAfterMs ${e.retryAfterMs}")
            assertTrue(h.metrics().contains("harness_rate_limited_total{service=\"svc\"} 1"), h.metrics())
        }
        assertEquals(1, requestsSeen("kt_rate_local"))
    }

    @Test
    fun `a shared rate limit is one limit for every client on the same Redis key`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_rate_shared", listOf(mapOf("status" to 200)))
        val shared = mapOf("redis_url" to redis.url, "key" to "kt-${UUID.randomUUID()}")
        val limit = mapOf("rps" to 0.2, "burst" to 1, "max_wait_ms" to 0, "shared" to shared)
        client(limit).use { a ->
            client(limit).use { b ->
                assertEquals(200, a.get("svc", "/s/kt_rate_shared/a").status)
                // Another instance of the fleet: the one cell is spent.
                val e = assertThrows<HarnessException.RateLimited> { runBlocking { b.get("svc", "/s/kt_rate_shared/a") } }
                assertEquals("client_rate_limited", e.code)
                assertTrue(e.retryAfterMs!! > 1000, "retryAfterMs ${e.retryAfterMs}")
            }
        }
        assertEquals(1, requestsSeen("kt_rate_shared"))
    }

    @Test
    fun `one message delivered concurrently from 3 processes runs its handler exactly once`() {
        val java = File(System.getProperty("java.home"), "bin/java").path
        val msgId = "m-${UUID.randomUUID()}"
        val deliveries = 40
        val children = (1..3).map {
            ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), IdempotencyChild::class.java.name, redis.url, msgId, "$deliveries", "400")
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start()
        }
        try {
            val out = children.map { it.inputStream.bufferedReader() }
            for (r in out) assertEquals("ready", r.readLine(), "a child did not start")
            // Every process is warmed up: let them all race for the claim.
            for (c in children) c.outputStream.apply { write("go\n".toByteArray()); flush() }
            val reports = out.map { JSONObject(it.readLine() ?: error("a child printed no report")) }
            for (c in children) assertTrue(c.waitFor(60, TimeUnit.SECONDS), "a child did not exit")
            assertEquals(listOf(0, 0, 0), children.map { it.exitValue() })

            for (r in reports) {
                assertEquals(0, r.getJSONArray("errors").length(), "errors in ${r.getLong("pid")}: ${r.getJSONArray("errors")}")
                assertEquals(2 * deliveries, r.getInt("stored") + r.getInt("in_flight"), r.toString())
            }
            assertEquals(1, reports.sumOf { it.getInt("runs") }, "handler runs: ${reports.map { it.getInt("runs") }}")
            val winner = reports.single { it.getInt("runs") == 1 }.getLong("pid")
            // Every delivery that got a result got the winner's, as stored.
            val results = reports.flatMap { r -> (0 until r.getJSONArray("results").length()).map { r.getJSONArray("results").getString(it) } }.toSet()
            assertEquals(setOf("""{"by":$winner,"amount":1250}"""), results)
            assertTrue(reports.sumOf { it.getInt("stored") } >= 1 + deliveries, reports.toString())
            assertTrue(reports.sumOf { it.getInt("in_flight") } >= 1, reports.toString())
        } finally {
            for (c in children) if (c.isAlive) c.destroyForcibly()
        }
    }

    @Test
    fun `with Redis down, on_store_down process runs the handler and reject refuses`() = runBlocking<Unit> {
        // A real server, then gone: the receiver meets a refused connection.
        val gone = TestRedis.start().also { it.close() }
        val runs = AtomicInteger()
        Idempotency(mapOf("redis_url" to gone.url, "on_store_down" to "process")).use { idem ->
            val key = idem.key("acme", "invoice.paid", "down-1")
            assertEquals("ran", idem.run(key) { runs.incrementAndGet(); "ran" })
            // Without the store there is no dedup: a redelivery runs again.
            assertEquals("ran", idem.run(key) { runs.incrementAndGet(); "ran" })
            assertEquals(2, runs.get())
            assertTrue(idem.metricsText().contains("harness_idempotency_total{outcome=\"store_down_processed\"} 2"), idem.metricsText())
        }
        Idempotency(mapOf("redis_url" to gone.url, "on_store_down" to "reject")).use { idem ->
            val key = idem.key("acme", "invoice.paid", "down-2")
            val e = assertThrows<HarnessException.Other> { runBlocking { idem.run(key) { runs.incrementAndGet() } } }
            assertEquals("store_unavailable", e.code)
            assertEquals("HarnessError", e.kind)
            assertEquals(2, runs.get(), "nothing ran")
        }
    }

    @Test
    fun `on Redis the receiver dedups across receivers and a duplicate in flight is refused`() = runBlocking<Unit> {
        val config = mapOf("redis_url" to redis.url, "prefix" to "kt:${UUID.randomUUID()}:")
        Idempotency(config).use { a ->
            Idempotency(config).use { b ->
                val key = a.key("acme", "invoice.paid", "r-1")
                val inner = a.run(key) {
                    // While this runs, the other receiver (another pod) is refused.
                    val e = assertThrows<HarnessException.DuplicateInFlight> { runBlocking { b.run(key) { error("must not run") } } }
                    assertTrue(e.retryAfterMs!! > 0)
                    listOf("done", 1)
                }
                assertEquals(listOf("done", 1L), inner)
                assertEquals(inner, b.run(key) { error("must not run") })
                assertTrue(a.toString().contains("redis"), a.toString())
                assertTrue(!a.toString().contains(redis.url), a.toString())
            }
        }
    }
}
