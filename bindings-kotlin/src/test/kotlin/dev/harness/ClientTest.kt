package dev.harness

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files

class ClientTest {
    private fun config(vararg svc: Pair<String, Any?>): Map<String, Any?> = configAt(TestUpstream.url, *svc)

    private fun configAt(baseUrl: String, vararg svc: Pair<String, Any?>): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-tests"),
        "log" to mapOf("enabled" to false),
        "services" to mapOf("svc" to mapOf("base_url" to baseUrl) + svc),
    )

    @Test
    fun `a response carries status, headers, body, attempts and trace id`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_response", listOf(mapOf("status" to 201, "json" to mapOf("id" to 7), "headers" to mapOf("X-Thing" to "a"))))
        HarnessClient(config()).use { h ->
            val r = h.post("svc", "/s/kt_response/items", json = mapOf("name" to "Ünïcode \"quoted\"\n", "n" to listOf(1, 2.5, true, null)))
            assertEquals(201, r.status)
            assertEquals("""{"id":7}""", r.text())
            assertEquals("a", r.header("x-thing"))
            assertEquals(listOf("a"), r.headers["x-thing"])
            assertEquals(1, r.attempts)
            assertEquals(32, r.traceId.length)
            assertTrue(r.elapsedMs > 0)
            val sent = TestUpstream.log("kt_response").getJSONArray("requests").getJSONObject(0)
            assertEquals("POST", sent.getString("method"))
            assertEquals(org.json.JSONObject("""{"name":"Ünïcode \"quoted\"\n","n":[1,2.5,true,null]}""").similar(org.json.JSONObject(sent.getString("body"))), true)
            assertTrue(h.metrics().contains("harness_requests_total"))
        }
    }

    @Test
    fun `a cached answer is fromCache with no attempt until cacheClear drops it`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cache_clear", listOf(mapOf("headers" to mapOf("cache-control" to "max-age=60"), "body" to "v1"), mapOf("body" to "v2")))
        HarnessClient(config("cache" to mapOf("http" to true))).use { h ->
            val first = h.get("svc", "/s/kt_cache_clear/r")
            assertFalse(first.fromCache)
            assertFalse(first.revalidated)
            assertEquals("miss", first.cache?.outcome)
            val hit = h.get("svc", "/s/kt_cache_clear/r")
            assertTrue(hit.fromCache)
            assertFalse(hit.revalidated)
            assertEquals(CacheStamp("hit"), hit.cache)
            assertEquals(0, hit.attempts)
            assertEquals("v1", hit.text())
            assertTrue(hit.toString().contains("cache=hit"), hit.toString())
            assertEquals(1, h.cacheClear("svc"))
            val after = h.get("svc", "/s/kt_cache_clear/r")
            assertFalse(after.fromCache)
            assertEquals(1, after.attempts)
            assertEquals("v2", after.text())
            val e = assertThrows<HarnessException.Config> { h.cacheClear("nope") }
            assertTrue(e.message!!.contains("unknown service or route `nope`"), e.message)
            assertTrue(h.cacheClear() >= 0)
        }
        assertEquals(2, TestUpstream.log("kt_cache_clear").getJSONArray("requests").length())
        // A call no cache touched carries no stamp.
        HarnessClient(config()).use { h ->
            val r = h.get("svc", "/s/kt_cache_clear/r")
            assertEquals(null, r.cache)
            assertFalse(r.fromCache)
        }
    }

    @Test
    fun `every shortcut sends its method`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_methods", listOf(mapOf("status" to 200)))
        HarnessClient(config()).use { h ->
            h.get("svc", "/s/kt_methods/a", query = mapOf("q" to "1"))
            h.post("svc", "/s/kt_methods/a", body = "raw".toByteArray())
            h.put("svc", "/s/kt_methods/a", json = mapOf("x" to 1))
            h.patch("svc", "/s/kt_methods/a", json = listOf(1))
            h.delete("svc", "/s/kt_methods/a")
            h.request("svc", "HEAD", "/s/kt_methods/a")
        }
        val reqs = TestUpstream.log("kt_methods").getJSONArray("requests")
        assertEquals(listOf("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"), (0 until reqs.length()).map { reqs.getJSONObject(it).getString("method") })
        assertEquals("raw", reqs.getJSONObject(1).getString("body"))
    }

    @Test
    fun `1000 coroutine cancellations leave no bulkhead permit held`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cancel", listOf(mapOf("action" to "hang")))
        HarnessClient(config("bulkhead" to mapOf("max_concurrency" to 500), "timeouts" to mapOf("response_ms" to 60_000, "request_ms" to 60_000))).use { h ->
            repeat(10) { round ->
                val jobs = (0 until 100).map { launch(Dispatchers.Default) { h.get("svc", "/s/kt_cancel/x") } }
                // Every request is in flight and holds a permit before it is cancelled.
                withTimeout(10_000) { while (h.bulkheadInUse("svc") < 100) delay(2) }
                jobs.forEach { it.cancelAndJoin() }
                withTimeout(2_000) { while (h.bulkheadInUse("svc") != 0) delay(2) }
                assertEquals(0, h.bulkheadInUse("svc"), "round $round")
            }
            // A cancelled request is a CancellationException to the caller, not a HarnessException.
            val d = async { h.get("svc", "/s/kt_cancel/y") }
            delay(50)
            d.cancel()
            assertThrows<CancellationException> { runBlocking { d.await() } }
            withTimeout(2_000) { while (h.bulkheadInUse("svc") != 0) delay(2) }
        }
    }

    @Test
    fun `256 concurrent requests all succeed`() = runBlocking<Unit> {
        HarnessClient(config("bulkhead" to mapOf("max_concurrency" to 256))).use { h ->
            val results = (0 until 256).map { async(Dispatchers.Default) { h.get("svc", "/bench") } }.awaitAll()
            assertEquals(256, results.count { it.status == 200 && it.text() == """{"ok":true}""" })
            assertEquals(0, h.bulkheadInUse("svc"))
        }
    }

    @Test
    fun `errors map to the sealed hierarchy with their kind and fields`() = runBlocking<Unit> {
        // Every kind the engine names has a class, and the class agrees with the kind.
        val names = HarnessClient.errorKinds
        assertEquals("HarnessError", names.first())
        for (kind in names) {
            val e = HarnessException.of(HarnessErrorInfo(kind, "$kind: x"))
            assertEquals(kind, e.kind)
            val expected: Class<out HarnessException> = when (e) {
                is HarnessException.Timeout -> HarnessException.Timeout::class.java
                is HarnessException.CircuitOpen -> HarnessException.CircuitOpen::class.java
                is HarnessException.BulkheadFull -> HarnessException.BulkheadFull::class.java
                is HarnessException.RateLimited -> HarnessException.RateLimited::class.java
                is HarnessException.DuplicateInFlight -> HarnessException.DuplicateInFlight::class.java
                is HarnessException.HttpStatus -> HarnessException.HttpStatus::class.java
                is HarnessException.Auth -> HarnessException.Auth::class.java
                is HarnessException.Schema -> HarnessException.Schema::class.java
                is HarnessException.Connect -> HarnessException.Connect::class.java
                is HarnessException.Cancelled -> HarnessException.Cancelled::class.java
                is HarnessException.NoHealthyProvider -> HarnessException.NoHealthyProvider::class.java
                is HarnessException.Config -> HarnessException.Config::class.java
                is HarnessException.Protocol -> HarnessException.Protocol::class.java
                is HarnessException.ResponseTooLarge -> HarnessException.ResponseTooLarge::class.java
                is HarnessException.Interceptor -> HarnessException.Interceptor::class.java
                is HarnessException.Other -> HarnessException.Other::class.java
            }
            assertEquals(if (kind == "HarnessError") "Other" else kind.removeSuffix("Error"), expected.simpleName)
        }

        TestUpstream.putScript("kt_errors", listOf(mapOf("status" to 503, "json" to mapOf("code" to "E_DOWN", "message" to "down for repair"), "headers" to mapOf("x-secret" to "s3cr3t"))))
        HarnessClient(config("retry" to mapOf("max_retries" to 0))).use { h ->
            val e = assertThrows<HarnessException.HttpStatus> {
                runBlocking { h.get("svc", "/s/kt_errors/orders/12", headers = mapOf("authorization" to "Bearer tok-123")) }
            }
            assertInstanceOf(HarnessException::class.java, e)
            assertEquals("HttpStatusError", e.kind)
            assertEquals(503, e.status)
            assertEquals("E_DOWN", e.code)
            assertEquals("svc", e.service)
            assertEquals("GET", e.method)
            assertEquals("/s/kt_errors/orders/{id}", e.endpoint)
            assertEquals(1, e.attempts)
            assertEquals(32, e.traceId?.length)
            assertTrue(String(e.body!!).contains("down for repair"))
            assertFalse(e.toString().contains("tok-123"))
            assertFalse(e.toString().contains("s3cr3t"))
        }
        HarnessClient(configAt(TestUpstream.closedUrl, "retry" to mapOf("max_retries" to 0))).use { h ->
            val e = assertThrows<HarnessException.Connect> { runBlocking { h.get("svc", "/x") } }
            assertEquals("ConnectError", e.kind)
        }
        HarnessClient(configAt(TestUpstream.blackholeUrl, "timeouts" to mapOf("connect_ms" to 100), "retry" to mapOf("max_retries" to 0))).use { h ->
            val e = assertThrows<HarnessException.Timeout> { runBlocking { h.get("svc", "/x") } }
            assertEquals("connect", e.phase)
        }
        val closed = HarnessClient(config())
        closed.close()
        assertTrue(closed.isClosed)
        assertThrows<HarnessException.Other> { runBlocking { closed.get("svc", "/bench") } }
    }

    @Test
    fun `bad config is a Config exception naming the field`() {
        val e1 = assertThrows<HarnessException.Config> { HarnessClient(config("timeouts" to mapOf("connect_ms" to 0))) }
        assertEquals("ConfigError", e1.kind)
        assertTrue(e1.message!!.contains("services.svc.timeouts.connect_ms"), e1.message)
        val e2 = assertThrows<HarnessException.Config> { HarnessClient(configAt("ftp://nope")) }
        assertTrue(e2.message!!.contains("services.svc.base_url"), e2.message)
        val e3 = assertThrows<HarnessException.Config> { HarnessClient(config("retry" to mapOf("max_retries" to "many"))) }
        assertTrue(e3.message!!.contains("max_retries"), e3.message)
        // A value JSON cannot carry is caught before the FFI, named the same way.
        val e4 = assertThrows<HarnessException.Config> { HarnessClient(config("retry" to mapOf("budget_ratio" to Double.NaN))) }
        assertTrue(e4.message!!.contains("config.services.svc.retry.budget_ratio"), e4.message)
        val e5 = assertThrows<HarnessException.Config> { HarnessClient.fromFile("/nonexistent/harness.yaml") }
        assertEquals("ConfigError", e5.kind)
        HarnessClient(config()).use { h ->
            assertThrows<HarnessException.Config> { h.bulkheadInUse("nope") }
            assertThrows<HarnessException.Config> { runBlocking { h.request("nope", "GET", "/x") } }
            assertThrows<HarnessException.Config> { runBlocking { h.post("svc", "/x", json = mapOf("a" to 1), body = byteArrayOf(1)) } }
        }
    }

    @Test
    fun `a config file works like the map`() = runBlocking<Unit> {
        val f = Files.createTempFile("harness", ".json")
        try {
            Files.writeString(f, """{"services":{"svc":{"base_url":"${TestUpstream.url}"}},"log":{"enabled":false}}""")
            HarnessClient(f).use { h -> assertEquals(200, h.get("svc", "/bench").status) }
        } finally {
            Files.delete(f)
        }
    }

    @Test
    fun `describe shows the active config's services and routes and never a secret`() {
        val cfg = configAt(
            "http://user:pa55word@127.0.0.1:1",
            "auth" to mapOf("type" to "bearer", "token" to mapOf("value" to "tok-SECRET-kt")),
            "endpoints" to mapOf("GET /orders/{id}" to emptyMap<String, Any>()),
        ) + ("routes" to mapOf("chat" to mapOf("providers" to listOf(mapOf("id" to "a", "service" to "svc", "weight" to 1)))))
        HarnessClient(cfg).use { h ->
            val d: Description = h.describe()
            assertEquals("kotlin-tests", d.client)
            assertEquals(h.configVersion, d.configVersion)
            val svc = d.services.single()
            assertEquals(listOf("svc", "bearer", "http://user:***@127.0.0.1:1"), listOf(svc.name, svc.auth, svc.baseUrl))
            assertEquals(listOf("GET /orders/{id}"), svc.endpoints)
            assertEquals(listOf("a"), d.routes.single().providers)
            assertFalse(d.toString().contains("pa55word") || d.toString().contains("tok-SECRET-kt"), d.toString())
        }
    }

    @Test
    fun `timeoutMs follows the core's rule and a negative one is refused naming the field`() = runBlocking<Unit> {
        HarnessClient(config()).use { h ->
            val e = assertThrows<HarnessException.Config> { runBlocking { h.get("svc", "/bench", timeoutMs = -1) } }
            assertTrue(e.message!!.contains("request.timeout_ms: expected an integer >= 0"), e.message)
            val c = assertThrows<HarnessException.Config> { runBlocking { h.chat("no-such-route", listOf(mapOf("role" to "user")), timeoutMs = -5) } }
            assertTrue(c.message!!.contains("request.timeout_ms"), c.message)
            assertEquals(200, h.get("svc", "/bench", timeoutMs = 5000).status)
        }
    }

    @Test
    fun `configSourceState says what this instance runs and is a ConfigError without a config source`() {
        HarnessClient(mapOf("log" to mapOf("enabled" to false), "services" to emptyMap<String, Any>())).use { h ->
            val e = assertThrows<HarnessException.Config> { h.configSourceState() }
            assertTrue(e.message!!.contains("this client has no config_source"), e.message)
        }
        // Redis at a closed port: the bootstrap config runs, and the state says so.
        val source = mapOf("redis_url" to "redis://127.0.0.1:1/0", "name" to "shop", "instance_id" to "kt-1", "poll_ms" to 100)
        HarnessClient(mapOf("log" to mapOf("enabled" to false), "services" to emptyMap<String, Any>(), "config_source" to source)).use { h ->
            val s: ConfigSourceState = h.configSourceState()
            assertEquals(listOf<Any?>("shop", "kt-1", 0L, "bootstrap", false), listOf(s.name, s.instance, s.version, s.appliedFrom, s.connected))
            assertFalse(s.toString().contains("127.0.0.1:1"), s.toString())
        }
    }
}
