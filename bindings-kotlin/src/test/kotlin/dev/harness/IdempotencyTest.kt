package dev.harness

import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.math.BigDecimal
import java.math.BigInteger
import java.util.concurrent.atomic.AtomicInteger

/** The idempotent receiver in memory: the API, its errors and signatures (Redis: SharedStateTest). */
class IdempotencyTest {
    private val now: String get() = (System.currentTimeMillis() / 1000).toString()

    @Test
    fun `a message delivered twice runs its handler once and both deliveries get equal results`() = runBlocking<Unit> {
        Idempotency(emptyMap()).use { idem ->
            val key = idem.key("acme", "invoice.paid", "m-1")
            assertEquals("harness:idem:acme:invoice.paid:m-1", key)
            val runs = AtomicInteger()
            val first = idem.run(key) {
                runs.incrementAndGet()
                mapOf("n" to 1, "items" to listOf("a", 2.5, true, null), "big" to BigInteger("18446744073709551616"), "text" to "Ünï \"q\"\n😀")
            }
            val second = idem.run(key) {
                runs.incrementAndGet()
                "not this"
            }
            assertEquals(1, runs.get())
            assertEquals(first, second)
            // What came back is the stored JSON read back: integers are Longs, key order is kept.
            assertEquals(
                linkedMapOf("n" to 1L, "items" to listOf("a", 2.5, true, null), "big" to BigInteger("18446744073709551616"), "text" to "Ünï \"q\"\n😀"),
                first,
            )
            assertEquals(listOf("n", "items", "big", "text"), (first as Map<*, *>).keys.toList())
            val metrics = idem.metricsText()
            assertTrue(metrics.contains("harness_idempotency_total{outcome=\"claimed\"} 1"), metrics)
            assertTrue(metrics.contains("harness_idempotency_total{outcome=\"duplicate_processed\"} 1"), metrics)
            assertTrue(metrics.contains("harness_idempotency_total{outcome=\"processed\"} 1"), metrics)
        }
    }

    @Test
    fun `every JSON value reads back equal, on the first delivery and on a duplicate`() = runBlocking<Unit> {
        Idempotency(emptyMap()).use { idem ->
            val values = listOf<Any?>(
                null, true, "", "x", 0L, -7L, Long.MAX_VALUE, BigInteger("-99999999999999999999"), 0.1, -0.0, 1.0E300, 2.5,
                BigDecimal("0.1000000000000000000001"), emptyList<Any?>(), emptyMap<String, Any?>(), listOf(listOf(listOf(1L))),
                mapOf("a" to mapOf("b" to listOf(mapOf("c" to null)))), "\u0000\u001f/\\\t",
            )
            for ((i, v) in values.withIndex()) {
                val key = idem.key("t", "values", "v-$i")
                val first = idem.run(key) { v }
                assertEquals(v, first, "value $i")
                assertEquals(first, idem.run(key) { error("must not run") }, "value $i")
            }
            // Ints, Floats and BigDecimals a Double holds come back in JSON's own types.
            assertEquals(listOf(1L, 2.5, 0.5), idem.run(idem.key("t", "values", "kinds")) { listOf(1, 2.5f, BigDecimal("0.5")) })
        }
    }

    @Test
    fun `a duplicate while the first delivery runs is a DuplicateInFlight with the lease left`() = runBlocking<Unit> {
        Idempotency(mapOf("lease_ms" to 20_000)).use { idem ->
            val key = idem.key("acme", "order.created", "m-2")
            val started = CompletableDeferred<Unit>()
            val release = CompletableDeferred<Unit>()
            val first = async(Dispatchers.Default) {
                idem.run(key) {
                    started.complete(Unit)
                    release.await()
                    "first"
                }
            }
            started.await()
            val e = assertThrows<HarnessException.DuplicateInFlight> { runBlocking { idem.run(key) { error("must not run") } } }
            assertEquals("DuplicateInFlightError", e.kind)
            assertEquals("duplicate_in_flight", e.code)
            assertTrue(e.retryAfterMs!! in 1..20_000, "retryAfterMs ${e.retryAfterMs}")
            assertTrue(e.message!!.startsWith("DuplicateInFlightError: "), e.message)
            release.complete(Unit)
            assertEquals("first", first.await())
            assertEquals("first", idem.run(key) { error("must not run") })
        }
    }

