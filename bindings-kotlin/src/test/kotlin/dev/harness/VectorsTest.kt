package dev.harness

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull
import org.json.JSONArray
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import java.io.File

/** Runs every scenario of tests/vectors/scenarios.json through the Kotlin API, one JUnit test each. */
class VectorsTest {
    private val base = """{"client":{"name":"vectors"},"log":{"enabled":false},"services":{"svc":{"base_url":"{upstream}"}}}"""

    /** A call's outcome: the response or the exception, and the wall time it took. */
    private class Outcome(val response: HarnessResponse?, val error: HarnessException?, val cancelled: Boolean, val ms: Double) {
        val label: String get() = response?.status?.toString() ?: if (cancelled) "CancelledError" else error!!.kind
        val errorKind: String? get() = if (cancelled) "CancelledError" else error?.kind
    }

    @TestFactory
    fun everyScenarioVector(): List<DynamicTest> {
        val file = File(TestUpstream.repoRoot, "tests/vectors/scenarios.json")
        val scenarios = JSONObject(file.readText()).getJSONArray("scenarios")
        assertTrue(scenarios.length() >= 30, "expected the shared vectors, found ${scenarios.length()}")
        val only = System.getenv("HARNESS_SCENARIO")
        return (0 until scenarios.length()).map { scenarios.getJSONObject(it) }
            .filter { only == null || it.getString("name").contains(only) }
            .map { s -> DynamicTest.dynamicTest(s.getString("name")) { runScenario(s) } }
    }

    private fun runScenario(scenario: JSONObject) = runBlocking {
        val name = scenario.getString("name")
        TestUpstream.putScript(name, scenario.getJSONArray("steps"))
        val config = JSONObject(base)
        scenario.optJSONObject("config")?.let { merge(config, it) }
        @Suppress("UNCHECKED_CAST")
        val client = HarnessClient(substitute(config.toMap()) as Map<String, Any?>)
        val errors = mutableListOf<String>()
        client.use {
            val background = mutableListOf<Triple<Int, JSONObject, kotlinx.coroutines.Deferred<Outcome>>>()
            coroutineScope {
                val calls = scenario.getJSONArray("calls")
                for (i in 0 until calls.length()) {
                    val call = calls.getJSONObject(i)
                    if (call.has("wait_ms")) delay(call.getLong("wait_ms"))
                    val req = buildRequest(name, call)
                    val cancelAfter = if (call.has("cancel_after_ms")) call.getLong("cancel_after_ms") else null
                    if (call.optBoolean("background", false)) {
                        background += Triple(i, call, async { runOne(client, req, cancelAfter) })
                        continue
                    }
                    if (call.has("parallel")) {
                        val outcomes = (0 until call.getInt("parallel")).map { async { runOne(client, req, cancelAfter) } }.awaitAll()
                        val counts = outcomes.groupingBy { it.label }.eachCount().toSortedMap()
                        call.getJSONObject("expect").optJSONObject("outcomes")?.let { want ->
                            val wanted = want.keySet().associateWith { want.getInt(it) }.toSortedMap()
                            if (wanted != counts) errors += "call $i: expected outcomes $wanted, got $counts"
                        }
                        checkState(i, name, call, client, errors)
                    } else {
                        check(i, name, call, client, runOne(client, req, cancelAfter), errors)
                    }
                }
                for ((i, call, d) in background) check(i, name, call, client, d.await(), errors)
            }
        }
        scenario.optJSONObject("upstream")?.let { checkUpstream(name, it, errors) }
        assertTrue(errors.isEmpty(), "$name:\n" + errors.joinToString("\n"))
    }

    private suspend fun runOne(client: HarnessClient, req: HarnessRequest, cancelAfterMs: Long?): Outcome {
        val start = System.nanoTime()
        fun ms() = (System.nanoTime() - start) / 1e6
        return try {
            if (cancelAfterMs == null) {
                Outcome(client.request(req), null, false, ms())
            } else {
                // The coroutine cancel: withTimeoutOrNull cancels the call, which drops the Rust future.
                val r = withTimeoutOrNull(cancelAfterMs) { client.request(req) }
                Outcome(r, null, r == null, ms())
            }
        } catch (e: HarnessException) {
            Outcome(null, e, false, ms())
        }
    }

