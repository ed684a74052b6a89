package dev.harness

import ch.qos.logback.classic.Logger
import ch.qos.logback.classic.spi.ILoggingEvent
import ch.qos.logback.core.read.ListAppender
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.slf4j.LoggerFactory
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/** Credentials through the Kotlin API: host token providers, the state API, redaction. */
class CredentialsTest {
    private fun config(
        auth: Map<String, Any?> = mapOf("type" to "callback"),
        log: Map<String, Any?> = mapOf("enabled" to false),
        vararg svc: Pair<String, Any?>,
    ): Map<String, Any?> = mapOf(
        "client" to mapOf("name" to "kotlin-credentials"),
        "log" to log,
        "services" to mapOf("svc" to mapOf("base_url" to TestUpstream.url, "auth" to auth, "retry" to mapOf("max_retries" to 0)) + svc),
    )

    private fun authorizations(script: String): List<String?> {
        val reqs = TestUpstream.log(script).getJSONArray("requests")
        return (0 until reqs.length()).map { reqs.getJSONObject(it).getJSONObject("headers").optString("authorization", null) }
    }

    @Test
    fun `200 concurrent requests at expiry make exactly one token call`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cred_expiry", listOf(mapOf("status" to 200)))
        val calls = AtomicInteger()
        HarnessClient(config()).use { h ->
            h.setTokenProvider("svc") {
                val n = calls.incrementAndGet()
                delay(100) // slow enough that every waiter piles up behind the one refresh
                Token("tok-$n", 1.seconds)
            }
            assertEquals(200, h.get("svc", "/s/kt_cred_expiry/a").status)
            assertEquals(1, calls.get())
            delay(1_100) // the token has expired
            val statuses = (1..200).map { async(Dispatchers.Default) { h.get("svc", "/s/kt_cred_expiry/b").status } }.awaitAll()
            assertEquals(List(200) { 200 }, statuses)
            assertEquals(2, calls.get(), "200 requests at expiry must share one refresh")
            val sent = authorizations("kt_cred_expiry")
            assertEquals("Bearer tok-1", sent[0])
            assertEquals(List(200) { "Bearer tok-2" }, sent.drop(1))
        }
    }

    /** Regression: a lifetime of ~9.2e18 s or more panicked the refresh task; it is held instead. */
    @Test
    fun `a lifetime past any clock is held, not a crash`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cred_life", listOf(mapOf("status" to 200)))
        for (lifetime in listOf(java.time.Duration.ofSeconds(Long.MAX_VALUE), java.time.Duration.ofMillis(Long.MAX_VALUE), java.time.Duration.ofDays(365L * 1000))) {
            val calls = AtomicInteger()
            HarnessClient(config()).use { h ->
                h.setTokenProvider("svc") {
                    calls.incrementAndGet()
                    Token("tok-long-lived", lifetime)
                }
                repeat(3) { assertEquals(200, h.get("svc", "/s/kt_cred_life/a").status) }
                assertEquals(1, calls.get(), "$lifetime")
                assertEquals("valid", h.credentialsState().single().status)
            }
        }
    }

    @Test
    fun `a suspend provider and a CompletableFuture provider both supply the token`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cred_forms", listOf(mapOf("status" to 200)))
        HarnessClient(config()).use { h ->
            h.setTokenProvider("svc") {
                delay(10)
                Token("from-suspend")
            }
            h.get("svc", "/s/kt_cred_forms/a")
            // Another client, with the Java form (a CompletableFuture).
            HarnessClient(config()).use { h2 ->
                h2.setTokenProviderAsync("svc") { CompletableFuture.supplyAsync { Token("from-future", java.time.Duration.ofMinutes(30)) } }
                h2.get("svc", "/s/kt_cred_forms/b")
                val state = h2.credentialsState().single()
                assertEquals("svc", state.service)
                assertEquals("callback", state.type)
                assertEquals("valid", state.status)
                assertTrue(state.expiresAtMs!! > System.currentTimeMillis() + 25 * 60_000, "$state")
                assertTrue(state.lastRefreshMs!! <= System.currentTimeMillis(), "$state")
                assertNull(state.lastError)
            }
            assertEquals(listOf("Bearer from-suspend", "Bearer from-future"), authorizations("kt_cred_forms"))
        }
    }

    @Test
    fun `a provider that throws is an auth error with its message and the runtime carries on`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cred_throws", listOf(mapOf("status" to 200)))
        HarnessClient(config()).use { h ->
            h.setTokenProvider("svc") { throw IllegalStateException("auth server down") }
            val e = assertThrows<HarnessException.Auth> { runBlocking { h.get("svc", "/s/kt_cred_throws/a") } }
            assertEquals("AuthError", e.kind)
            assertTrue(e.message!!.contains("IllegalStateException: auth server down"), e.message)
            val state = h.credentialsState().single()
            assertTrue(state.lastError!!.contains("auth server down"), "$state")

            // A failed future says what happened too.
            h.setTokenProviderAsync("svc") { CompletableFuture.failedFuture(java.io.IOException("vault sealed")) }
            val e2 = assertThrows<HarnessException.Auth> { runBlocking { h.get("svc", "/s/kt_cred_throws/b") } }
            assertTrue(e2.message!!.contains("IOException: vault sealed"), e2.message)

            // The runtime is fine: a working provider is used from the next request on.
            h.setTokenProvider("svc") { Token("tok-ok") }
            assertEquals(200, h.get("svc", "/s/kt_cred_throws/d").status)
            assertEquals(listOf("Bearer tok-ok"), authorizations("kt_cred_throws"))
        }
    }

    @Test
    fun `a provider slower than refresh timeout_ms times out and is cancelled`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_cred_slow", listOf(mapOf("status" to 200)))
        HarnessClient(config(mapOf("type" to "callback", "refresh" to mapOf("timeout_ms" to 200)))).use { h ->
            val cancelled = CompletableFuture<Boolean>()
            h.setTokenProvider("svc") {
                try {
                    delay(10_000)
                    Token("never")
                } finally {
                    cancelled.complete(true)
                }
            }
            val started = System.nanoTime()
            val e = assertThrows<HarnessException.Auth> { runBlocking { h.get("svc", "/s/kt_cred_slow/a") } }
            assertTrue(e.message!!.contains("did not answer within 200 ms"), e.message)
            assertTrue((System.nanoTime() - started) / 1_000_000 < 5_000)
            assertTrue(cancelled.get(5, java.util.concurrent.TimeUnit.SECONDS), "the provider's coroutine was cancelled")
        }
    }

    @Test
    fun `setTokenProvider needs type callback and a known service`() {
        HarnessClient(config(mapOf("type" to "bearer", "token" to mapOf("value" to "static-1")))).use { h ->
            val e = assertThrows<HarnessException.Config> { h.setTokenProvider("svc") { Token("x") } }
            assertTrue(e.message!!.contains("type: callback"), e.message)
            assertThrows<HarnessException.Config> { h.setTokenProviderAsync("nope") { CompletableFuture.completedFuture(Token("x")) } }
        }
    }

    @Test
    fun `Token toString and credentialsState never show a secret`() {
        val t = Token("tok-very-secret", 90.seconds)
        assertFalse(t.toString().contains("tok-very-secret"), t.toString())
        assertEquals(Token("tok-very-secret", java.time.Duration.ofSeconds(90)), t)
        assertThrows<IllegalArgumentException> { Token("x", (-1).milliseconds) }
        val pool = mapOf(
            "type" to "header", "header" to "x-api-key",
            "keys" to listOf(mapOf("value" to "key-secret-1", "name" to "first"), mapOf("value" to "key-secret-2")),
        )
        HarnessClient(config(pool)).use { h ->
            val s = h.credentialsState().single()
            assertEquals("header", s.type)
            assertEquals(listOf(0, 1), s.keys.map { it.index })
            assertEquals("first", s.keys[0].name)
            assertEquals(listOf("ok", "ok"), s.keys.map { it.status })
            assertFalse(s.toString().contains("key-secret"), s.toString())
        }
    }

    @Test
    fun `no token value appears in events, SLF4J records, errors or the state`() = runBlocking<Unit> {
        val secret = "tok-MUST-NOT-LEAK-7f3a"
        val logger = LoggerFactory.getLogger("dev.harness") as Logger
        val appender = ListAppender<ILoggingEvent>().apply { start() }
        logger.addAppender(appender)
        try {
            TestUpstream.putScript(
                "kt_cred_redact",
                listOf(
                    mapOf("status" to 200),
                    // A 401 whose body echoes the token, twice: refresh, replay, then an AuthError.
                    mapOf("status" to 401, "json" to mapOf("message" to "token $secret rejected"), "times" to 2),
                    mapOf("status" to 200),
                ),
            )
            val events = CopyOnWriteArrayList<HarnessEvent>()
            HarnessClient(config(log = mapOf("sink" to "slf4j"))).use { h ->
                h.addListener { events.add(it) }
                h.setTokenProvider("svc") { Token(secret, 1.seconds) }
                h.get("svc", "/s/kt_cred_redact/a")
                val e = assertThrows<HarnessException.Auth> { runBlocking { h.get("svc", "/s/kt_cred_redact/b") } }
                h.setTokenProvider("svc") { throw IllegalStateException("no luck") }
                delay(1_100)
                val e2 = assertThrows<HarnessException.Auth> { runBlocking { h.get("svc", "/s/kt_cred_redact/c") } }
                h.flush()
                val seen = buildList {
                    add(e.toString()); add(e.message); add(e.reason)
                    add(e2.toString()); add(e2.message)
                    events.forEach { add(it.toString()); add(it.fields().toString()) }
                    appender.list.forEach { add(it.formattedMessage); add(it.keyValuePairs.toString()) }
                    add(h.credentialsState().toString())
                    add(h.metrics())
                }
                assertTrue(events.size >= 3, "$events")
                assertTrue(appender.list.size >= 3, "${appender.list}")
                for (text in seen) assertFalse(text!!.contains(secret), "the token leaked: $text")
            }
        } finally {
            logger.detachAppender(appender)
        }
    }
}