    @Test
    fun `a handler that throws fails the claim and a redelivery runs it again`() = runBlocking<Unit> {
        Idempotency(emptyMap()).use { idem ->
            val key = idem.key("acme", "order.created", "m-3")
            val runs = AtomicInteger()
            val e = assertThrows<IllegalStateException> {
                runBlocking {
                    idem.run(key) {
                        runs.incrementAndGet()
                        throw IllegalStateException("boom")
                    }
                }
            }
            assertEquals("boom", e.message)
            assertEquals("second", idem.run(key) { runs.incrementAndGet(); "second" })
            assertEquals(2, runs.get())
            assertTrue(idem.metricsText().contains("harness_idempotency_total{outcome=\"failed\"} 1"))
        }
    }

    @Test
    fun `with retry_failed off a failed message is not run again`() = runBlocking<Unit> {
        Idempotency(mapOf("retry_failed" to false)).use { idem ->
            val key = idem.key("acme", "order.created", "m-4")
            assertThrows<IllegalArgumentException> { runBlocking { idem.run(key) { throw IllegalArgumentException("bad input") } } }
            val e = assertThrows<HarnessException.Other> { runBlocking { idem.run(key) { error("must not run") } } }
            assertEquals("failed_before", e.code)
        }
    }

    @Test
    fun `a result that is not JSON fails the claim as a ConfigError naming where it sits`() = runBlocking<Unit> {
        class Receipt(val id: String)
        Idempotency(emptyMap()).use { idem ->
            val key = idem.key("acme", "order.created", "m-5")
            val e = assertThrows<HarnessException.Config> { runBlocking { idem.run(key) { mapOf("receipt" to Receipt("r-1")) } } }
            assertTrue(e.reason.startsWith("result.receipt: cannot be written as JSON"), e.reason)
            val nan = assertThrows<HarnessException.Config> { runBlocking { idem.run(key) { listOf(Double.NaN) } } }
            assertTrue(nan.reason.startsWith("result[0]: NaN"), nan.reason)
            // Both were failures: the message still runs.
            assertEquals("ok", idem.run(key) { "ok" })
        }
    }

    data class Receipt(val id: String, val cents: Long)

    /** A hand-written codec; kotlinx.serialization or Jackson fit the same two functions. */
    object Receipts : ResultCodec<Receipt> {
        override fun encode(value: Receipt) = """{"id":${Json.encode(value.id, "id")},"cents":${value.cents}}"""

        override fun decode(json: String): Receipt {
            val m = OrderedJson.parse(json) as Map<*, *>
            return Receipt(m["id"] as String, (m["cents"] as Number).toLong())
        }
    }

    @Test
    fun `a codec stores your own type and a duplicate decodes an equal value`() = runBlocking<Unit> {
        Idempotency(emptyMap()).use { idem ->
            val key = idem.key("acme", "payment", "m-6")
            val first = idem.run(key, Receipts) { Receipt("r-\"1\"", 1250) }
            val second = idem.run(key, Receipts) { error("must not run") }
            assertEquals(Receipt("r-\"1\"", 1250), first)
            assertEquals(first, second)
            // The stored text is JSON any receiver can read.
            assertEquals(mapOf("id" to "r-\"1\"", "cents" to 1250L), idem.run(key) { error("must not run") })
        }
    }

    @Test
    fun `a caller cancelled while its handler runs fails the claim, so a redelivery runs`() = runBlocking<Unit> {
        Idempotency(emptyMap()).use { idem ->
            val key = idem.key("acme", "order.created", "m-7")
            val started = CompletableDeferred<Unit>()
            val job = launch(Dispatchers.Default) {
                idem.run(key) {
                    started.complete(Unit)
                    awaitCancellation()
                }
            }
            started.await()
            job.cancelAndJoin()
            assertEquals("again", idem.run(key) { "again" })
        }
    }

