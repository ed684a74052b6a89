package dev.harness

import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * The adaptive resilience the engine gained (sliding-window breaker, half-open ramp, adaptive
 * bulkhead, hedged reads) as the JVM sees it: `breakerDetails`, `bulkheadLimit` and the new
 * metrics, against the real upstream. The behaviour itself is the core's (and the vectors').
 */
class AdaptiveResilienceTest {
    private fun config(vararg services: Pair<String, Map<String, Any?>>): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-tests"),
        "log" to mapOf("enabled" to false),
        "services" to services.associate { (name, svc) -> name to mapOf("base_url" to TestUpstream.url) + svc },
    )

    private val noRetries = "retry" to mapOf("max_retries" to 0)

    /** 503, 200, 200 repeating: 30% failures, never two in a row. */
    private fun oneInThreeFails(script: String) =
        TestUpstream.putScript(script, (0 until 30).map { mapOf("status" to if (it % 3 == 0) 503 else 200) })

    /** One call's outcome: its status, or the kind of error it raised. */
    private suspend fun outcome(block: suspend () -> HarnessResponse): String = try {
        block().status.toString()
    } catch (e: HarnessException) {
        e.kind
    }

    @Test
    fun `a sliding-window breaker opens on a 30 percent failure rate, a consecutive one does not`() = runBlocking<Unit> {
        oneInThreeFails("kt_window")
        oneInThreeFails("kt_consecutive")
        val window = mapOf(
            "mode" to "sliding_window",
            "window" to mapOf("type" to "count", "size" to 10),
            "minimum_calls" to 10,
            "failure_rate_threshold" to 0.3,
            "open_ms" to 60_000,
        )
        HarnessClient(config(
            "window" to mapOf(noRetries, "breaker" to window),
            "consecutive" to mapOf(noRetries, "breaker" to mapOf("failure_threshold" to 3)),
        )).use { h ->
            val p = "/s/kt_window/x"
            val before = h.breakerDetails("window", "get", p)
            assertEquals(BreakerDetails("window", before.endpoint, "GET", "closed", "closed", 1.0, 0, 0.0, 0.0), before)
            for (n in 1..9) {
                assertEquals(if (n % 3 == 1) "HttpStatusError" else "200", outcome { h.get("window", p) }, "call $n")
                val d = h.breakerDetails("window", "GET", p)
                // Below minimum_calls the rate (already 3/9 > 0.3 after 9 calls) opens nothing.
                assertEquals("closed", d.state, "after $n calls: $d")
                assertEquals(n, d.calls, "after $n calls: $d")
                assertEquals(((n + 2) / 3).toDouble() / n, d.failureRate, 1e-9, "after $n calls: $d")
                assertEquals(0.0, d.slowCallRate)
            }
            assertEquals("HttpStatusError", outcome { h.get("window", p) }, "call 10")
            val open = h.breakerDetails("window", "GET", p)
            assertEquals("open", open.state, open.toString())
            assertEquals("open", open.phase)
            assertEquals(0.0, open.admitRatio)
            assertEquals("open", h.breakerState("window", "GET", p))
            val e = assertThrows<HarnessException.CircuitOpen> { runBlocking { h.get("window", p) } }
            assertEquals(0, e.attempts)
            assertEquals("window", e.service)
            assertEquals(10, TestUpstream.stats("kt_window").getInt("requests"), "the open breaker sent nothing")

            val q = "/s/kt_consecutive/x"
            repeat(15) { n -> assertEquals(if (n % 3 == 0) "HttpStatusError" else "200", outcome { h.get("consecutive", q) }, "call ${n + 1}") }
            val d = h.breakerDetails("consecutive", "GET", q)
            assertEquals("closed", d.state, d.toString())
            assertEquals("closed", d.phase)
            assertEquals(1.0, d.admitRatio)
            assertEquals(15, TestUpstream.stats("kt_consecutive").getInt("requests"))
        }
    }

    @Test
    fun `after its probe succeeds a breaker ramps back, admitting half the calls`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_ramp", listOf(mapOf("status" to 503), mapOf("status" to 200)))
        val breaker = mapOf(
            "failure_threshold" to 1,
            "open_ms" to 200,
            "half_open" to mapOf("probes" to 1, "ramp" to listOf(0.5, 1.0), "step_ms" to 2000),
        )
        HarnessClient(config("svc" to mapOf(noRetries, "breaker" to breaker))).use { h ->
            val p = "/s/kt_ramp/x"
            assertThrows<HarnessException.HttpStatus> { runBlocking { h.get("svc", p) } }
            assertEquals("open", h.breakerDetails("svc", "GET", p).phase)
            delay(300)
            assertEquals(200, h.get("svc", p).status, "the probe")
            val d = h.breakerDetails("svc", "GET", p)
            assertEquals("half_open", d.state, d.toString())
            assertEquals("ramping", d.phase)
            assertEquals(0.5, d.admitRatio, 1e-9)
            // 10 calls well inside the 2 s step: half of them pass.
            val outcomes = (1..10).map { outcome { h.get("svc", p) } }
            assertEquals(5, outcomes.count { it == "200" }, outcomes.toString())
            assertEquals(5, outcomes.count { it == "CircuitOpenError" }, outcomes.toString())
            assertEquals(2 + 5, TestUpstream.stats("kt_ramp").getInt("requests"))
        }
    }

    @Test
    fun `bulkheadLimit gives the fixed or adaptive limit and refuses an unknown service`() = runBlocking<Unit> {
        HarnessClient(config(
            "fixed" to mapOf("bulkhead" to mapOf("max_concurrency" to 7)),
            "adaptive" to mapOf("bulkhead" to mapOf("adaptive" to mapOf("algorithm" to "vegas", "initial" to 20))),
        )).use { h ->
            assertEquals(7, h.bulkheadLimit("fixed"))
            assertEquals(20, h.bulkheadLimit("adaptive"), "before any traffic")
            assertEquals(0, h.bulkheadInUse("adaptive"))
            val e = assertThrows<HarnessException.Config> { h.bulkheadLimit("nowhere") }
            assertTrue(e.reason.startsWith("service:"), e.reason)
            assertTrue(e.reason.contains("nowhere"), e.reason)
            assertTrue(h.metrics().contains("harness_bulkhead_limit{service=\"fixed\"} 7"), "the limit is a metric too")
        }
    }

    /** The value of [name]`{service="hedged"}` in the metrics text, 0 while it has no sample. */
    private fun counter(h: HarnessClient, name: String): Long =
        Regex("""^$name\{service="hedged"\} (\d+)""", RegexOption.MULTILINE).find(h.metrics())?.groupValues?.get(1)?.toLong() ?: 0

    @Test
    fun `a slow read is hedged within its budget, a POST without an idempotency key never`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_hedge", listOf(mapOf("status" to 200, "delay_ms" to 200)))
        TestUpstream.putScript("kt_hedge_post", listOf(mapOf("status" to 200, "delay_ms" to 200)))
        val hedge = mapOf("after_ms" to 20, "budget_ratio" to 1.0)
        HarnessClient(config("hedged" to mapOf(noRetries, "hedge" to hedge))).use { h ->
            fun sent(): Long = counter(h, "harness_hedges_sent_total")
            val calls = 25
            repeat(calls) { assertEquals(200, h.get("hedged", "/s/kt_hedge/x").status) }
            val hedges = sent()
            assertTrue(hedges > 0, "no hedge sent:\n" + h.metrics().lines().filter { "hedge" in it }.joinToString("\n"))
            val requests = TestUpstream.stats("kt_hedge").getInt("requests")
            assertTrue(requests > calls, "the upstream saw $requests requests for $calls calls")
            // Every answer takes 200 ms, so the first attempt mostly wins: shown (as 0) from the first hedge on.
            assertTrue(h.metrics().lines().any { it.startsWith("harness_hedges_won_total{service=\"hedged\"} ") }, "no harness_hedges_won_total")
            assertTrue(counter(h, "harness_hedges_won_total") <= hedges)

            repeat(5) { assertEquals(200, h.post("hedged", "/s/kt_hedge_post/x", json = mapOf("n" to it)).status) }
            assertEquals(5, TestUpstream.stats("kt_hedge_post").getInt("requests"), "a POST without an idempotency key is never hedged")
            assertEquals(hedges, sent())
        }
    }
}