    private fun buildRequest(scenario: String, call: JSONObject): HarnessRequest {
        fun str(k: String) = if (call.has(k)) call.getString(k) else null
        val headers = call.optJSONObject("headers")?.let { h -> h.keySet().associateWith { h.getString(it) } } ?: emptyMap()
        return HarnessRequest(
            service = str("service") ?: "svc",
            method = call.getString("method"),
            path = "/s/$scenario" + call.getString("path"),
            endpoint = str("endpoint"),
            headers = headers,
            json = if (call.has("json")) JSONObject.wrap(call.get("json")).let(::toPlain) else null,
            body = if (!call.has("json") && call.has("body")) call.getString("body").toByteArray() else null,
            idempotencyKey = str("idempotency_key"),
            timeoutMs = if (call.has("timeout_ms")) call.getLong("timeout_ms") else null,
            traceparent = str("traceparent"),
        )
    }

    private suspend fun check(i: Int, name: String, call: JSONObject, client: HarnessClient, o: Outcome, errors: MutableList<String>) {
        val exp = call.getJSONObject("expect")
        fun fail(what: String) { errors += "call $i: $what" }
        val e = o.error
        if (exp.has("status") && o.response?.status != exp.getInt("status")) {
            fail("expected status ${exp.getInt("status")}, got ${o.response?.status ?: o.label} ${e?.message ?: ""}")
        }
        if (exp.has("error") && o.errorKind != exp.getString("error")) {
            fail("expected ${exp.getString("error")}, got ${o.response?.status ?: e?.message}")
        }
        if (e != null && o.errorKind != null && !o.cancelled) {
            // The class must agree with the kind name.
            if (HarnessException.of(HarnessErrorInfo(e.kind, ""))::class != e::class) fail("class ${e::class.simpleName} for kind ${e.kind}")
        }
        if (exp.has("phase") && e?.phase != exp.getString("phase")) fail("expected phase ${exp.getString("phase")}, got ${e?.phase}")
        if (exp.has("error_status") && e?.status != exp.getInt("error_status")) fail("expected error status ${exp.getInt("error_status")}, got ${e?.status}")
        if (exp.has("code") && e?.code != exp.getString("code")) fail("expected code ${exp.getString("code")}, got ${e?.code}")
        if (exp.has("message") && e?.message?.contains(exp.getString("message")) != true) fail("expected message containing ${exp.getString("message")}, got ${e?.message}")
        if (exp.has("retry_after_ms") && e?.retryAfterMs != exp.getLong("retry_after_ms")) fail("expected retry_after_ms ${exp.getLong("retry_after_ms")}, got ${e?.retryAfterMs}")
        if (exp.has("trace_id") && o.response?.traceId != exp.getString("trace_id")) fail("expected trace id ${exp.getString("trace_id")}, got ${o.response?.traceId}")
        if (exp.has("attempts")) {
            val got = o.response?.attempts ?: e?.attempts
            if (got != exp.getInt("attempts")) fail("expected ${exp.getInt("attempts")} attempts, got $got (${e?.message})")
        }
        if (exp.has("min_ms") && o.ms < exp.getDouble("min_ms")) fail("took ${"%.1f".format(o.ms)} ms, expected at least ${exp.getDouble("min_ms")}")
        if (exp.has("max_ms") && o.ms > exp.getDouble("max_ms")) fail("took ${"%.1f".format(o.ms)} ms, expected at most ${exp.getDouble("max_ms")}")
        checkState(i, name, call, client, errors)
    }

