package dev.harness

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.CopyOnWriteArrayList

/** Mocks set from Kotlin (unit tests with no downstream) and faults injected from config, through the real engine. */
class MockTest {
    /** Nothing listens here: a request that reached the network fails to connect. */
    private val nowhere = "http://127.0.0.1:9"

    private fun config(baseUrl: String, vararg svc: Pair<String, Any?>, extra: Map<String, Any?> = emptyMap()): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-mock"),
        "log" to mapOf("enabled" to false),
        "services" to mapOf("orders" to mapOf("base_url" to baseUrl) + svc),
    ) + extra

    @Test
    fun `a mock answers with the captured id, the latest wins, and clearMocks reaches the network again`() = runBlocking<Unit> {
        HarnessClient(config(nowhere, "retry" to mapOf("max_retries" to 0))).use { h ->
            h.mock("orders", "GET", "/orders/{id}", json = mapOf("id" to "{id}", "state" to "paid"))
            val r = h.get("orders", "/orders/A-17")
            assertEquals(200, r.status)
            assertEquals("""{"id":"A-17","state":"paid"}""", r.text())
            assertEquals(1, r.attempts)

            h.mock("orders", "GET", "/orders/7", status = 404, body = "gone", headers = mapOf("x-mock" to "yes"))
            val gone = assertThrows<HarnessException.HttpStatus> { h.get("orders", "/orders/7") }
            assertEquals(404, gone.status)
            assertEquals("gone", gone.body?.decodeToString())
            assertEquals("""{"id":"8","state":"paid"}""", h.get("orders", "/orders/8").text(), "the older mock still answers the rest")

            val unmatched = assertThrows<HarnessException.Config> { h.delete("orders", "/orders/8") }
            assertTrue(unmatched.message!!.contains("DELETE /orders/8"), unmatched.message)
            assertEquals("closed", h.breakerState("orders", "DELETE", "/orders/8"), "an unmatched mock is not the downstream's failure")

            h.clearMocks("orders")
            assertThrows<HarnessException.Connect> { h.get("orders", "/orders/A-17") }
        }
    }

    @Test
    fun `schema validation runs on a mock, and a warned drift is named in the record`() = runBlocking<Unit> {
        val schema = mapOf("type" to "object", "properties" to mapOf("total" to mapOf("type" to "number")))
        val endpoints = "endpoints" to mapOf("GET /orders/{id}" to mapOf("response_schema" to schema, "validate" to "warn"))
        HarnessClient(config(nowhere, endpoints)).use { h ->
            val records = CopyOnWriteArrayList<HarnessEvent.RequestFinished>()
            h.addListener { if (it is HarnessEvent.RequestFinished) records += it }
            h.mock("orders", "GET", "/orders/{id}", json = mapOf("total" to "4111-1111"))
            assertEquals(200, h.get("orders", "/orders/1").status)
            h.flush()
            val violation = records.single().schemaViolation
            assertTrue(violation!!.contains("at /total") && "4111" !in violation, violation)
            assertEquals(violation, records.single().fields()["schema_violation"])
        }
    }

    @Test
    fun `a mock still meets the pipeline - its latency past response_ms is a retried TimeoutError`() = runBlocking<Unit> {
        val svc = arrayOf(
            "timeouts" to mapOf("response_ms" to 50),
            "retry" to mapOf("max_retries" to 2, "base_delay_ms" to 1, "max_delay_ms" to 2, "jitter" to false),
        )
        HarnessClient(config(nowhere, *svc)).use { h ->
            h.mock("orders", "*", "*", json = mapOf("late" to true), latencyMs = 400)
            val e = assertThrows<HarnessException.Timeout> { h.get("orders", "/anything") }
            assertEquals(3, e.attempts, "max_retries + 1")
            assertEquals("response", e.phase)
        }
    }

    @Test
    fun `bad mock input is a ConfigError naming the field`() {
        HarnessClient(config(nowhere)).use { h ->
            val unknown = assertThrows<HarnessException.Config> { h.mock("nope", "GET", "/x", json = mapOf<String, Any>()) }
            assertTrue(unknown.reason.contains("unknown service"), unknown.reason)
            val path = assertThrows<HarnessException.Config> { h.mock("orders", "GET", "orders") }
            assertTrue(path.reason.startsWith("mock.match.path"), path.reason)
            val status = assertThrows<HarnessException.Config> { h.mock("orders", "GET", "/x", status = 100) }
            assertTrue(status.reason.startsWith("mock.status"), status.reason)
            val both = assertThrows<HarnessException.Config> { h.mock("orders", "GET", "/x", json = 1, body = "1") }
            assertTrue(both.reason.contains("json") && both.reason.contains("body"), both.reason)
            val latency = assertThrows<HarnessException.Config> { h.mock("orders", "GET", "/x", latencyMs = -1) }
            assertTrue(latency.reason.startsWith("mock.latency_ms"), latency.reason)
            val nan = assertThrows<HarnessException.Config> { h.mock("orders", "GET", "/x", json = Double.NaN) }
            assertTrue(nan.reason.startsWith("mock.json"), nan.reason)
            assertThrows<HarnessException.Config> { h.clearMocks("\ud800") }
            h.clearMocks()
        }
    }

    @Test
    fun `an injected 503 from config is an injected_fault HttpStatusError, marked in the record and counted`() = runBlocking<Unit> {
        val faults = mapOf("faults" to mapOf("enabled" to true, "seed" to 1, "rules" to listOf(mapOf("service" to "orders", "rate" to 1.0, "fault" to "status", "status" to 503))))
        HarnessClient(config(TestUpstream.url, "retry" to mapOf("max_retries" to 0), extra = faults)).use { h ->
            val records = CopyOnWriteArrayList<HarnessEvent.RequestFinished>()
            h.addListener { if (it is HarnessEvent.RequestFinished) records += it }
            val e = assertThrows<HarnessException.HttpStatus> { h.get("orders", "/s/kt_fault/x") }
            assertEquals(503, e.status)
            assertEquals("injected_fault", e.code)
            h.flush()
            assertEquals(1, records.size, "$records")
            assertEquals("status", records[0].fault)
            assertEquals("status", records[0].fields()["fault"])
            val counted = h.metrics().lines().firstOrNull { it.startsWith("""harness_faults_injected_total{service="orders",fault="status"} """) }
            assertEquals(1.0, counted?.substringAfterLast(' ')?.toDouble(), h.metrics())

            // Switched off live by a reload: the same call reaches the upstream, and its record has no fault.
            TestUpstream.putScript("kt_fault", listOf(mapOf("status" to 200)))
            h.reload(config(TestUpstream.url, "retry" to mapOf("max_retries" to 0)))
            assertEquals(200, h.get("orders", "/s/kt_fault/x").status)
            h.flush()
            assertNull(records.last().fault)
            assertTrue("fault" !in records.last().fields())
        }
    }
}
