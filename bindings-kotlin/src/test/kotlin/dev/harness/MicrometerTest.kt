package dev.harness

import dev.harness.micrometer.HarnessMeterBinder
import dev.harness.micrometer.PrometheusText
import dev.harness.micrometer.SeriesKind
import io.micrometer.core.instrument.FunctionCounter
import io.micrometer.core.instrument.Gauge
import io.micrometer.core.instrument.Tag
import io.micrometer.core.instrument.simple.SimpleMeterRegistry
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.fail
import java.time.Duration

/** HarnessMeterBinder: the client's series, same names and labels, in a Micrometer registry. */
class MicrometerTest {
    private fun client(name: String) = HarnessClient(
        mapOf(
            "client" to mapOf("name" to name),
            "log" to mapOf("enabled" to false),
            "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url, "retry" to mapOf("max_retries" to 0))),
        ),
    )

    private fun SimpleMeterRegistry.requests(status: String): FunctionCounter? =
        find("harness_requests_total")
            .tags("service", "svc", "endpoint", "/items", "method", "GET", "status", status)
            .functionCounter()

    @Test
    fun `the registry has harness_requests_total with the client's count and tags`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_micrometer", listOf(mapOf("status" to 200)))
        client("kotlin-micrometer").use { h ->
            repeat(3) { h.get("svc", "/s/kt_micrometer/a", endpoint = "/items") }
            val registry = SimpleMeterRegistry()
            HarnessMeterBinder(h).bindTo(registry)

            val ok = registry.requests("200") ?: fail(h.metrics())
            assertEquals(3.0, ok.count())
            assertEquals(setOf("service", "endpoint", "method", "status"), ok.id.tags.map { it.key }.toSet())
            assertTrue(ok.id.description!!.isNotEmpty())

            // A histogram: its _count and _sum, as counters, with the request's labels.
            val count = registry.find("harness_request_duration_seconds_count").tags("service", "svc", "endpoint", "/items").functionCounter()
            assertEquals(3.0, (count ?: fail(h.metrics())).count())
            val sum = registry.find("harness_request_duration_seconds_sum").tags("service", "svc", "endpoint", "/items").functionCounter()
            assertTrue(sum!!.count() > 0.0)
            assertNull(registry.find("harness_request_duration_seconds_bucket").meter())

            // A gauge: permits held now.
            val permits = registry.find("harness_bulkhead_permits_in_use").tags("service", "svc").gauge()
            assertEquals(0.0, (permits ?: fail(h.metrics())).value())

            // Every series of the text is there: counters as FunctionCounters, gauges as Gauges.
            val samples = PrometheusText.parse(h.metrics())
            assertTrue(samples.isNotEmpty())
            for (s in samples) {
                val meter = registry.find(s.key.name).tags(s.key.labels.map { Tag.of(it.first, it.second) }).meters()
                    .firstOrNull { m -> m.id.tags.size == s.key.labels.size }
                assertNotNull(meter, "no meter for ${s.key}")
                when (s.kind) {
                    SeriesKind.COUNTER -> assertTrue(meter is FunctionCounter, "${s.key} is a ${meter!!.javaClass}")
                    SeriesKind.GAUGE -> assertTrue(meter is Gauge, "${s.key} is a ${meter!!.javaClass}")
                }
            }
        }
    }

    @Test
    fun `series that appear later are registered on the next poll`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_micrometer_later", listOf(mapOf("status" to 200), mapOf("status" to 404)))
        client("kotlin-micrometer-later").use { h ->
            h.get("svc", "/s/kt_micrometer_later/a", endpoint = "/items")
            val registry = SimpleMeterRegistry()
            HarnessMeterBinder(h, Duration.ZERO).bindTo(registry)
            assertNull(registry.requests("404"))

            assertThrows<HarnessException> { h.get("svc", "/s/kt_micrometer_later/a", endpoint = "/items") }
            // Polling any meter re-reads the text (ttl 0 here) and registers what is new.
            assertEquals(1.0, registry.requests("200")!!.count())
            assertEquals(1.0, (registry.requests("404") ?: fail(h.metrics())).count())
            assertEquals(1.0, registry.find("harness_errors_total").tags("service", "svc").functionCounter()!!.count())
        }
    }

    @Test
    fun `reads are cached for the ttl, and refresh reads now`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_micrometer_cache", listOf(mapOf("status" to 200)))
        client("kotlin-micrometer-cache").use { h ->
            h.get("svc", "/s/kt_micrometer_cache/a", endpoint = "/items")
            val registry = SimpleMeterRegistry()
            val binder = HarnessMeterBinder(h, Duration.ofHours(1))
            binder.bindTo(registry)
            val ok = registry.requests("200")!!
            assertEquals(1.0, ok.count())
            h.get("svc", "/s/kt_micrometer_cache/a", endpoint = "/items")
            assertEquals(1.0, ok.count(), "within the ttl the last read stands")
            binder.refresh()
            assertEquals(2.0, ok.count())

            // One binder, two registries: both see the same series.
            val other = SimpleMeterRegistry()
            binder.bindTo(other)
            assertEquals(2.0, other.requests("200")!!.count())
        }
    }

    @Test
    fun `a closed client keeps its last values`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_micrometer_closed", listOf(mapOf("status" to 200)))
        val registry = SimpleMeterRegistry()
        client("kotlin-micrometer-closed").use { h ->
            h.get("svc", "/s/kt_micrometer_closed/a", endpoint = "/items")
            HarnessMeterBinder(h, Duration.ZERO).bindTo(registry)
        }
        assertEquals(1.0, registry.requests("200")!!.count())
    }

    @Test
    fun `the text parser reads OpenMetrics and 0_0_4 text, escapes included`() {
        val text = """
            # HELP harness_requests Requests completed.
            # TYPE harness_requests counter
            harness_requests_total{service="a\"b",endpoint="/x\\y",method="GET",status="200"} 3
            harness_requests_created{service="a"} 1.7e9
            # TYPE harness_request_duration_seconds histogram
            harness_request_duration_seconds_sum{service="a"} 0.25
            harness_request_duration_seconds_count{service="a"} 4
            harness_request_duration_seconds_bucket{le="+Inf",service="a"} 4
            # TYPE harness_bulkhead_permits_in_use gauge
            harness_bulkhead_permits_in_use{service="a"} 2
            # TYPE old_style_total counter
            old_style_total 5
            untyped_thing{x="line\nbreak"} NaN
            not a sample line
            # EOF
        """.trimIndent()
        val got = PrometheusText.parse(text).map { Triple(it.key.name, it.kind, it.value) }
        assertEquals(
            listOf(
                Triple("harness_requests_total", SeriesKind.COUNTER, 3.0),
                Triple("harness_request_duration_seconds_sum", SeriesKind.COUNTER, 0.25),
                Triple("harness_request_duration_seconds_count", SeriesKind.COUNTER, 4.0),
                Triple("harness_bulkhead_permits_in_use", SeriesKind.GAUGE, 2.0),
                Triple("old_style_total", SeriesKind.COUNTER, 5.0),
                Triple("untyped_thing", SeriesKind.GAUGE, Double.NaN),
            ),
            got,
        )
        val first = PrometheusText.parse(text).first()
        assertEquals(listOf("service" to "a\"b", "endpoint" to "/x\\y", "method" to "GET", "status" to "200"), first.key.labels)
        assertEquals("Requests completed.", first.help)
        assertEquals(listOf("x" to "line\nbreak"), PrometheusText.parse(text).last().key.labels)
    }
}
