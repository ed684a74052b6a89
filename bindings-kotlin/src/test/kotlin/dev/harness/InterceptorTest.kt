package dev.harness

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.future.future
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.GlobalScope
import kotlinx.coroutines.DelicateCoroutinesApi
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger

/**
 * Host interceptors from Kotlin against the loopback upstream (mirrors core/tests/interceptors.rs):
 * what `before` changes reaches the upstream; an attempt interceptor runs on every attempt and an
 * application one once; `after` turns a 200 carrying an error code into a retried failure with
 * [Reject]; raising, hanging and hostile interceptors are [HarnessException.Interceptor]s that send
 * nothing and leave the client healthy; a blocking interceptor holds only its own calls.
 */
class InterceptorTest {
    private fun client(extra: Map<String, Any?> = emptyMap(), svc: Map<String, Any?> = emptyMap()) = HarnessClient(
        mapOf(
            "log" to mapOf("enabled" to false),
            "services" to mapOf(
                "svc" to mapOf("base_url" to TestUpstream.url, "retry" to mapOf("max_retries" to 3, "base_delay_ms" to 1, "max_delay_ms" to 5)) + svc,
                "other" to mapOf("base_url" to TestUpstream.url),
            ),
        ) + extra,
    )

    private fun script(name: String, vararg steps: Map<String, Any?>) = TestUpstream.putScript(name, steps.toList())

    private fun sent(name: String): List<JSONObject> = TestUpstream.log(name).getJSONArray("requests").let { a -> (0 until a.length()).map { a.getJSONObject(it) } }

    /** Records what each function saw and where it ran. */
    private class Recorder(
        override val name: String,
        override val level: InterceptorLevel? = null,
        private val changes: (InterceptedRequest) -> RequestChanges? = { null },
    ) : Interceptor {
        val requests = ConcurrentLinkedQueue<InterceptedRequest>()
        val responses = ConcurrentLinkedQueue<InterceptedResponse>()
        val threads = ConcurrentLinkedQueue<String>()

        override suspend fun before(request: InterceptedRequest): RequestChanges? {
            threads += Thread.currentThread().name
            requests += request
            return changes(request)
        }

        override suspend fun after(response: InterceptedResponse) {
            threads += Thread.currentThread().name
            responses += response
        }
    }

    @Test
    fun `before changes headers, query and body as the upstream sees them`() = runBlocking<Unit> {
        script("kt_icpt_chg", mapOf("json" to mapOf("ok" to true)))
        client().use { h ->
            val tenant = Recorder("tenant", Level.APPLICATION) { r ->
                RequestChanges(headers = mapOf("x-tenant" to "acme", "x-drop" to null), query = mapOf("region" to "eu"))
                    .withJson(mapOf("order" to 7, "tenant" to "acme"))
            }
            assertEquals("tenant", h.addInterceptor(tenant))
            val r = h.post("svc", "/s/kt_icpt_chg/orders", json = mapOf("order" to 7), query = mapOf("page" to "2"), headers = mapOf("x-drop" to "1"))
            assertEquals(200, r.status)

            // What before saw: the parsed body and the caller's header.
            val seen = tenant.requests.single()
            assertEquals(JsonObject(mapOf("order" to JsonPrimitive(7))), seen.json)
            assertTrue(seen.headers.contains("x-drop" to "1"), "${seen.headers}")
            assertEquals(listOf("page" to "2"), seen.query)
            assertEquals("{\"order\":7}", seen.body!!.decodeToString())
            assertEquals(Level.APPLICATION, seen.level)
            assertNull(seen.attempt)

            val got = sent("kt_icpt_chg").single()
            assertEquals("acme", got.getJSONObject("headers").getString("x-tenant"))
            assertFalse(got.getJSONObject("headers").has("x-drop"))
            assertEquals("/s/kt_icpt_chg/orders?page=2&region=eu", got.getString("path"))
            assertEquals(mapOf("order" to 7, "tenant" to "acme"), JSONObject(got.getString("body")).toMap())

            // after saw the answer, without its body (not asked for).
            val answer = tenant.responses.single()
            assertEquals(200, answer.status)
            assertNull(answer.bodyBase64)
            assertEquals(r.traceId, answer.traceId)

            // Kotlin code never runs on the engine's threads.
            assertTrue(tenant.threads.none { it.startsWith("harness-worker") }, "${tenant.threads}")

            // Bytes as the new body.
            h.addInterceptor(Recorder("tenant") { RequestChanges().withBody(byteArrayOf(1, 2, 3)) })
            h.post("svc", "/s/kt_icpt_chg/raw", body = "abc".toByteArray())
            assertEquals(3, sent("kt_icpt_chg")[1].getInt("body_len"))

            // Removed: the next call goes out as the caller made it.
            assertTrue(h.removeInterceptor("tenant"))
            assertFalse(h.removeInterceptor("tenant"))
            h.get("svc", "/s/kt_icpt_chg/plain")
            assertFalse(sent("kt_icpt_chg")[2].getJSONObject("headers").has("x-tenant"))
        }
    }