    private suspend fun checkState(i: Int, name: String, call: JSONObject, client: HarnessClient, errors: MutableList<String>) {
        val exp = call.getJSONObject("expect")
        val service = call.optString("service", "svc")
        if (exp.has("breaker")) {
            val endpoint = if (call.has("endpoint")) call.getString("endpoint") else null
            val got = client.breakerState(service, call.getString("method"), "/s/$name" + call.getString("path"), endpoint)
            if (got != exp.getString("breaker")) errors += "call $i: expected breaker ${exp.getString("breaker")}, got $got"
        }
        if (exp.has("bulkhead_in_use")) {
            // A cancel frees its permits asynchronously (the task is aborted on the engine's runtime).
            val want = exp.getInt("bulkhead_in_use")
            val deadline = System.nanoTime() + 1_000_000_000L
            var got = client.bulkheadInUse(service)
            while (got != want && System.nanoTime() < deadline) {
                delay(5)
                got = client.bulkheadInUse(service)
            }
            if (got != want) errors += "call $i: expected $want bulkhead permits in use, got $got"
        }
    }

    private fun checkUpstream(name: String, exp: JSONObject, errors: MutableList<String>) {
        val reqs = TestUpstream.log(name).getJSONArray("requests")
        val list = (0 until reqs.length()).map { reqs.getJSONObject(it) }
        fun fail(what: String) { errors += "upstream: $what" }
        if (exp.has("requests") && list.size != exp.getInt("requests")) fail("expected ${exp.getInt("requests")} requests, got ${list.size}")
        if (exp.has("methods")) {
            val want = exp.getJSONArray("methods").toList()
            val got = list.map { it.get("method") }
            if (want != got) fail("expected methods $want, got $got")
        }
        if (exp.has("bodies")) {
            val want = exp.getJSONArray("bodies").toList()
            val got = list.map { it.opt("body") }
            if (want != got) fail("expected bodies $want, got $got")
        }
        for (r in list) {
            val headers = r.getJSONObject("headers")
            exp.optJSONArray("headers_present")?.forEach { h -> if (!headers.has(h as String)) fail("header $h missing") }
            exp.optJSONArray("header_absent")?.forEach { h -> if (headers.has(h as String)) fail("header $h should be absent") }
            exp.optJSONObject("header_equals")?.let { eq ->
                for (k in eq.keySet()) if (headers.optString(k, null) != eq.getString(k)) fail("header $k: expected ${eq.getString(k)}, got ${headers.optString(k, null)}")
            }
            exp.optJSONObject("header_prefix")?.let { pre ->
                for (k in pre.keySet()) if (!headers.optString(k, "").startsWith(pre.getString(k))) fail("header $k: expected prefix ${pre.getString(k)}, got ${headers.optString(k, null)}")
            }
        }
        if (exp.has("min_gap_ms")) {
            val gap = exp.getDouble("min_gap_ms")
            list.zipWithNext { a, b ->
                val d = b.getDouble("at_ms") - a.getDouble("at_ms")
                if (d < gap) fail("requests ${"%.1f".format(d)} ms apart, expected at least $gap")
            }
        }
    }

    private fun merge(base: JSONObject, over: JSONObject) {
        for (k in over.keySet()) {
            val v = over.get(k)
            val b = base.opt(k)
            if (v is JSONObject && b is JSONObject) merge(b, v) else base.put(k, v)
        }
    }

    private fun substitute(v: Any?): Any? = when (v) {
        is String -> v.replace("{upstream}", TestUpstream.url).replace("{blackhole}", TestUpstream.blackholeUrl).replace("{closed}", TestUpstream.closedUrl)
        is Map<*, *> -> v.entries.associate { (k, x) -> k as String to substitute(x) }
        is List<*> -> v.map(::substitute)
        else -> v
    }

    /** org.json values as plain Maps/Lists, the shape callers pass. */
    private fun toPlain(v: Any?): Any? = when (v) {
        is JSONObject -> v.toMap()
        is JSONArray -> v.toList()
        JSONObject.NULL -> null
        else -> v
    }
}
