package dev.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Java callers use the binding through CompletableFuture, with no Kotlin in sight. */
class JavaApiTest {
    private static Map<String, Object> config() {
        return Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("svc", Map.of(
                        "base_url", TestUpstream.INSTANCE.getUrl(),
                        "retry", Map.of("max_retries", 0))));
    }

    @Test
    void javaCallersGetCompletableFutures() throws Exception {
        TestUpstream.INSTANCE.putScript("java_api", List.of(Map.of("status", 200, "json", Map.of("hello", "java"))));
        try (HarnessClient client = new HarnessClient(config())) {
            HarnessResponse r = client.getAsync("svc", "/s/java_api/a").get(10, TimeUnit.SECONDS);
            assertEquals(200, r.getStatus());
            assertEquals("{\"hello\":\"java\"}", r.text());
            assertEquals(1, r.getAttempts());
            assertEquals(List.of("application/json"), r.getHeaders().values("Content-Type"));
            assertEquals("application/json", r.header("content-type"));

            HarnessRequest req = new HarnessRequest("svc", "POST", "/s/java_api/b")
                    .withHeader("x-from", "java")
                    .withAddedHeader("x-from", "java-again")
                    .withJson(Map.of("n", 1))
                    .withIdempotencyKey("k-1");
            CompletableFuture<HarnessResponse> f = client.requestAsync(req);
            assertEquals(200, f.join().getStatus());
            var sent = TestUpstream.INSTANCE.log("java_api").getJSONArray("requests").getJSONObject(1).getJSONArray("header_list");
            var from = new java.util.ArrayList<String>();
            for (int i = 0; i < sent.length(); i++) {
                if (sent.getJSONArray(i).getString(0).equals("x-from")) from.add(sent.getJSONArray(i).getString(1));
            }
            assertEquals(List.of("java", "java-again"), from);
            assertTrue(client.metrics().contains("harness_requests_total"));
            assertEquals("closed", client.breakerState("svc", "GET", "/s/java_api/a"));
            assertEquals(0, client.bulkheadInUse("svc"));
        }
    }

    @Test
    void javaCallersCatchTypedExceptions() {
        TestUpstream.INSTANCE.putScript("java_err", List.of(Map.of("status", 404, "json", Map.of("code", "NOT_FOUND"))));
        try (HarnessClient client = new HarnessClient(config())) {
            CompletionException e = assertThrows(CompletionException.class,
                    () -> client.getAsync("svc", "/s/java_err/x").join());
            HarnessException.HttpStatus h = assertInstanceOf(HarnessException.HttpStatus.class, e.getCause());
            assertEquals("HttpStatusError", h.getKind());
            assertEquals(404, h.getStatus());
            assertEquals("NOT_FOUND", h.getCode());
        }
        HarnessException.Config bad = assertThrows(HarnessException.Config.class,
                () -> new HarnessClient(Map.of("services", Map.of("svc", Map.of("base_url", "")))));
        assertTrue(bad.getMessage().contains("services.svc.base_url"), bad.getMessage());
    }

    @Test
    void cancellingTheFutureFreesThePermit() throws Exception {
        TestUpstream.INSTANCE.putScript("java_cancel", List.of(Map.of("action", "hang")));
        try (HarnessClient client = new HarnessClient(config())) {
            CompletableFuture<HarnessResponse> f = client.getAsync("svc", "/s/java_cancel/x");
            long until = System.nanoTime() + 5_000_000_000L;
            while (client.bulkheadInUse("svc") == 0 && System.nanoTime() < until) Thread.sleep(2);
            assertEquals(1, client.bulkheadInUse("svc"));
            f.cancel(true);
            until = System.nanoTime() + 2_000_000_000L;
            while (client.bulkheadInUse("svc") != 0 && System.nanoTime() < until) Thread.sleep(2);
            assertEquals(0, client.bulkheadInUse("svc"));
        }
    }
}
