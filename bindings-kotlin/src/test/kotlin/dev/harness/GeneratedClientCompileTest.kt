package dev.harness

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The generated clients' types are checked by the compiler: a right call compiles, a call with
 * a wrong argument type or without a required parameter does not (the Kotlin side of
 * bindings-python's `mypy --strict` test).
 */
class GeneratedClientCompileTest {
    private val head = """
        import dev.harness.HarnessClient
        import java.util.UUID

        suspend fun use(h: HarnessClient) {
            val c = orders.OrdersClient(h)

    """.trimIndent()

    @Test
    fun `right calls compile and wrong ones fail with the compiler's reason`() {
        val good = KotlinCompiler.compileSnippet(
            "Good.kt",
            head + """
                val o: orders.Order = c.getOrder(orderId = UUID.randomUUID())
                val item = orders.LineItem(sku = "a", quantity = 1, unitPrice = orders.Money(amountMinor = 1, currency = orders.Currency.EUR))
                val page: orders.OrderPage = c.listOrders(xTenant = "t", status = listOf(orders.OrderStatus.OPEN))
                val f: java.util.concurrent.CompletableFuture<orders.Order> = c.getOrderAsync(UUID.randomUUID())
                println(listOf(o, item, page, f))
            }
            """.trimIndent(),
        )
        assertTrue(good.ok, good.messages)

        val bad = KotlinCompiler.compileSnippet(
            "Bad.kt",
            head + """
                c.getOrder(orderId = "not-a-uuid")
                orders.LineItem(sku = "a", quantity = 1)
                c.listOrders(status = listOf("lost"))
            }
            """.trimIndent(),
        )
        assertFalse(bad.ok, bad.messages)
        val errors = bad.messages.lines().filter { ": error: " in it }
        // Line 6: a wrong argument type; 7: a missing required field; 8: a missing header parameter and a value the enum lacks.
        assertTrue(errors.any { "Bad.kt:6:" in it && "argument type mismatch: actual type is 'String', but 'UUID' was expected" in it }, bad.messages)
        assertTrue(errors.any { "Bad.kt:7:" in it && "no value passed for parameter 'unitPrice'" in it }, bad.messages)
        assertTrue(errors.any { "Bad.kt:8:" in it && "no value passed for parameter 'xTenant'" in it }, bad.messages)
        assertTrue(errors.any { "Bad.kt:8:" in it && "actual type is 'List<String>', but 'List<OrderStatus>?' was expected" in it }, bad.messages)
        assertEquals(4, errors.size, bad.messages)
    }
}