    @Test
    fun `an attempt interceptor runs on every retry and an application one once`() = runBlocking<Unit> {
        script("kt_icpt_lvl", mapOf("status" to 503, "times" to 2), mapOf("json" to mapOf("ok" to true)))
        client().use { h ->
            val app = Recorder("app", Level.APPLICATION)
            val perAttempt = Recorder("per-attempt", Level.ATTEMPT) { r -> RequestChanges(headers = mapOf("x-attempt" to r.attempt.toString())) }
            h.addInterceptor(app)
            h.addInterceptor(perAttempt)
            val r = h.get("svc", "/s/kt_icpt_lvl/x")
            assertEquals(200 to 3, r.status to r.attempts)
            assertEquals(1 to 1, app.requests.size to app.responses.size)
            assertEquals(listOf(1, 2, 3), perAttempt.requests.map { it.attempt })
            assertEquals(listOf("1", "2", "3"), sent("kt_icpt_lvl").map { it.getJSONObject("headers").getString("x-attempt") })
            // after runs on the answers an attempt accepted (the 503s are errors, not answers).
            assertEquals(1, perAttempt.responses.size)
        }
        // The config may set the level by name.
        script("kt_icpt_lvl", mapOf("status" to 503, "times" to 2), mapOf("json" to mapOf("ok" to true)))
        client(mapOf("interceptors" to mapOf("levels" to mapOf("per-attempt" to "application")))).use { h ->
            val perAttempt = Recorder("per-attempt", Level.ATTEMPT)
            h.addInterceptor(perAttempt)
            assertEquals(3, h.get("svc", "/s/kt_icpt_lvl/x").attempts)
            assertEquals(1, perAttempt.requests.size)
        }
    }

    /** A partner that answers errors with 200 and an error code in the body. */
    private val partner = interceptor("partner", level = Level.ATTEMPT, wantBody = true, after = { r ->
        when (val code = (r.json as? JsonObject)?.get("errCode")?.jsonPrimitive?.content) {
            null -> {}
            "BUSY" -> throw Reject("partner busy", retryable = true, code = "BUSY")
            else -> throw Reject("partner error $code", code = code)
        }
    })

    @Test
    fun `Reject turns a 200 with an error code into a retried failure, or a final one`() = runBlocking<Unit> {
        client().use { h ->
            h.addInterceptor(partner)
            script("kt_icpt_busy", mapOf("json" to mapOf("errCode" to "BUSY")), mapOf("json" to mapOf("result" to 1)))
            val r = h.get("svc", "/s/kt_icpt_busy/x")
            assertEquals(200 to 2, r.status to r.attempts)
            assertEquals(2, sent("kt_icpt_busy").size)

            // Always busy: retried up to max_retries, then the error with the Reject's code.
            script("kt_icpt_busy2", mapOf("json" to mapOf("errCode" to "BUSY")))
            val e = assertThrows<HarnessException.Interceptor> { h.get("svc", "/s/kt_icpt_busy2/x") }
            assertEquals(Triple("BUSY", 200, 4), Triple(e.code, e.status, e.attempts))
            assertTrue(e.message!!.contains("interceptor `partner` after") && e.message!!.contains("partner busy"), e.message)

            // Not retryable: one attempt.
            script("kt_icpt_denied", mapOf("json" to mapOf("errCode" to "DENIED")))
            val d = assertThrows<HarnessException.Interceptor> { h.get("svc", "/s/kt_icpt_denied/x") }
            assertEquals("DENIED" to 1, d.code to d.attempts)

            // A POST is not resent after a rejected answer (it was executed).
            script("kt_icpt_post", mapOf("json" to mapOf("errCode" to "BUSY")), mapOf("json" to mapOf("ok" to 1)))
            assertEquals(1, assertThrows<HarnessException.Interceptor> { h.post("svc", "/s/kt_icpt_post/x") }.attempts)
        }
    }

