package dev.harness

import ch.qos.logback.classic.Level
import ch.qos.logback.classic.Logger
import ch.qos.logback.classic.spi.ILoggingEvent
import ch.qos.logback.core.read.ListAppender
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.filterIsInstance
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.yield
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.slf4j.LoggerFactory
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** Reload, file watching, streaming, events and SLF4J: the live engine through the Kotlin API. */
class LiveEngineTest {
    private fun config(vararg svc: Pair<String, Any?>, log: Map<String, Any?> = mapOf("enabled" to false)): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-live"),
        "log" to log,
        "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url) + svc),
    )

    /** Polls [cond] every 5 ms for up to [ms]; false if it never held. */
    private suspend fun eventually(ms: Long, cond: () -> Boolean): Boolean {
        val until = System.nanoTime() + ms * 1_000_000
        while (!cond()) {
            if (System.nanoTime() > until) return false
            delay(5)
        }
        return true
    }

    private suspend fun permitsBackToZero(h: HarnessClient) =
        assertTrue(eventually(1_000) { h.bulkheadInUse("svc") == 0 }, "a permit is still held: ${h.bulkheadInUse("svc")}")

    @Test
    fun `reload from a map applies the new config and a bad one keeps the old`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_reload", listOf(mapOf("status" to 200)))
        HarnessClient(config("headers" to mapOf("x-config" to "one"))).use { h ->
            val v1 = h.configVersion
            assertEquals(v1, h.configVersion, "the version is stable")
            h.get("svc", "/s/kt_reload/a")
            val v2 = h.reload(config("headers" to mapOf("x-config" to "two")))
            assertNotEquals(v1, v2)
            assertEquals(v2, h.configVersion)
            h.get("svc", "/s/kt_reload/a")
            val sent = TestUpstream.log("kt_reload").getJSONArray("requests")
            assertEquals("one", sent.getJSONObject(0).getJSONObject("headers").getString("x-config"))
            assertEquals("two", sent.getJSONObject(1).getJSONObject("headers").getString("x-config"))

            val e = assertThrows<HarnessException.Config> { h.reload(config("retry" to mapOf("max_retries" to -1))) }
            assertTrue(e.reason.startsWith("services.svc.retry.max_retries"), e.reason)
            assertEquals(v2, h.configVersion, "an invalid reload leaves the old config in force")
            // The same config gives the same version, in any client.
            HarnessClient(config("headers" to mapOf("x-config" to "two"))).use { other -> assertEquals(v2, other.configVersion) }

            // From a file, as the constructor takes it.
            val f = Files.createTempFile("harness-reload", ".json")
            try {
                Files.writeString(f, """{"client":{"name":"kotlin-live"},"log":{"enabled":false},"services":{"svc":{"base_url":"${TestUpstream.url}"}}}""")
                val v3 = h.reload(f)
                assertNotEquals(v2, v3)
                assertEquals(v3, h.reloadFile(f.toString()))
                assertThrows<HarnessException.Config> { h.reload(Path.of("/nonexistent/harness.yaml")) }
                assertEquals(v3, h.configVersion)
            } finally {
                Files.delete(f)
            }
        }
    }

    @Test
    fun `reloadJson with text that does not parse is a rejected reload in the engine`() = runBlocking<Unit> {
        HarnessClient(config()).use { h ->
            val events = CopyOnWriteArrayList<HarnessEvent>()
            h.addListener { events += it }
            val v1 = h.configVersion
            val rejected = Regex("""(?m)^harness_config_reloads_total\{result="rejected"\} (\d+)""")
            fun rejectedCount() = rejected.find(h.metrics())?.groupValues?.get(1)?.toInt() ?: 0
            assertEquals(0, rejectedCount())

            val e = assertThrows<HarnessException.Config> { h.reloadJson("""{"services": {"svc": """) }
            assertTrue(e.reason.startsWith("config: cannot parse json"), e.reason)
            assertEquals(v1, h.configVersion)
            assertEquals(1, rejectedCount(), h.metrics())
            // A parseable but invalid one still names the field.
            val bad = assertThrows<HarnessException.Config> { h.reloadJson("""{"services": {"svc": {"base_url": 1}}}""") }
            assertTrue(bad.reason.startsWith("services.svc.base_url"), bad.reason)
            assertEquals(2, rejectedCount(), h.metrics())

            h.flush()
            val seen = events.filterIsInstance<HarnessEvent.ConfigRejected>()
            assertEquals(2, seen.size, "$events")
            assertTrue(seen[0].error.contains("cannot parse json"), seen[0].error)
            assertEquals(v1, seen[0].version)
        }
    }

    @Test
    fun `a removed listener receives no further events`() = runBlocking<Unit> {
        HarnessClient(config()).use { h ->
            val removed = AtomicInteger()
            val kept = AtomicInteger()
            val handle = h.addListener { if (it is HarnessEvent.RequestFinished) removed.incrementAndGet() }
            h.addListener { if (it is HarnessEvent.RequestFinished) kept.incrementAndGet() }
            assertEquals(200, h.get("svc", "/bench").status)
            h.flush()
            assertEquals(1, removed.get())

            assertTrue(handle.remove())
            assertFalse(handle.remove(), "already removed")
            handle.close() // harmless again
            repeat(3) { assertEquals(200, h.get("svc", "/bench").status) }
            h.flush()
            assertEquals(1, removed.get(), "the removed listener was called again")
            assertEquals(4, kept.get(), "the other listener keeps receiving events")

            // `use` / try-with-resources removes it at the end of the block.
            val scoped = AtomicInteger()
            h.addListener { if (it is HarnessEvent.RequestFinished) scoped.incrementAndGet() }.use {
                assertEquals(200, h.get("svc", "/bench").status)
                h.flush()
            }
            assertEquals(200, h.get("svc", "/bench").status)
            h.flush()
            assertEquals(1, scoped.get())
        }
        // Removing after the client is closed is harmless.
        HarnessClient(config()).let { h -> val l = h.addListener { }; h.close(); l.close() }
    }

    @Test
    fun `a watched file reloads when it changes and an invalid edit keeps the old config`() = runBlocking<Unit> {
        val dir = Files.createTempDirectory("harness-watch")
        val file = dir.resolve("harness.json")
        fun write(text: String) {
            // Atomically, as config managers do, so the watcher never reads half a file.
            val tmp = dir.resolve("harness.json.tmp")
            Files.writeString(tmp, text)
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING)
        }
        fun cfg(retries: Any) =
            """{"log":{"enabled":false},"services":{"svc":{"base_url":"${TestUpstream.url}","retry":{"max_retries":$retries}}}}"""
        try {
            write(cfg(1))
            HarnessClient.fromFile(file, watch = true).use { h ->
                val events = CopyOnWriteArrayList<HarnessEvent>()
                h.addListener { events += it }
                val v1 = h.configVersion
                write(cfg(2))
                assertTrue(eventually(2_000) { h.configVersion != v1 }, "the edit was not applied within 2 s")
                val v2 = h.configVersion
                assertTrue(eventually(1_000) { events.any { it is HarnessEvent.ConfigReloaded && it.version == v2 } }, "$events")

                write(cfg("\"many\""))
                assertTrue(eventually(2_000) { events.any { it is HarnessEvent.ConfigRejected } }, "no config_rejected event: $events")
                val rejected = events.filterIsInstance<HarnessEvent.ConfigRejected>().first()
                assertEquals(v2, rejected.version)
                assertTrue(rejected.source.startsWith("file:"), rejected.source)
                assertTrue(rejected.error.contains("services.svc.retry.max_retries"), rejected.error)
                assertEquals(v2, h.configVersion, "an invalid edit leaves the old config in force")
                assertEquals(200, h.get("svc", "/bench").status)
            }
        } finally {
            dir.toFile().deleteRecursively()
        }
    }

    @Test
    fun `a stream is read as a Flow of chunks and an error status throws from stream`() = runBlocking<Unit> {
        TestUpstream.putScript(
            "kt_stream",
            listOf(mapOf("chunks" to listOf(mapOf("data" to "alpha;"), mapOf("data" to "beta;", "delay_ms" to 20), mapOf("data" to "gamma")))),
        )
        HarnessClient(config()).use { h ->
            h.stream("svc", "GET", "/s/kt_stream/x").use { s ->
                assertEquals(200, s.status)
                assertEquals("text/plain", s.header("Content-Type"))
                assertEquals(1, s.attempts)
                assertEquals(32, s.traceId.length)
                val chunks = s.body.toList()
                assertTrue(chunks.size >= 2, "read in pieces: ${chunks.size}")
                assertEquals("alpha;beta;gamma", chunks.joinToString("") { String(it) })
                // One collection only.
                assertThrows<IllegalStateException> { runBlocking { s.body.toList() } }
                assertThrows<IllegalStateException> { s.inputStream() }
            }
            permitsBackToZero(h)
        }
        TestUpstream.putScript("kt_stream_503", listOf(mapOf("status" to 503, "json" to mapOf("code" to "down"))))
        HarnessClient(config("retry" to mapOf("max_retries" to 0))).use { h ->
            val e = assertThrows<HarnessException.HttpStatus> { runBlocking { h.stream("svc", "GET", "/s/kt_stream_503/x") } }
            assertEquals(503, e.status)
            assertEquals("down", e.code)
            permitsBackToZero(h)
        }
    }

    @Test
    fun `stopping a stream early releases its permit`() = runBlocking<Unit> {
        TestUpstream.putScript(
            "kt_stream_early",
            listOf(mapOf("chunks" to listOf(mapOf("data" to "one;"), mapOf("data" to "two;", "delay_ms" to 5_000)))),
        )
        HarnessClient(config()).use { h ->
            val s = h.stream("svc", "GET", "/s/kt_stream_early/x")
            assertEquals(1, h.bulkheadInUse("svc"), "an open stream holds its permit")
            val start = System.nanoTime()
            assertEquals("one;", String(s.body.first()))
            assertTrue((System.nanoTime() - start) / 1_000_000 < 2_000, "first() waited for the rest of the body")
            permitsBackToZero(h)
            assertEquals("closed", h.breakerState("svc", "GET", "/s/kt_stream_early/x"), "stopping is not a failure")

            // Closing a stream that was never read releases it too.
            h.stream("svc", "GET", "/s/kt_stream_early/y").close()
            permitsBackToZero(h)
            // And a collector that throws.
            val s3 = h.stream("svc", "GET", "/s/kt_stream_early/z")
            assertThrows<IllegalArgumentException> { runBlocking { s3.body.collect { throw IllegalArgumentException("stop") } } }
            permitsBackToZero(h)
        }
    }

    @Test
    fun `cancelling the coroutine cancels the stream, while reading and while opening`() = runBlocking<Unit> {
        TestUpstream.putScript(
            "kt_stream_cancel",
            listOf(mapOf("chunks" to listOf(mapOf("data" to "first;"), mapOf("data" to "late", "delay_ms" to 10_000)))),
        )
        HarnessClient(config("timeouts" to mapOf("idle_ms" to 60_000, "request_ms" to 60_000))).use { h ->
            val got = CompletableDeferred<Unit>()
            val reading = launch(Dispatchers.Default) {
                h.stream("svc", "GET", "/s/kt_stream_cancel/x").body.collect { got.complete(Unit) }
            }
            withTimeout(5_000) { got.await() }
            // The collector now waits for a chunk that is 10 s away.
            delay(50)
            assertEquals(1, h.bulkheadInUse("svc"))
            reading.cancelAndJoin()
            permitsBackToZero(h)
        }
        TestUpstream.putScript("kt_stream_hang", listOf(mapOf("action" to "hang")))
        HarnessClient(config("timeouts" to mapOf("response_ms" to 60_000, "request_ms" to 60_000))).use { h ->
            repeat(20) {
                val opening = async(Dispatchers.Default) { h.stream("svc", "GET", "/s/kt_stream_hang/x") }
                assertTrue(eventually(5_000) { h.bulkheadInUse("svc") == 1 })
                opening.cancel()
                assertThrows<CancellationException> { runBlocking { opening.await() } }
                permitsBackToZero(h)
            }
        }
    }

    @Test
    fun `events arrive as a Flow with named fields`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_events", listOf(mapOf("status" to 503), mapOf("status" to 200)))
        HarnessClient(config("retry" to mapOf("max_retries" to 1, "base_delay_ms" to 1, "max_delay_ms" to 1))).use { h ->
            val finished = async { h.events.filterIsInstance<HarnessEvent.RequestFinished>().first() }
            val retried = async { h.events.filterIsInstance<HarnessEvent.RetryScheduled>().first() }
            val reloaded = async { h.events.filterIsInstance<HarnessEvent.ConfigReloaded>().first() }
            yield() // let the collectors subscribe
            delay(50)
            val r = h.get("svc", "/s/kt_events/orders/7")
            assertEquals(200, r.status)
            val v = h.reload(config("retry" to mapOf("max_retries" to 2)))
            withTimeout(5_000) {
                val f = finished.await()
                assertEquals("request_finished", f.type)
                assertEquals("svc", f.service)
                assertEquals("/s/kt_events/orders/{id}", f.endpoint)
                assertEquals("GET", f.method)
                assertEquals(200, f.status)
                assertEquals(2, f.attempts)
                assertEquals(1, f.retryCount)
                assertEquals(r.traceId, f.traceId)
                assertEquals("kotlin-live", f.client)
                assertFalse(f.streamed)
                assertNull(f.errorKind)
                assertEquals(f.traceId, f.fields()["trace_id"])
                val t = retried.await()
                assertEquals(1, t.attempt)
                assertEquals("HttpStatusError", t.reason)
                assertEquals(503, t.status)
                val c = reloaded.await()
                assertEquals(v, c.version)
                assertEquals("api", c.source)
            }
        }
    }

    @Test
    fun `a listener that throws never fails a request and keeps receiving events`() = runBlocking<Unit> {
        HarnessClient(config()).use { h ->
            val thrown = AtomicInteger()
            val seen = AtomicInteger()
            val threads = CopyOnWriteArrayList<String>()
            h.addListener { thrown.incrementAndGet(); throw IllegalStateException("listener bug") }
            h.addListener {
                threads += Thread.currentThread().name
                if (it is HarnessEvent.RequestFinished) seen.incrementAndGet()
            }
            repeat(5) { assertEquals(200, h.get("svc", "/bench").status) }
            h.flush()
            assertEquals(5, seen.get())
            assertEquals(5, thrown.get(), "the failing listener is still called")
            // The client's own event thread, never a request's (engine worker) thread.
            assertEquals(setOf("harness-events"), threads.toSet())
        }
    }

    @Test
    fun `caller code after a call runs on the caller's dispatcher or the future's executor, never on the outcome thread`() = runBlocking<Unit> {
        HarnessClient(config()).use { h ->
            val threads = CopyOnWriteArrayList<String>()
            repeat(20) {
                // A suspend call resumes on its caller's dispatcher.
                withContext(Dispatchers.IO) {
                    assertEquals(200, h.get("svc", "/bench").status)
                    threads += Thread.currentThread().name
                }
                // A future's dependent stage (not an ...Async one) runs where the future completed.
                h.requestAsync(HarnessRequest("svc", "GET", "/bench")).thenApply { threads += Thread.currentThread().name }.get(10, TimeUnit.SECONDS)
            }
            assertEquals(40, threads.size)
            assertTrue(threads.none { it.startsWith("harness-outcomes") || it.startsWith("harness-worker") }, "$threads")
        }
    }

    @Test
    fun `log sink slf4j sends each request record to dev harness with its fields`() = runBlocking<Unit> {
        val logger = LoggerFactory.getLogger("dev.harness") as Logger
        val appender = ListAppender<ILoggingEvent>().apply { start() }
        logger.addAppender(appender)
        try {
            TestUpstream.putScript("kt_slf4j", listOf(mapOf("status" to 200), mapOf("status" to 404, "json" to mapOf("code" to "missing"))))
            HarnessClient(config("retry" to mapOf("max_retries" to 0), log = mapOf("sink" to "slf4j"))).use { h ->
                val ok = h.get("svc", "/s/kt_slf4j/a")
                assertThrows<HarnessException.HttpStatus> { runBlocking { h.get("svc", "/s/kt_slf4j/b") } }
                h.flush()
                val records = appender.list.toList()
                assertEquals(2, records.size, "$records")
                val (info, warn) = records
                assertEquals(Level.INFO, info.level)
                val kv = info.keyValuePairs.associate { it.key to it.value }
                assertEquals("svc", kv["service"])
                assertEquals("GET", kv["method"])
                assertEquals(200L, kv["status"], "numbers are Long, as fields() gives them")
                assertEquals(ok.traceId, kv["trace_id"])
                assertEquals("kotlin-live", kv["client"])
                assertTrue(info.formattedMessage.contains("GET svc"), info.formattedMessage)
                assertEquals(Level.WARN, warn.level)
                val wkv = warn.keyValuePairs.associate { it.key to it.value }
                assertEquals("HttpStatusError", wkv["error_kind"])
                assertEquals("missing", wkv["error_code"])
                assertEquals(404L, wkv["status"])
            }
            // The default sink (stderr) sends nothing to SLF4J.
            appender.list.clear()
            HarnessClient(config(log = mapOf("enabled" to true))).use { h ->
                h.get("svc", "/bench")
                h.flush()
            }
            assertEquals(0, appender.list.size)
        } finally {
            logger.detachAppender(appender)
        }
    }
}
