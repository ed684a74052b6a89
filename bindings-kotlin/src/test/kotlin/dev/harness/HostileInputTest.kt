package dev.harness

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.math.BigDecimal
import java.nio.file.Files
import java.math.BigInteger
import java.util.concurrent.CompletionException
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit

/** Issue 9 on the JVM: JSON bodies as written, strings that are not Unicode, nesting, new kinds, repeated headers. */
class HostileInputTest {
    private fun config(vararg svc: Pair<String, Any?>): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-tests"),
        "log" to mapOf("enabled" to false),
        "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url, "retry" to mapOf("max_retries" to 0)) + svc),
    )

    private fun bodies(script: String): List<String> {
        val reqs = TestUpstream.log(script).getJSONArray("requests")
        return (0 until reqs.length()).map { reqs.getJSONObject(it).getString("body") }
    }

    private fun requests(script: String): Int = TestUpstream.log(script).getJSONArray("requests").length()

    private fun configError(block: suspend () -> Unit): HarnessException.Config =
        assertThrows<HarnessException.Config> { runBlocking { block() } }

    @Test
    fun `a json body keeps map key order and sends integers of any size exactly`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_json_exact", listOf(mapOf("status" to 200)))
        HarnessClient(config()).use { h ->
            val body = linkedMapOf(
                "z" to 1,
                "a" to linkedMapOf("y" to 2, "b" to 3),
                "big" to BigInteger.TWO.pow(64),
                "huge" to BigInteger.TEN.pow(30),
                "neg" to BigInteger.TEN.pow(30).negate(),
                "long" to Long.MAX_VALUE,
                "ulong" to ULong.MAX_VALUE,
                "dec" to BigDecimal("1.10"),
                "d" to 2.5,
                "set" to linkedSetOf("s", "t"),
                "arr" to intArrayOf(1, 2),
                "emoji" to "😀 é \u0001",
            )
            assertEquals(200, h.post("svc", "/s/kt_json_exact/x", json = body).status)
            h.post("svc", "/s/kt_json_exact/x", json = BigInteger.TWO.pow(64))
        }
        assertEquals(
            listOf(
                """{"z":1,"a":{"y":2,"b":3},"big":18446744073709551616,"huge":1000000000000000000000000000000,""" +
                    """"neg":-1000000000000000000000000000000,"long":9223372036854775807,"ulong":18446744073709551615,""" +
                    """"dec":1.10,"d":2.5,"set":["s","t"],"arr":[1,2],"emoji":"😀 é \u0001"}""",
                "18446744073709551616",
            ),
            bodies("kt_json_exact"),
        )
    }

    @Test
    fun `NaN and infinities in a json body are a ConfigError naming json`() {
        HarnessClient(config()).use { h ->
            for (bad in listOf(Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Float.NaN, Float.NEGATIVE_INFINITY)) {
                val e = configError { h.post("svc", "/s/kt_nan/x", json = mapOf("a" to listOf(1, bad))) }
                assertTrue(e.message!!.contains("json.a[1]: $bad is not a JSON number"), e.message)
                assertTrue(e.reason.startsWith("json.a[1]:"), e.reason)
            }
            val e = configError { h.post("svc", "/s/kt_nan/x", json = Double.NaN) }
            assertTrue(e.reason.startsWith("json:"), e.reason)
            // The same for Java callers: the future fails with the same exception.
            val f = h.requestAsync(HarnessRequest("svc", "POST", "/s/kt_nan/x", json = listOf(Double.NaN)))
            val c = assertThrows<CompletionException> { f.join() }
            assertTrue(c.cause is HarnessException.Config, c.cause.toString())
        }
    }

    @Test
    fun `a lone surrogate in any string argument is a ConfigError naming the argument`() {
        TestUpstream.putScript("kt_surrogate", listOf(mapOf("status" to 200)))
        val lone = "a\uD800b"
        HarnessClient(config()).use { h ->
            val p = "/s/kt_surrogate/x"
            val cases: List<Pair<String, suspend () -> Unit>> = listOf(
                "json.name" to { h.post("svc", p, json = mapOf("name" to lone)) },
                "json.list[1]" to { h.post("svc", p, json = mapOf("list" to listOf("ok", "\uDC00"))) },
                "json" to { h.post("svc", p, json = mapOf(lone to 1)) },
                "request.path" to { h.get("svc", "$p/$lone") },
                "request.headers.x-a" to { h.get("svc", p, headers = mapOf("x-a" to lone)) },
                "request.headers.x-b" to { h.request("svc", "GET", p, headerList = listOf("x-b" to "ok", "x-b" to lone)) },
                "request.headers" to { h.get("svc", p, headers = mapOf(lone to "v")) },
                "request.query.q" to { h.get("svc", p, query = mapOf("q" to lone)) },
                "request.endpoint" to { h.get("svc", p, endpoint = lone) },
                "request.idempotency_key" to { h.post("svc", p, idempotencyKey = lone) },
                "request.traceparent" to { h.get("svc", p, traceparent = lone) },
                "request.service" to { h.get(lone, p) },
                "request.method" to { h.request("svc", "GE\uDBFF", p) },
            )
            for ((field, call) in cases) {
                val e = configError(call)
                assertEquals("$field: contains a lone surrogate (not valid Unicode)", e.reason, field)
                assertTrue(e.message!!.startsWith("ConfigError: $field: "), e.message)
            }
            assertEquals("request.path: contains a lone surrogate (not valid Unicode)", assertThrows<CompletionException> {
                h.getAsync("svc", "$p/$lone").join()
            }.let { (it.cause as HarnessException.Config).reason })
            assertTrue(configError { h.bulkheadInUse(lone) }.reason.startsWith("service:"))
            assertTrue(configError { h.breakerState("svc", "GET", lone) }.reason.startsWith("path:"))
            assertTrue(configError { h.bulkheadLimit(lone) }.reason.startsWith("service:"))
            assertTrue(configError { h.breakerDetails("svc", "GET", "/x", lone) }.reason.startsWith("endpoint:"))
            // A surrogate pair is a character like any other.
            assertEquals(200, runBlocking { h.post("svc", p, json = mapOf("emoji" to "😀"), headers = mapOf("x-ok" to "1")) }.status)
        }
        assertEquals(1, requests("kt_surrogate"))
        assertTrue(assertThrows<HarnessException.Config> { HarnessClient(config("headers" to mapOf("x-a" to lone))) }
            .reason.startsWith("config.services.svc.headers.x-a: contains a lone surrogate"))
        assertTrue(assertThrows<HarnessException.Config> { HarnessClient.fromJson("""{"client":{"name":"$lone"}}""") }.reason.startsWith("config:"))
    }

    @Test
    fun `a json body nested 20000 deep or containing itself is a ConfigError, not a StackOverflowError`() {
        TestUpstream.putScript("kt_deep", listOf(mapOf("status" to 200)))
        var deep: Any = 0
        repeat(20_000) { deep = listOf(deep) }
        var ok: Any = 0
        repeat(512) { ok = mapOf("k" to ok) }
        val cyclic = ArrayList<Any>().also { it.add(it) }
        HarnessClient(config()).use { h ->
            for (body in listOf(deep, cyclic)) {
                val e = configError { h.post("svc", "/s/kt_deep/x", json = body) }
                assertEquals("json: nested deeper than 512 levels", e.reason)
            }
            assertEquals(200, runBlocking { h.post("svc", "/s/kt_deep/x", json = ok) }.status)
        }
        assertEquals(1, requests("kt_deep"))
        assertEquals(512, Json.maxDepth)
    }

    @Test
    fun `a config nested 100000 deep is a ConfigError, quickly`() {
        var deep: Map<String, Any?> = emptyMap()
        repeat(100_000) { deep = mapOf("a" to deep) }
        val started = System.nanoTime()
        val e = assertThrows<HarnessException.Config> { HarnessClient(config("x" to deep)) }
        assertEquals("config: nested deeper than 512 levels", e.reason)
        val text = "{\"a\":".repeat(100_000) + "1" + "}".repeat(100_000)
        val t = assertThrows<HarnessException.Config> { HarnessClient.fromJson(text) }
        assertTrue(t.reason.contains("nested deeper than 512"), t.reason)
        val yaml = Files.createTempFile("deep", ".yaml")
        try {
            Files.writeString(yaml, "a: " + "[".repeat(100_000))
            val y = assertThrows<HarnessException.Config> { HarnessClient(yaml) }
            assertTrue(y.reason.contains("nested deeper than 512"), y.reason)
        } finally {
            Files.delete(yaml)
        }
        val ms = (System.nanoTime() - started) / 1e6
        assertTrue(ms < 5_000, "took $ms ms")
    }

    @Test
    fun `values JSON cannot carry are ConfigErrors naming where they sit, on one line`() {
        HarnessClient(config()).use { h ->
            val key = configError { h.post("svc", "/s/kt_x/x", json = mapOf("a" to mapOf(1 to 2))) }
            assertTrue(key.reason.startsWith("json.a: map keys must be strings"), key.reason)
            val obj = configError { h.post("svc", "/s/kt_x/x", json = listOf(Any())) }
            assertTrue(obj.reason.startsWith("json[0]: cannot be written as JSON"), obj.reason)
            val nl = configError { h.post("svc", "/s/kt_x/x", json = mapOf("a\nb" to Double.NaN)) }
            assertTrue(nl.reason.startsWith("json.a\\nb: NaN"), nl.reason)
            assertFalse(nl.message!!.contains("\n"))
        }
    }

    @Test
    fun `protocol faults and oversized responses raise their own classes`() {
        TestUpstream.putScript("kt_protocol", listOf(mapOf("raw" to "SSH-2.0-OpenSSH_9.6\r\n\r\n")))
        TestUpstream.putScript("kt_too_large", listOf(mapOf("body_bytes" to 5000)))
        HarnessClient(config("limits" to mapOf("max_response_bytes" to 4096))).use { h ->
            val p = assertThrows<HarnessException.Protocol> { runBlocking { h.get("svc", "/s/kt_protocol/x") } }
            assertEquals("ProtocolError", p.kind)
            assertEquals(1, p.attempts)
            val t = assertThrows<HarnessException.ResponseTooLarge> { runBlocking { h.get("svc", "/s/kt_too_large/x") } }
            assertEquals("ResponseTooLargeError", t.kind)
            assertTrue(t.message!!.contains("max_response_bytes"), t.message)
            val j = assertThrows<ExecutionException> { h.getAsync("svc", "/s/kt_too_large/x").get(10, TimeUnit.SECONDS) }
            assertTrue(j.cause is HarnessException.ResponseTooLarge, j.cause.toString())
        }
    }

    @Test
    fun `repeated headers are all sent and all kept, in order`() = runBlocking<Unit> {
        TestUpstream.putScript(
            "kt_headers",
            listOf(mapOf("status" to 200, "header_list" to listOf(listOf("Set-Cookie", "a=1; Path=/"), listOf("set-cookie", "b=2"), listOf("x-one", "1")))),
        )
        HarnessClient(config()).use { h ->
            val r = h.request(
                "svc", "GET", "/s/kt_headers/x",
                headers = mapOf("x-a" to "0"),
                headerList = listOf("x-a" to "1", "cookie" to "c=1", "cookie" to "d=2"),
            )
            assertEquals(listOf("a=1; Path=/", "b=2"), r.headers.values("Set-Cookie"))
            assertEquals(listOf("a=1; Path=/", "b=2"), r.headers["set-cookie"])
            assertEquals("a=1; Path=/", r.header("SET-COOKIE"))
            assertEquals("a=1; Path=/", r.headers.first("set-cookie"))
            assertEquals(listOf("1"), r.headers.values("X-One"))
            assertEquals(emptyList<String>(), r.headers.values("x-absent"))
            assertNull(r.header("x-absent"))
            assertFalse(r.headers.toString().contains("a=1"), r.headers.toString())
            val copy = HarnessResponse(r.status, mapOf("Set-Cookie" to listOf("a"), "set-cookie" to listOf("b")), r.body, r.elapsedMs, r.attempts, r.traceId)
            assertEquals(listOf("a", "b"), copy.headers.values("set-cookie"))
        }
        val sent = TestUpstream.log("kt_headers").getJSONArray("requests").getJSONObject(0).getJSONArray("header_list")
        val pairs = (0 until sent.length()).map { sent.getJSONArray(it).let { p -> p.getString(0) to p.getString(1) } }
        assertEquals(listOf("0", "1"), pairs.filter { it.first == "x-a" }.map { it.second })
        assertEquals(listOf("c=1", "d=2"), pairs.filter { it.first == "cookie" }.map { it.second })
    }
}