    @Test
    fun `raising, hanging and hostile interceptors are InterceptorErrors that send nothing`() = runBlocking<Unit> {
        script("kt_icpt_h", mapOf("json" to mapOf("ok" to true)))
        class Case(val name: String, val code: String, val text: String, val before: suspend (InterceptedRequest) -> RequestChanges?)
        val cases = listOf(
            Case("raises", "raised", "IllegalStateException: no tenant in context") { throw IllegalStateException("no tenant in context") },
            Case("rejects-early", "raised", "Reject: not here") { throw Reject("not here") },
            Case("hangs", "timeout", "did not return within 200 ms") { delay(5_000); null },
            Case("blocks", "timeout", "did not return within 200 ms") { Thread.sleep(1_000); null },
            Case("framing", "invalid", "headers.content-length") { RequestChanges(headers = mapOf("content-length" to "5")) },
            Case("host", "invalid", "headers.Host") { RequestChanges(headers = mapOf("Host" to "evil.example")) },
            Case("escape", "invalid", "path") { RequestChanges(path = "/s/kt_icpt_h/../../__admin/log/kt_icpt_h") },
            Case("crlf", "invalid", "headers.x-a") { RequestChanges(headers = mapOf("x-a" to "1\r\nx-b: 2")) },
            Case("huge", "invalid", "limits.max_request_bytes") { RequestChanges().withBody(ByteArray(4096)) },
        )
        client(mapOf("interceptors" to mapOf("timeout_ms" to 200)), mapOf("limits" to mapOf("max_request_bytes" to 1024))).use { h ->
            for (level in listOf(Level.APPLICATION, Level.ATTEMPT)) {
                for (c in cases) {
                    val name = c.name
                    h.addInterceptor(interceptor(name, level = level, before = c.before))
                    val t = System.nanoTime()
                    val e = assertThrows<HarnessException.Interceptor>("$name $level") { h.get("svc", "/s/kt_icpt_h/x") }
                    assertEquals(c.code, e.code, "$name: $e")
                    assertTrue(e.message!!.contains("interceptor `$name` before: ") && e.message!!.contains(c.text), "$name: ${e.message}")
                    assertTrue((System.nanoTime() - t) / 1_000_000 < 2_000, "$name took too long")
                    assertEquals(0, e.attempts, "$name: nothing was sent")
                    assertTrue(h.removeInterceptor(name))
                }
            }
            assertTrue(sent("kt_icpt_h").isEmpty(), "no refused call reached the upstream")
            // The client stays healthy: nothing held, the next call goes through.
            assertEquals(200, h.get("svc", "/s/kt_icpt_h/x").status)
            assertEquals(0, h.bulkheadInUse("svc"))
            assertEquals("closed", h.breakerState("svc", "GET", "/s/kt_icpt_h/x"))

            // A throwing after fails the call and says so.
            h.addInterceptor(interceptor("after-raises", after = { throw NoSuchElementException("x") }))
            val e = assertThrows<HarnessException.Interceptor> { h.get("svc", "/s/kt_icpt_h/x") }
            assertEquals("raised", e.code)
            assertTrue(e.message!!.contains("interceptor `after-raises` after: raised NoSuchElementException: x"), e.message)
        }
    }

    @Test
    fun `a blocking interceptor holds only its own calls, and suspend ones run side by side`() = runBlocking<Unit> {
        script("kt_icpt_slow", mapOf("json" to mapOf("ok" to true)))
        client(mapOf("interceptors" to mapOf("timeout_ms" to 5_000))).use { h ->
            // A plain blocking call (Thread.sleep) in before, on calls to `svc` only.
            h.addInterceptor(interceptor("slow", services = listOf("svc"), before = { Thread.sleep(1_000); null }))
            val t = System.nanoTime()
            fun ms() = (System.nanoTime() - t) / 1_000_000
            val slow = (0 until 8).map { async { h.get("svc", "/s/kt_icpt_slow/x").status.also { assertTrue(ms() >= 1_000, "a slow call finished at ${ms()} ms") } } }
            // Calls to another service are not held up by it.
            repeat(20) { assertEquals(200, h.get("other", "/s/kt_icpt_slow/y").status) }
            val others = ms()
            assertTrue(others < 900, "the other service's calls took $others ms")
            assertEquals(List(8) { 200 }, slow.awaitAll())
            assertTrue(ms() < 2_500, "the blocking calls ran side by side: ${ms()} ms")

            // The suspend form: a delay, not a thread, per call.
            h.removeInterceptor("slow")
            h.addInterceptor(interceptor("nap", before = { delay(300); RequestChanges(headers = mapOf("x-napped" to "yes")) }))
            val t2 = System.nanoTime()
            val naps = (0 until 16).map { async { h.get("svc", "/s/kt_icpt_slow/z").status } }.awaitAll()
            assertEquals(List(16) { 200 }, naps)
            assertTrue((System.nanoTime() - t2) / 1_000_000 < 1_500, "16 suspend interceptors ran side by side")
            assertEquals("yes", sent("kt_icpt_slow").last().getJSONObject("headers").getString("x-napped"))
        }
    }

