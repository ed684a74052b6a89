package dev.harness

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.net.URI
import java.net.URLDecoder
import java.time.OffsetDateTime
import java.time.ZoneOffset
import java.util.UUID

/**
 * The clients `harness codegen --lang kotlin` generated from examples/openapi (checked in under
 * examples/openapi/kotlin, compiled with these tests) against the test upstream: what goes on
 * the wire for each parameter kind, typed answers and errors, retries, a drifted answer, and the
 * endpoint label per operation. The same scenarios as bindings-python/tests/test_openapi_clients.py.
 */
class OpenApiClientsTest {
    private val orderId = UUID.fromString("5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10")
    private val order = mapOf(
        "id" to orderId.toString(),
        "status" to "open",
        "customer_id" to "0f0e0d0c-0b0a-4909-8807-060504030201",
        "items" to listOf(mapOf("sku" to "tea", "quantity" to 2, "unit_price" to mapOf("amount_minor" to 450, "currency" to "EUR"))),
        "total" to mapOf("amount_minor" to 900, "currency" to "EUR"),
        "note" to JSONObject.NULL,
        "created_at" to "2026-12-03T10:00:00.1234567Z",
    )
    private val problem = mapOf("code" to "order_not_found", "title" to "No such order", "status" to 404)

    /** Each example service on its own upstream script, named for the test. */
    private fun config(script: String, retries: Int = 0, extra: Map<String, Any?> = emptyMap()): Map<String, Any?> = mapOf(
        "log" to mapOf("enabled" to false),
        "services" to listOf("orders", "users", "payments").associateWith {
            mapOf("base_url" to "${TestUpstream.url}/s/$script", "retry" to mapOf("max_retries" to retries, "base_delay_ms" to 1, "jitter" to false)) + extra
        },
    )

    private fun requests(script: String): List<JSONObject> {
        val a = TestUpstream.log(script).getJSONArray("requests")
        return (0 until a.length()).map { a.getJSONObject(it) }
    }

    private fun queryOf(logged: JSONObject): List<Pair<String, String>> {
        val q = URI("http://x" + logged.getString("path")).rawQuery ?: return emptyList()
        return q.split("&").map { it.split("=", limit = 2) }.map { (k, v) -> URLDecoder.decode(k, Charsets.UTF_8) to URLDecoder.decode(v, Charsets.UTF_8) }
    }

