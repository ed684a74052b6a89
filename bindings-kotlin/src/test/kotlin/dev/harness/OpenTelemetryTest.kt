package dev.harness

import io.opentelemetry.api.trace.Span
import io.opentelemetry.context.Context
import io.opentelemetry.sdk.trace.ReadWriteSpan
import io.opentelemetry.sdk.trace.ReadableSpan
import io.opentelemetry.sdk.trace.SdkTracerProvider
import io.opentelemetry.sdk.trace.SpanProcessor
import io.opentelemetry.sdk.trace.samplers.Sampler
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.util.concurrent.TimeUnit

/**
 * The host's active OpenTelemetry span is the parent of Harness's span: a real SDK tracer
 * provider starts the span, the loopback upstream shows the `traceparent` Harness sent, and
 * its OTLP receiver the spans the engine exported (`otel.endpoint`).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OpenTelemetryTest {
    // An SDK with no span processor hands out no-op tracers: keep one that records nothing.
    private val keep = object : SpanProcessor {
        override fun onStart(parentContext: Context, span: ReadWriteSpan) {}
        override fun isStartRequired() = false
        override fun onEnd(span: ReadableSpan) {}
        override fun isEndRequired() = false
    }
    private val provider = SdkTracerProvider.builder().addSpanProcessor(keep).build()
    private val tracer = provider.get("harness-tests")

    @AfterAll
    fun shutdown() {
        provider.shutdown()
    }

    private fun client() = HarnessClient(
        mapOf(
            "client" to mapOf("name" to "kotlin-otel"),
            "log" to mapOf("enabled" to false),
            "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url, "retry" to mapOf("max_retries" to 0))),
        ),
    )

    /** Runs [block] with a new span of [t] current on this thread; returns the span's context too. */
    private inline fun <T> inSpan(t: io.opentelemetry.api.trace.Tracer = tracer, block: () -> T): Pair<io.opentelemetry.api.trace.SpanContext, T> {
        val span = t.spanBuilder("checkout").startSpan()
        try {
            return span.makeCurrent().use { span.spanContext to block() }
        } finally {
            span.end()
        }
    }

    /** The (trace id, span id, flags) of the `traceparent` the upstream saw on request [i] of [script]. */
    private fun sent(script: String, i: Int = 0): List<String> {
        val tp = TestUpstream.log(script).getJSONArray("requests").getJSONObject(i).getJSONObject("headers").getString("traceparent")
        val parts = tp.split("-")
        assertEquals(4, parts.size, tp)
        assertEquals("00", parts[0], tp)
        return parts.drop(1)
    }

    @Test
    fun `a request inside the host's span continues its trace as a child`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_parent", listOf(mapOf("status" to 200)))
        client().use { h ->
            val (host, r) = inSpan { h.get("svc", "/s/kt_otel_parent/a") }
            val (trace, span, flags) = sent("kt_otel_parent")
            assertEquals(host.traceId, trace)
            assertNotEquals(host.spanId, span, "Harness's span is a child, not the host's span itself")
            assertEquals("01", flags)
            assertEquals(host.traceId, r.traceId)
        }
    }

    /** The exported spans of [traceId], once at least [want] of them have reached the upstream (batched: up to ~5 s). */
    private fun exported(traceId: String, want: Int): List<org.json.JSONObject> {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (true) {
            val spans = TestUpstream.otlpSpans().filter { it.getString("trace_id") == traceId }
            if (spans.size >= want || System.nanoTime() > deadline) return spans
            Thread.sleep(50)
        }
    }

    @Test
    fun `with otel endpoint the engine exports a client span under the host's span and a child per attempt`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_export", listOf(mapOf("status" to 503), mapOf("status" to 200, "json" to mapOf("ok" to true))))
        HarnessClient(
            mapOf(
                "client" to mapOf("name" to "kotlin-otel"),
                "log" to mapOf("enabled" to false),
                "otel" to mapOf("endpoint" to TestUpstream.url, "sample_ratio" to 1.0, "service_name" to "kotlin-otel-export", "delay_ms" to 50),
                "services" to mapOf(
                    "svc" to mapOf(
                        "base_url" to TestUpstream.url,
                        "retry" to mapOf("max_retries" to 1, "base_delay_ms" to 1, "max_delay_ms" to 2, "jitter" to false),
                    ),
                ),
            ),
        ).use { h ->
            val (host, r) = inSpan { h.get("svc", "/s/kt_otel_export/7", endpoint = "/s/kt_otel_export/{id}") }
            assertEquals(2, r.attempts)
            val spans = exported(host.traceId, 3)
            val root = spans.singleOrNull { it.getString("parent_span_id") == host.spanId }
                ?: error("no exported span is the host span's child: $spans")
            assertEquals(host.traceId, root.getString("trace_id"))
            assertEquals(3, root.getInt("kind"), "a client span")
            assertEquals("GET /s/kt_otel_export/{id}", root.getString("name"))
            assertEquals("kotlin-otel-export", root.getString("service_name"))
            val a = root.getJSONObject("attributes")
            assertEquals("svc", a.getString("harness.service"))
            assertEquals("/s/kt_otel_export/{id}", a.getString("harness.endpoint"))
            assertEquals(2, a.getInt("harness.attempts"))
            assertEquals(200, a.getInt("http.response.status_code"))

            val attempts = spans.filter { it.getString("parent_span_id") == root.getString("span_id") }
                .sortedBy { it.getJSONObject("attributes").getInt("harness.attempt") }
            assertEquals(listOf(1, 2), attempts.map { it.getJSONObject("attributes").getInt("harness.attempt") }, "one child span per attempt: $spans")
            assertEquals(listOf(503, 200), attempts.map { it.getJSONObject("attributes").getInt("http.response.status_code") })
            // Each attempt went downstream as its own span of the host's trace.
            assertEquals(attempts.map { it.getString("span_id") }, (0..1).map { sent("kt_otel_export", it)[1] })
        }
    }

    @Test
    fun `an error inside the host's span carries its trace id`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_error", listOf(mapOf("status" to 503)))
        client().use { h ->
            val (host, e) = inSpan { assertThrows<HarnessException> { h.get("svc", "/s/kt_otel_error/a") } }
            assertEquals(host.traceId, e.traceId)
            assertEquals(host.traceId, sent("kt_otel_error")[0])
        }
    }

    @Test
    fun `outside any span the trace is fresh`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_none", listOf(mapOf("status" to 200)))
        client().use { h ->
            val (host, _) = inSpan { h.get("svc", "/s/kt_otel_none/a") }
            assertTrue(!Span.current().spanContext.isValid)
            val r = h.get("svc", "/s/kt_otel_none/a")
            assertEquals(32, r.traceId.length)
            assertNotEquals(host.traceId, r.traceId)
            assertEquals(r.traceId, sent("kt_otel_none", 1)[0])
        }
    }

    @Test
    fun `an explicit traceparent wins over the host's span, as option or header`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_explicit", listOf(mapOf("status" to 200)))
        val mine = "4bf92f3577b34da6a3ce929d0e0e4736"
        val other = "0af7651916cd43dd8448eb211c80319c"
        client().use { h ->
            val (host, rs) = inSpan {
                listOf(
                    h.get("svc", "/s/kt_otel_explicit/a", traceparent = "00-$mine-00f067aa0ba902b7-01"),
                    h.get("svc", "/s/kt_otel_explicit/a", headers = mapOf("TraceParent" to "00-$other-00f067aa0ba902b7-01")),
                    h.request(HarnessRequest("svc", "GET", "/s/kt_otel_explicit/a").withAddedHeader("traceparent", "00-$other-00f067aa0ba902b7-01")),
                )
            }
            assertEquals(listOf(mine, other, other), rs.map { it.traceId })
            assertEquals(listOf(mine, other, other), (0..2).map { sent("kt_otel_explicit", it)[0] })
            assertTrue(rs.none { it.traceId == host.traceId })
        }
    }

    @Test
    fun `an unsampled host span sends the unsampled flag`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_unsampled", listOf(mapOf("status" to 200)))
        val off = SdkTracerProvider.builder().addSpanProcessor(keep).setSampler(Sampler.alwaysOff()).build()
        try {
            client().use { h ->
                val (host, r) = inSpan(off.get("harness-tests")) { h.get("svc", "/s/kt_otel_unsampled/a") }
                assertTrue(host.isValid && !host.isSampled)
                assertEquals(host.traceId, r.traceId)
                assertEquals(listOf(host.traceId, "00"), sent("kt_otel_unsampled").let { listOf(it[0], it[2]) })
            }
        } finally {
            off.shutdown()
        }
    }

    @Test
    fun `streams, Java futures and chat calls take the host's span too`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_otel_more", listOf(mapOf("status" to 200, "body" to "streamed")))
        TestUpstream.putProvider("kt_otel_chat", mapOf("reset" to true))
        HarnessClient(
            mapOf(
                "client" to mapOf("name" to "kotlin-otel"),
                "log" to mapOf("enabled" to false),
                "services" to mapOf(
                    "svc" to mapOf("base_url" to TestUpstream.url),
                    "llm" to mapOf("base_url" to TestUpstream.llm("kt_otel_chat")),
                ),
                "routes" to mapOf(
                    "chat" to mapOf(
                        "adapter" to "openai-compatible",
                        "strategy" to "priority",
                        "providers" to listOf(mapOf("id" to "p", "service" to "llm", "model" to "m", "weight" to 100)),
                    ),
                ),
            ),
        ).use { h ->
            val hi = listOf(mapOf("role" to "user", "content" to "Hi"))
            val (host, ids) = inSpan {
                val s = h.stream("svc", "GET", "/s/kt_otel_more/a")
                val streamed = s.use { it.body.toList(); it.traceId }
                val future = h.requestAsync(HarnessRequest("svc", "GET", "/s/kt_otel_more/a")).get(10, TimeUnit.SECONDS).traceId
                val chat = h.chat("chat", hi).traceId
                val chatStream = h.openChatStream(ChatRequest("chat", hi)).use { c -> c.chunks.toList(); c.traceId }
                listOf(streamed, future, chat, chatStream)
            }
            assertEquals(List(4) { host.traceId }, ids)
            assertEquals(host.traceId, sent("kt_otel_more", 0)[0])
            assertEquals(host.traceId, sent("kt_otel_more", 1)[0])
        }
    }

    @Test
    fun `without the optional dependencies on the class path, requests work as before`() {
        TestUpstream.putScript("kt_otel_absent", listOf(mapOf("status" to 200)))
        val java = File(System.getProperty("java.home"), "bin/java").path
        val cp = System.getProperty("java.class.path").split(File.pathSeparator)
            .filterNot { File(it).name.startsWith("opentelemetry-") || File(it).name.startsWith("micrometer-") }
            .joinToString(File.pathSeparator)
        val child = ProcessBuilder(java, "-cp", cp, NoOpenTelemetryChild::class.java.name, TestUpstream.url, "/s/kt_otel_absent/a")
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start()
        val out = child.inputStream.bufferedReader().readText().trim()
        assertTrue(child.waitFor(60, TimeUnit.SECONDS))
        assertEquals(0, child.exitValue(), out)
        val (status, traceId) = out.lines().last().split(" ")
        assertEquals("200", status)
        assertEquals(traceId, sent("kt_otel_absent")[0])
    }
}

/** A JVM without opentelemetry-api or micrometer-core (OpenTelemetryTest): one GET of path args[1] on base URL args[0], prints `status trace_id`. */
object NoOpenTelemetryChild {
    @JvmStatic
    fun main(args: Array<String>) = runBlocking<Unit> {
        for (c in listOf("io.opentelemetry.api.trace.Span", "io.micrometer.core.instrument.MeterRegistry")) {
            check(runCatching { Class.forName(c) }.isFailure) { "$c is on this class path" }
        }
        HarnessClient(mapOf("log" to mapOf("enabled" to false), "services" to mapOf("svc" to mapOf("base_url" to args[0])))).use { h ->
            val r = h.get("svc", args[1])
            println("${r.status} ${r.traceId}")
        }
    }
}