    @OptIn(DelicateCoroutinesApi::class)
    @Test
    fun `the future form changes requests and rejects answers`() = runBlocking<Unit> {
        script("kt_icpt_future", mapOf("json" to mapOf("errCode" to "NOPE")), mapOf("json" to mapOf("ok" to true)))
        client().use { h ->
            val afterCalls = AtomicInteger()
            h.addInterceptorAsync(object : AsyncInterceptor {
                override val name = "futures"
                override val wantBody = true
                override fun beforeAsync(request: InterceptedRequest): CompletableFuture<RequestChanges?> =
                    GlobalScope.future { RequestChanges(headers = mapOf("x-future" to request.method)) }

                override fun afterAsync(response: InterceptedResponse): CompletableFuture<Void?> {
                    afterCalls.incrementAndGet()
                    val json = response.json?.jsonObject ?: return CompletableFuture.completedFuture(null)
                    return if (json.containsKey("errCode")) CompletableFuture.failedFuture(Reject("nope", code = "NOPE")) else CompletableFuture.completedFuture(null)
                }
            })
            val e = assertThrows<HarnessException.Interceptor> { h.get("svc", "/s/kt_icpt_future/x") }
            assertEquals("NOPE" to 1, e.code to e.attempts)
            assertEquals(200, h.get("svc", "/s/kt_icpt_future/x").status)
            assertEquals(listOf("GET", "GET"), sent("kt_icpt_future").map { it.getJSONObject("headers").getString("x-future") })
            assertEquals(2, afterCalls.get())
        }
    }

    @Test
    fun `only the functions an interceptor overrides are registered`() {
        val beforeOnly = object : Interceptor {
            override val name = "b"
            override suspend fun before(request: InterceptedRequest): RequestChanges? = null
        }
        val afterOnly = object : Interceptor {
            override val name = "a"
            override suspend fun after(response: InterceptedResponse) {}
        }
        assertEquals(HostInterceptor.Phases(true, false), HostInterceptor.of(beforeOnly).second)
        assertEquals(HostInterceptor.Phases(false, true), HostInterceptor.of(afterOnly).second)
        assertEquals(HostInterceptor.Phases(true, true), HostInterceptor.of(Recorder("r")).second)
        assertEquals(HostInterceptor.Phases(false, true), HostInterceptor.of(interceptor("f", after = {})).second)
        val asyncBefore = object : AsyncInterceptor {
            override val name = "ab"
            override fun beforeAsync(request: InterceptedRequest): CompletableFuture<RequestChanges?> = CompletableFuture.completedFuture(null)
        }
        assertEquals(HostInterceptor.Phases(true, false), HostInterceptor.of(asyncBefore).second)

        client().use { h ->
            // Neither, a bad name, a bad service: ConfigErrors naming the field.
            val none = object : Interceptor { override val name = "none" }
            assertTrue(assertThrows<HarnessException.Config> { h.addInterceptor(none) }.message!!.contains("interceptor `none`"))
            assertTrue(assertThrows<HarnessException.Config> { h.addInterceptor(interceptor("a b", before = { null })) }.reason.startsWith("name:"))
            assertTrue(assertThrows<HarnessException.Config> { h.addInterceptor(interceptor("s", services = listOf(""), before = { null })) }.reason.startsWith("services[0]"))
        }
    }

    @Test
    fun `a header named secret is scrubbed from errors when the upstream echoes it`() = runBlocking<Unit> {
        val key = "partner-key-kt-9f8e7d6c5b4a"
        script("kt_icpt_sec", mapOf("status" to 400, "json" to mapOf("error" to mapOf("message" to "bad key $key", "code" to "bad_key"))))
        client().use { h ->
            h.addInterceptor(interceptor("partner-auth", level = Level.ATTEMPT, before = {
                RequestChanges(headers = mapOf("x-partner-key" to key), secret = listOf("x-partner-key"))
            }))
            val e = assertThrows<HarnessException.HttpStatus> { h.get("svc", "/s/kt_icpt_sec/x") }
            assertEquals(key, sent("kt_icpt_sec")[0].getJSONObject("headers").getString("x-partner-key"))
            val text = "${e.message} $e ${e.reason} ${e.body?.decodeToString()}"
            assertFalse(text.contains(key), text)
        }
    }
}