    @Test
    fun `every parameter kind goes on the wire as the document says`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_oa_params", listOf(mapOf("json" to mapOf("items" to listOf(order), "next_cursor" to "c2"))))
        val after = OffsetDateTime.of(2026, 12, 1, 8, 30, 0, 0, ZoneOffset.UTC)
        HarnessClient(config("kt_oa_params")).use { h ->
            val page = orders.OrdersClient(h).listOrders(
                xTenant = "acme", status = listOf(orders.OrderStatus.OPEN, orders.OrderStatus.PAID), tags = listOf("a b", "c"), createdAfter = after, limit = 5,
            )
            assertEquals("c2", page.nextCursor)
            val first = page.items[0]
            assertEquals(orderId, first.id)
            assertEquals(OffsetDateTime.of(2026, 12, 3, 10, 0, 0, 123456700, ZoneOffset.UTC), first.createdAt)
            assertEquals(orders.Money(amountMinor = 450, currency = orders.Currency.EUR), first.items[0].unitPrice)
            assertNull(first.note)
            // Metrics (and breakers) are per operation: the endpoint label is the operationId.
            assertTrue(h.metrics().contains("endpoint=\"listOrders\""), h.metrics())
        }
        val (logged) = requests("kt_oa_params")
        assertEquals("/s/kt_oa_params/orders", logged.getString("path").substringBefore('?'))
        // status explodes (form), tags joins with commas (explode: false), a date-time is RFC 3339.
        assertEquals(
            listOf("status" to "open", "status" to "paid", "tags" to "a b,c", "created_after" to "2026-12-01T08:30:00Z", "limit" to "5"),
            queryOf(logged),
        )
        assertEquals("acme", logged.getJSONObject("headers").getString("x-tenant"))
    }

    @Test
    fun `a path parameter is percent-encoded and pipe-delimited arrays join with pipes`() = runBlocking<Unit> {
        TestUpstream.putScript(
            "kt_oa_users",
            listOf(
                mapOf("json" to mapOf("page" to 1, "per_page" to 10, "total" to 0, "users" to emptyList<Any>())),
                mapOf("status" to 204),
                mapOf("status" to 404, "json" to problem),
            ),
        )
        HarnessClient(config("kt_oa_users")).use { h ->
            val client = users.UsersClient(h)
            val page = client.listUsers(role = listOf(users.Role.ADMIN, users.Role.STAFF), page = 1)
            assertEquals(0L, page.total)
            assertEquals(emptyList<users.User>(), page.users)
            assertEquals(Unit, client.deleteUser(userId = 7L))
            val e = assertThrows<users.NotFoundError> { client.deleteUser(userId = Long.MAX_VALUE) }
            assertEquals("deleteUser", e.endpoint)
        }
        val (listed, deleted, missing) = requests("kt_oa_users")
        assertEquals(listOf("role" to "admin|staff", "page" to "1"), queryOf(listed))
        assertEquals("DELETE", deleted.getString("method"))
        assertEquals("/s/kt_oa_users/users/7", deleted.getString("path"))
        assertEquals("/s/kt_oa_users/users/9223372036854775807", missing.getString("path"))

        TestUpstream.putScript("kt_oa_path", listOf(mapOf("status" to 404, "json" to problem)))
        HarnessClient(config("kt_oa_path")).use { h ->
            assertThrows<payments.NotFoundError> { payments.PaymentsClient(h).getPayment(paymentId = "a/b c?d#é%") }
        }
        assertEquals("/s/kt_oa_path/payments/a%2Fb%20c%3Fd%23%C3%A9%25", requests("kt_oa_path")[0].getString("path"))
    }

    @Test
    fun `a declared error is thrown as its sealed typed error with the body as its model`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_oa_404", listOf(mapOf("status" to 404, "json" to problem), mapOf("status" to 418, "json" to problem)))
        HarnessClient(config("kt_oa_404")).use { h ->
            val client = orders.OrdersClient(h)
            val e = assertThrows<orders.NotFoundError> { client.getOrder(orderId) }
            assertEquals(orders.Problem(code = "order_not_found", title = "No such order", status = 404), e.model)
            assertEquals(listOf(404, "orders", "getOrder", "order_not_found", "HttpStatusError"), listOf(e.status, e.service, e.endpoint, e.code, e.kind))
            assertInstanceOf(HarnessException.HttpStatus::class.java, e.error)
            assertTrue(e.traceId!!.length == 32)
            // The operation's errors are a sealed interface: this `when` is exhaustive without `else`.
            val what: orders.GetOrderError = e
            val text = when (what) {
                is orders.NotFoundError -> "missing: ${what.model.code}"
            }
            assertEquals("missing: order_not_found", text)
            // A status the operation does not declare stays Harness's own error.
            val other = assertThrows<HarnessException.HttpStatus> { client.getOrder(orderId) }
            assertEquals(418, other.status)
        }
    }

    @Test
    fun `an answer that drifted from the document names its JSON pointer`() = runBlocking<Unit> {
        val drifted = order + ("items" to listOf(mapOf("sku" to "tea", "quantity" to 2, "unit_price" to mapOf("amount_minor" to 4.5, "currency" to "EUR"))))
        TestUpstream.putScript("kt_oa_drift", listOf(mapOf("json" to drifted), mapOf("json" to order + ("status" to "lost"))))
        HarnessClient(config("kt_oa_drift")).use { h ->
            val client = orders.OrdersClient(h)
            val e = assertThrows<HarnessException.Schema> { client.getOrder(orderId) }
            assertEquals(
                "getOrder: the 200 response does not match the document: /items/0/unit_price/amount_minor: expected an integer, got a number",
                e.reason,
            )
            assertEquals(listOf("SchemaError", "getOrder", 200, "orders", 1), listOf(e.kind, e.endpoint, e.status, e.service, e.attempts))
            val lost = assertThrows<HarnessException.Schema> { client.getOrder(orderId) }
            assertTrue(lost.reason.endsWith("/status: expected one of \"open\", \"paid\", \"shipped\", \"cancelled\", got \"lost\""), lost.reason)
        }
    }

    @Test
    fun `a GET is retried after a 503 and so is a POST with an Idempotency-Key, a POST without one is not`() = runBlocking<Unit> {
        val payment = mapOf(
            "id" to "pay_1", "created_at" to "2026-12-03T10:00:00Z", "order_id" to orderId.toString(), "status" to "pending",
            "amount" to mapOf("amount_minor" to 900, "currency" to "EUR"), "method" to mapOf("type" to "card", "last4" to "4242"),
        )
        val unavailable = mapOf("status" to 503, "json" to mapOf("code" to "down"))
        TestUpstream.putScript(
            "kt_oa_retry",
            listOf(unavailable, mapOf("json" to payment), unavailable, mapOf("status" to 201, "json" to payment), unavailable),
        )
        val request = payments.PaymentRequestInput(orderId = orderId, amount = payments.Money(900, payments.Currency.EUR), method = payments.CardInput(token = "tok_1"))
        HarnessClient(config("kt_oa_retry", retries = 2)).use { h ->
            val client = payments.PaymentsClient(h)
            assertEquals("pay_1", client.getPayment("pay_1").id)
            val made = client.createPayment(request, idempotencyKey = "k-1")
            assertEquals(payments.Card(last4 = "4242"), made.method)
            val e = assertThrows<HarnessException.HttpStatus> { client.createPayment(request) }
            assertEquals(listOf(503, 1, "createPayment"), listOf(e.status, e.attempts, e.endpoint))
        }
        val log = requests("kt_oa_retry")
        assertEquals(listOf("GET", "GET", "POST", "POST", "POST"), log.map { it.getString("method") })
        assertEquals(listOf("k-1", "k-1"), log.subList(2, 4).map { it.getJSONObject("headers").getString("idempotency-key") })
        assertFalse(log[4].getJSONObject("headers").has("idempotency-key"))
    }

    /** The services with their documents in the config: the core knows every operation. */
    private fun withDocuments(script: String, validate: String): Map<String, Any?> = mapOf(
        "log" to mapOf("enabled" to false),
        "services" to listOf("orders", "users", "payments").associateWith {
            mapOf(
                "base_url" to "${TestUpstream.url}/s/$script",
                "retry" to mapOf("max_retries" to 2, "base_delay_ms" to 1, "jitter" to false),
                "openapi" to mapOf("spec" to java.io.File(TestUpstream.repoRoot, "examples/openapi/$it.yaml").path, "validate" to validate),
            )
        },
    )

    @Test
    fun `with the documents in the config the core enforces or warns on an answer off its schema and keys a POST`() = runBlocking<Unit> {
        // quantity has `minimum: 1`: a type the model reads, a value the document refuses.
        val off = order + ("items" to listOf(mapOf("sku" to "tea", "quantity" to 0, "unit_price" to mapOf("amount_minor" to 450, "currency" to "EUR"))))
        TestUpstream.putScript("kt_oa_doc", listOf(mapOf("json" to off), mapOf("status" to 503), mapOf("status" to 201, "json" to order)))
        val input = orders.OrderInput(
            customerId = UUID.fromString("0f0e0d0c-0b0a-4909-8807-060504030201"),
            items = listOf(orders.LineItem(sku = "tea", quantity = 2, unitPrice = orders.Money(450, orders.Currency.EUR))),
        )
        HarnessClient(withDocuments("kt_oa_doc", "enforce")).use { h ->
            val client = orders.OrdersClient(h)
            val e = assertThrows<HarnessException.Schema> { client.getOrder(orderId) }
            assertEquals(listOf("getOrder", 200, "schema_mismatch"), listOf(e.endpoint, e.status, e.code))
            assertTrue(e.reason.contains("at /items/0/quantity"), e.reason)
            // No key given: the operation declares one, so Harness sends a fresh one and may retry.
            assertEquals(orderId, client.createOrder(input).id)
        }
        val keys = requests("kt_oa_doc").filter { it.getString("method") == "POST" }.map { it.getJSONObject("headers").getString("idempotency-key") }
        assertEquals(2, keys.size)
        assertTrue(keys[0].isNotEmpty() && keys[0] == keys[1], keys.toString())

        TestUpstream.putScript("kt_oa_warn", listOf(mapOf("json" to off)))
        HarnessClient(withDocuments("kt_oa_warn", "warn")).use { h ->
            val events = java.util.concurrent.CopyOnWriteArrayList<HarnessEvent>()
            h.addListener { events.add(it) }
            assertEquals(0, orders.OrdersClient(h).getOrder(orderId).items[0].quantity)
            h.flush()
            val warned = events.filterIsInstance<HarnessEvent.SchemaViolation>()
            assertEquals(listOf("warn", "getOrder"), warned.map { listOf(it.mode, it.endpoint) }.single())
            assertTrue(warned.single().violation.contains("at /items/0/quantity"), warned.toString())
            assertTrue(h.metrics().contains("harness_schema_violations_total{service=\"orders\",endpoint=\"getOrder\"} 1"))
        }
    }

    @Test
    fun `a payment reads its tagged method and a typed 422, and the body is the document's JSON`() = runBlocking<Unit> {
        val payment = mapOf(
            "id" to "pay_1", "created_at" to "2026-12-03T10:00:00Z", "order_id" to orderId.toString(), "status" to "pending",
            "amount" to mapOf("amount_minor" to 900, "currency" to "EUR"),
            "method" to mapOf("type" to "bank_transfer", "iban" to "DE00", "reference" to JSONObject.NULL),
            "failure" to JSONObject.NULL,
        )
        val declined = mapOf("code" to "declined", "title" to "Declined", "status" to 422, "decline_code" to "expired")
        TestUpstream.putScript(
            "kt_oa_pay",
            listOf(mapOf("status" to 201, "json" to payment), mapOf("status" to 422, "json" to declined), mapOf("status" to 418, "json" to problem), mapOf("status" to 404, "json" to problem)),
        )
        val request = payments.PaymentRequestInput(orderId = orderId, amount = payments.Money(900, payments.Currency.EUR), method = payments.CardInput(token = "tok_1"))
        HarnessClient(config("kt_oa_pay")).use { h ->
            val client = payments.PaymentsClient(h)
            val made = client.createPayment(request, idempotencyKey = "k-1")
            assertEquals(payments.BankTransfer(iban = "DE00"), made.method)
            assertNull(made.failure)
            val e = assertThrows<payments.UnprocessableEntityError> { client.createPayment(request) }
            assertEquals("expired", e.model.declineCode)
            val exhaustive: payments.CreatePaymentError = e
            assertEquals(422, when (exhaustive) { is payments.ConflictError -> 409; is payments.UnprocessableEntityError -> 422 })
            // getPayment declares 404 and `default`: any other error status is the DefaultError.
            val other = assertThrows<payments.DefaultError> { client.getPayment("pay_1") }
            assertEquals(listOf(418, "order_not_found"), listOf(other.status, other.model.code))
            assertThrows<payments.NotFoundError> { client.getPayment("pay_1") }
        }
        val first = requests("kt_oa_pay")[0]
        assertEquals(
            """{"order_id":"5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10","amount":{"amount_minor":900,"currency":"EUR"},"method":{"token":"tok_1","type":"card"},"capture":true}""",
            first.getString("body"),
        )
    }

    @Test
    fun `cancelling the CompletableFuture twin cancels the call and frees its permit`() {
        TestUpstream.putScript("kt_oa_cancel", listOf(mapOf("action" to "hang")))
        val extra = mapOf("bulkhead" to mapOf("max_concurrency" to 10), "timeouts" to mapOf("response_ms" to 60_000, "request_ms" to 60_000))
        HarnessClient(config("kt_oa_cancel", extra = extra)).use { h ->
            val f = orders.OrdersClient(h).getOrderAsync(orderId)
            val deadline = System.nanoTime() + 5_000_000_000
            while (h.bulkheadInUse("orders") == 0 && System.nanoTime() < deadline) Thread.sleep(10)
            assertEquals(1, h.bulkheadInUse("orders"))
            assertTrue(f.cancel(true))
            while (h.bulkheadInUse("orders") != 0 && System.nanoTime() < deadline) Thread.sleep(10)
            assertEquals(0, h.bulkheadInUse("orders"))
            assertTrue(f.isCancelled)
        }
    }

    @Test
    fun `a client generated for another runtime contract is refused when constructed`() {
        dev.harness.openapi.requireContract(dev.harness.openapi.CONTRACT, "orders")
        val e = assertThrows<IllegalStateException> { dev.harness.openapi.requireContract(dev.harness.openapi.CONTRACT + 1, "orders") }
        assertTrue(e.message!!.startsWith("orders was generated by `harness codegen` for typed-client contract 2, but this harness-sdk provides contract 1"), e.message)
    }

    @Test
    fun `models read and write their JSON, also through kotlinx serialization`() {
        val text = JSONObject(order).toString()
        val read = Json.decodeFromString(orders.Order.serializer(), text)
        assertEquals(orderId, read.id)
        assertEquals(read, Json.decodeFromString(orders.Order.serializer(), Json.encodeToString(orders.Order.serializer(), read)))
        assertFalse(read.toJson().containsKey("note"))
        assertEquals(JsonPrimitive("2026-12-03T10:00:00.1234567Z"), read.toJson()["created_at"])
        val e = assertThrows<HarnessException.Schema> { orders.Order.fromJson(Json.parseToJsonElement(JSONObject(order - "items").toString())) }
        assertEquals("/: the required key 'items' is missing", e.reason)
        val user = users.UserInput(email = "a@example.com", role = users.Role.STAFF, password = "correct horse battery", avatar = byteArrayOf(0x89.toByte(), 0x50, 0x4e, 0x47))
        assertEquals(
            Json.parseToJsonElement("""{"email":"a@example.com","role":"staff","password":"correct horse battery","avatar":"iVBORw=="}"""),
            user.toJson(),
        )
        // A tagged union member knows its tag; an unknown tag names the property's pointer.
        assertEquals(JsonPrimitive("wallet"), (payments.Wallet(provider = "apple_pay").toJson() as JsonObject)["type"])
        val bad = assertThrows<HarnessException.Schema> { payments.PaymentMethod.fromJson(Json.parseToJsonElement("""{"type":"cash"}"""), "/method") }
        assertEquals("/method/type: expected one of 'card', 'bank_transfer', 'wallet', got a string", bad.reason)
    }
}