    @Test
    fun `a bad key part is a ConfigError naming the part`() {
        Idempotency(emptyMap()).use { idem ->
            for ((args, part) in listOf(
                Triple("", "e", "m") to "tenant",
                Triple("t", "", "m") to "event_type",
                Triple("t", "e", "a\nb") to "msg_id",
                Triple("t".repeat(257), "e", "m") to "tenant",
                Triple("t", "e", "\uD800") to "msg_id",
            )) {
                val e = assertThrows<HarnessException.Config> { idem.key(args.first, args.second, args.third) }
                assertTrue(e.reason.startsWith("$part: "), e.reason)
                assertFalse(e.message!!.contains('\n'), e.message)
            }
            val e = assertThrows<HarnessException.Config> { runBlocking { idem.run("") { error("must not run") } } }
            assertTrue(e.reason.startsWith("key: "), e.reason)
        }
    }

    @Test
    fun `a bad config is a ConfigError naming the field`() {
        for ((config, field) in listOf(
            mapOf("lease_ms" to 0) to "lease_ms",
            mapOf("ttl_ms" to -1) to "ttl_ms",
            mapOf("on_store_down" to "maybe") to "on_store_down",
            mapOf("redis_url" to "http://x") to "redis_url",
            mapOf("signature" to mapOf("secret" to mapOf("env" to "HARNESS_TEST_NO_SUCH_VAR"))) to "signature.secret",
        )) {
            val e = assertThrows<HarnessException.Config> { Idempotency(config) }
            assertTrue(e.reason.startsWith(field), "$config: ${e.reason}")
        }
        val unknown = assertThrows<HarnessException.Config> { Idempotency(mapOf("lease" to 5)) }
        assertTrue(unknown.reason.contains("lease"), unknown.reason)
    }

    @Test
    fun `signatures verify, a bad or stale one is an AuthError, and the secret never shows`() {
        val secret = "whsec-kotlin-secret-value"
        Idempotency(mapOf("signature" to mapOf("secret" to mapOf("value" to secret), "max_skew_ms" to 60_000))).use { idem ->
            val body = """{"event":"invoice.paid"}""".toByteArray()
            val ts = now
            val sig = idem.sign(ts, body)
            assertEquals(64, sig.length)
            idem.verify(ts, body, sig)
            idem.verify(ts, body, "sha256=$sig")

            val bad = assertThrows<HarnessException.Auth> { idem.verify(ts, body + ' '.code.toByte(), sig) }
            assertEquals("bad_signature", bad.code)
            val notHex = assertThrows<HarnessException.Auth> { idem.verify(ts, body, "zz") }
            assertEquals("bad_signature", notHex.code)
            val staleTs = ((System.currentTimeMillis() / 1000) - 3600).toString()
            val stale = assertThrows<HarnessException.Auth> { idem.verify(staleTs, body, idem.sign(staleTs, body)) }
            assertEquals("stale_signature", stale.code)

            for (text in listOf(idem.toString(), bad.message, stale.message, bad.toString(), idem.metricsText())) {
                assertFalse(text!!.contains(secret), text)
            }
            assertTrue(idem.toString().contains("***"), idem.toString())
        }
        Idempotency(emptyMap()).use { idem ->
            val e = assertThrows<HarnessException.Config> { idem.verify(now, ByteArray(0), "00") }
            assertTrue(e.reason.startsWith("signature"), e.reason)
        }
    }

    @Test
    fun `a closed receiver refuses every call`() = runBlocking<Unit> {
        val idem = Idempotency(emptyMap())
        val key = idem.key("t", "e", "m")
        idem.close()
        idem.close()
        assertTrue(idem.isClosed)
        assertInstanceOf(HarnessException.Other::class.java, assertThrows<HarnessException> { idem.key("t", "e", "m") })
        val e = assertThrows<HarnessException.Other> { runBlocking { idem.run(key) { error("must not run") } } }
        assertTrue(e.reason.contains("closed"), e.reason)
        assertTrue(idem.toString().startsWith("Idempotency"))
    }

    @Test
    fun `stored text that is not JSON is reported, not misread`() {
        assertEquals(linkedMapOf("a" to listOf(1L, "x")), Json.decode(""" { "a" : [ 1 , "x" ] } """))
        for (text in listOf("", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "nul", "[1] 2", "\"\u0001\"", "NaN")) {
            assertThrows<IllegalArgumentException>(text) { Json.decode(text) }
        }
        val deep = "[".repeat(Json.maxDepth + 1) + "]".repeat(Json.maxDepth + 1)
        assertTrue(assertThrows<IllegalArgumentException> { Json.decode(deep) }.message!!.contains("nested deeper than 512"))
        assertNull(Json.decode("null"))
    }
}
