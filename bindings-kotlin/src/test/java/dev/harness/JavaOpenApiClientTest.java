package dev.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Java calls a generated typed client through its CompletableFuture twins, with no Kotlin in sight. */
class JavaOpenApiClientTest {
    private static final UUID ORDER_ID = UUID.fromString("5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10");

    private static Map<String, Object> config() {
        return Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("orders", Map.of(
                        "base_url", TestUpstream.INSTANCE.getUrl() + "/s/java_oa",
                        "retry", Map.of("max_retries", 0))));
    }

    @Test
    void javaCallsTheTypedClientThroughCompletableFutures() throws Exception {
        Map<String, Object> order = Map.of(
                "id", ORDER_ID.toString(),
                "status", "paid",
                "customer_id", "0f0e0d0c-0b0a-4909-8807-060504030201",
                "items", List.of(Map.of("sku", "tea", "quantity", 2, "unit_price", Map.of("amount_minor", 450, "currency", "EUR"))),
                "total", Map.of("amount_minor", 900, "currency", "EUR"),
                "created_at", "2026-12-03T10:00:00Z");
        TestUpstream.INSTANCE.putScript("java_oa", List.of(
                Map.of("status", 200, "json", order),
                Map.of("status", 404, "json", Map.of("code", "order_not_found", "title", "No such order", "status", 404))));
        try (HarnessClient h = new HarnessClient(config())) {
            orders.OrdersClient client = new orders.OrdersClient(h);
            orders.Order o = client.getOrderAsync(ORDER_ID).get(10, TimeUnit.SECONDS);
            assertEquals(orders.OrderStatus.PAID, o.getStatus());
            assertEquals(900L, o.getTotal().getAmountMinor());
            assertEquals(new orders.LineItem("tea", 2, new orders.Money(450L, orders.Currency.EUR)), o.getItems().get(0));

            ExecutionException e = assertThrows(ExecutionException.class, () -> client.getOrderAsync(ORDER_ID).get(10, TimeUnit.SECONDS));
            orders.NotFoundError notFound = assertInstanceOf(orders.NotFoundError.class, e.getCause());
            assertEquals("order_not_found", notFound.getModel().getCode());
            assertEquals(404, notFound.getStatus());
            assertEquals("getOrder", notFound.getEndpoint());
            assertInstanceOf(HarnessException.HttpStatus.class, notFound.getError());
        }
        assertEquals("/s/java_oa/orders/" + ORDER_ID, TestUpstream.INSTANCE.log("java_oa").getJSONArray("requests").getJSONObject(1).getString("path"));
    }
}
