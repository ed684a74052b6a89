package dev.harness;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import kotlinx.serialization.json.Json;
import kotlinx.serialization.json.JsonElement;
import kotlinx.serialization.json.JsonElementKt;
import kotlinx.serialization.json.JsonObject;
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
            BreakerInfo details = client.breakerDetails("svc", "GET", "/s/java_api/a");
            assertEquals("closed", details.getPhase());
            assertEquals(1.0, details.getAdmitRatio());
            assertEquals(0.0, details.getFailureRate());
            assertEquals("/named", client.breakerDetails("svc", "GET", "/s/java_api/a", "/named").getEndpoint());
            assertTrue(client.bulkheadLimit("svc") > 0);
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

    private static void awaitNoPermits(HarnessClient client) throws InterruptedException {
        long until = System.nanoTime() + 1_000_000_000L;
        while (client.bulkheadInUse("svc") != 0 && System.nanoTime() < until) Thread.sleep(2);
        assertEquals(0, client.bulkheadInUse("svc"));
    }

    @Test
    void javaCallersReadAStreamAsAnInputStream() throws Exception {
        TestUpstream.INSTANCE.putScript("java_stream", List.of(Map.of("chunks", List.of(
                Map.of("data", "alpha;"), Map.of("data", "beta;", "delay_ms", 20), Map.of("data", "gamma")))));
        try (HarnessClient client = new HarnessClient(config())) {
            try (HarnessStream s = client.streamAsync(new HarnessRequest("svc", "GET", "/s/java_stream/x")).get(10, TimeUnit.SECONDS);
                 InputStream in = s.inputStream()) {
                assertEquals(200, s.getStatus());
                assertEquals("alpha;beta;gamma", new String(in.readAllBytes(), StandardCharsets.UTF_8));
                assertEquals(-1, in.read());
            }
            awaitNoPermits(client);

            // Closing after one read cancels the rest (its last piece is seconds away).
            TestUpstream.INSTANCE.putScript("java_stream_early", List.of(Map.of("chunks", List.of(
                    Map.of("data", "one;"), Map.of("data", "two;", "delay_ms", 5000)))));
            HarnessStream s = client.streamAsync(new HarnessRequest("svc", "GET", "/s/java_stream_early/x")).join();
            InputStream in = s.inputStream();
            byte[] buf = new byte[16];
            int n = in.read(buf);
            assertEquals("one;", new String(buf, 0, n, StandardCharsets.UTF_8));
            assertEquals(1, client.bulkheadInUse("svc"));
            in.close();
            awaitNoPermits(client);
            assertThrows(IOException.class, in::read);

            // An error status fails the future; a read error is an IOException caused by the HarnessException.
            TestUpstream.INSTANCE.putScript("java_stream_err", List.of(Map.of("status", 500)));
            CompletionException e = assertThrows(CompletionException.class,
                    () -> client.streamAsync(new HarnessRequest("svc", "GET", "/s/java_stream_err/x")).join());
            assertInstanceOf(HarnessException.HttpStatus.class, e.getCause());
            TestUpstream.INSTANCE.putScript("java_stream_cut", List.of(Map.of("chunks", List.of(Map.of("data", "partial")), "cut", true)));
            try (HarnessStream cut = client.streamAsync(new HarnessRequest("svc", "GET", "/s/java_stream_cut/x")).join()) {
                IOException io = assertThrows(IOException.class, () -> cut.inputStream().readAllBytes());
                assertInstanceOf(HarnessException.class, io.getCause());
            }
            awaitNoPermits(client);
        }
    }

    @Test
    void javaCallersListenReloadAndWatch() throws Exception {
        Path dir = Files.createTempDirectory("harness-java");
        Path file = dir.resolve("harness.json");
        String json = "{\"log\":{\"enabled\":false},\"services\":{\"svc\":{\"base_url\":\"" + TestUpstream.INSTANCE.getUrl() + "\"}}}";
        Files.writeString(file, json);
        try (HarnessClient client = HarnessClient.fromFile(file.toString(), true)) {
            List<HarnessEvent> events = new CopyOnWriteArrayList<>();
            client.addListener(events::add);
            String v1 = client.getConfigVersion();
            assertEquals(200, client.getAsync("svc", "/bench").join().getStatus());
            String v2 = client.reloadJson(json.replace("}}}", ",\"retry\":{\"max_retries\":3}}}}"));
            assertNotEquals(v1, v2);
            assertEquals(v1, client.reloadFile(file.toString()));
            HarnessException.Config bad = assertThrows(HarnessException.Config.class, () -> client.reloadJson("{\"services\":{\"svc\":{}}}"));
            assertTrue(bad.getReason().startsWith("services.svc.base_url"), bad.getReason());
            client.flush();
            HarnessEvent.RequestFinished finished = (HarnessEvent.RequestFinished) events.stream()
                    .filter(e -> e instanceof HarnessEvent.RequestFinished).findFirst().orElseThrow();
            assertEquals("svc", finished.getService());
            assertEquals(Integer.valueOf(200), finished.getStatus());
            assertEquals("request_finished", finished.getType());
            assertTrue(events.stream().anyMatch(e -> e instanceof HarnessEvent.ConfigRejected));
            // A listener in try-with-resources is removed at the end of the block.
            List<HarnessEvent> scoped = new CopyOnWriteArrayList<>();
            try (ListenerHandle handle = client.addListener(scoped::add)) {
                assertEquals(200, client.getAsync("svc", "/bench").join().getStatus());
                client.flush();
            }
            int seen = scoped.size();
            assertTrue(seen > 0);
            assertEquals(200, client.getAsync("svc", "/bench").join().getStatus());
            client.flush();
            assertEquals(seen, scoped.size());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }
    @Test
    void javaTokenProvidersAnswerWithCompletableFutures() throws Exception {
        TestUpstream.INSTANCE.putScript("java_token", List.of(Map.of("status", 200)));
        Map<String, Object> cfg = Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("svc", Map.of(
                        "base_url", TestUpstream.INSTANCE.getUrl(),
                        "auth", Map.of("type", "callback"))));
        try (HarnessClient client = new HarnessClient(cfg)) {
            client.setTokenProviderAsync("svc", () -> CompletableFuture.supplyAsync(() -> new Token("java-tok", java.time.Duration.ofMinutes(5))));
            assertEquals(200, client.getAsync("svc", "/s/java_token/a").get(10, TimeUnit.SECONDS).getStatus());
            var sent = TestUpstream.INSTANCE.log("java_token").getJSONArray("requests").getJSONObject(0).getJSONObject("headers");
            assertEquals("Bearer java-tok", sent.getString("authorization"));
            CredentialState state = client.credentialsState().get(0);
            assertEquals("valid", state.getStatus());
            assertEquals("callback", state.getType());

            try (HarnessClient failing = new HarnessClient(cfg)) {
                failing.setTokenProviderAsync("svc", () -> CompletableFuture.failedFuture(new IllegalStateException("no vault")));
                CompletionException e = assertThrows(CompletionException.class, () -> failing.getAsync("svc", "/s/java_token/b").join());
                assertInstanceOf(HarnessException.Auth.class, e.getCause());
                assertTrue(e.getCause().getMessage().contains("no vault"), e.getCause().getMessage());
                // A provider that returns no future at all.
                failing.setTokenProviderAsync("svc", () -> null);
                CompletionException e2 = assertThrows(CompletionException.class, () -> failing.getAsync("svc", "/s/java_token/c").join());
                assertTrue(e2.getCause().getMessage().contains("NullPointerException"), e2.getCause().getMessage());
            }
        }
    }

    @Test
    void javaCallersChatAndReadChatStreams() throws Exception {
        TestUpstream.INSTANCE.putProvider("java_chat-p", Map.of("reset", true, "content", "hi from java", "prompt_tokens", 3));
        Map<String, Object> cfg = Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("p", Map.of("base_url", TestUpstream.INSTANCE.llm("java_chat-p"))),
                "routes", Map.of("chat", Map.of(
                        "adapter", "openai-compatible",
                        "providers", List.of(Map.of("id", "p", "service", "p", "model", "m-j", "weight", 1)))));
        try (HarnessClient client = new HarnessClient(cfg)) {
            ChatRequest req = new ChatRequest("chat", List.of(Map.of("role", "user", "content", "hello")))
                    .withParam("temperature", 0.5);
            ChatResponse r = client.chatAsync(req).get(10, TimeUnit.SECONDS);
            assertEquals("hi from java", r.getContent());
            assertEquals("p", r.getProvider());
            assertEquals("m-j", r.getModel());
            assertEquals(new Usage(3, 3, 6, 0, 0), r.getUsage());
            assertEquals(List.of(new kotlin.Pair<>("p", 1)), r.getAttemptsByProvider());

            StringBuilder text = new StringBuilder();
            ChatChunk last = null;
            try (ChatStream s = client.chatStreamAsync(req).get(10, TimeUnit.SECONDS)) {
                for (ChatChunk c = s.read(); c != null; c = s.read()) {
                    if (c.getKind() == ChatChunkKind.DELTA) text.append(c.getContent());
                    last = c;
                }
                assertEquals(null, s.read(), "after done, read() keeps giving null");
            }
            assertEquals("hi from java", text.toString());
            assertEquals(ChatChunkKind.DONE, last.getKind());
            assertEquals(6L, last.getUsage().getTotalTokens());

            assertEquals("p", client.routingState("chat").getProviders().get(0).getId());
            String version = client.setWeight("chat", "p", 5);
            assertEquals(version, client.getConfigVersion());
            assertEquals(5, client.routingState("chat").getProviders().get(0).getWeight());

            CompletionException e = assertThrows(CompletionException.class,
                    () -> client.chatAsync(new ChatRequest("nowhere", req.getMessages())).join());
            assertInstanceOf(HarnessException.Config.class, e.getCause());
        }
    }

    /** A Java codec: the stored text is JSON, written and read by hand here (Jackson fits the same two methods). */
    record Receipt(String id, long cents) {}

    static final ResultCodec<Receipt> RECEIPTS = new ResultCodec<>() {
        @Override
        public String encode(Receipt r) {
            return "{\"id\":\"" + r.id() + "\",\"cents\":" + r.cents() + "}";
        }

        @Override
        public Receipt decode(String json) {
            var o = new org.json.JSONObject(json);
            return new Receipt(o.getString("id"), o.getLong("cents"));
        }
    };

    @Test
    void javaCallersRunTheReceiverWithCompletableFutures() throws Exception {
        try (Idempotency idem = new Idempotency(Map.of("lease_ms", 10_000))) {
            String key = idem.key("acme", "invoice.paid", "java-1");
            var runs = new java.util.concurrent.atomic.AtomicInteger();
            Object first = idem.runAsync(key, () -> {
                runs.incrementAndGet();
                return CompletableFuture.supplyAsync(() -> Map.of("ok", true));
            }).get(10, TimeUnit.SECONDS);
            Object again = idem.runAsync(key, () -> {
                runs.incrementAndGet();
                return CompletableFuture.completedFuture("not this");
            }).get(10, TimeUnit.SECONDS);
            assertEquals(Map.of("ok", true), first);
            assertEquals(first, again);
            assertEquals(1, runs.get());

            // A duplicate while the first delivery's future is pending.
            String busy = idem.key("acme", "invoice.paid", "java-2");
            CompletableFuture<Object> gate = new CompletableFuture<>();
            var started = new java.util.concurrent.CountDownLatch(1);
            CompletableFuture<Object> running = idem.runAsync(busy, () -> {
                started.countDown();
                return gate;
            });
            assertTrue(started.await(10, TimeUnit.SECONDS));
            CompletionException dup = assertThrows(CompletionException.class,
                    () -> idem.runAsync(busy, () -> CompletableFuture.completedFuture("no")).join());
            HarnessException.DuplicateInFlight d = assertInstanceOf(HarnessException.DuplicateInFlight.class, dup.getCause());
            assertEquals("DuplicateInFlightError", d.getKind());
            assertTrue(d.getRetryAfterMs() > 0);
            gate.complete(List.of("done"));
            assertEquals(List.of("done"), running.get(10, TimeUnit.SECONDS));

            // A failed future fails the claim; the redelivery runs.
            String failing = idem.key("acme", "invoice.paid", "java-3");
            CompletionException boom = assertThrows(CompletionException.class,
                    () -> idem.runAsync(failing, () -> CompletableFuture.failedFuture(new IllegalStateException("boom"))).join());
            assertInstanceOf(IllegalStateException.class, boom.getCause());
            assertEquals("ok", idem.runAsync(failing, () -> CompletableFuture.completedFuture("ok")).join());

            String typed = idem.key("acme", "payment", "java-4");
            Receipt r = idem.runAsync(typed, RECEIPTS, () -> CompletableFuture.completedFuture(new Receipt("r-1", 1250))).join();
            assertEquals(r, idem.runAsync(typed, RECEIPTS, () -> CompletableFuture.failedFuture(new AssertionError("ran"))).join());

            String ts = Long.toString(System.currentTimeMillis() / 1000);
            HarnessException.Config noSig = assertThrows(HarnessException.Config.class, () -> idem.verify(ts, new byte[0], "00"));
            assertTrue(noSig.getReason().startsWith("signature"));
        }
    }

    @Test
    void javaUnitTestsMockAServiceWithNoDownstream() {
        Map<String, Object> cfg = Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("orders", Map.of("base_url", "http://127.0.0.1:9", "retry", Map.of("max_retries", 0))));
        try (HarnessClient client = new HarnessClient(cfg)) {
            client.mock("orders", "GET", "/orders/{id}", 200, Map.of("id", "{id}"));
            client.mock("orders", "POST", "/orders", 201);
            assertEquals("{\"id\":\"42\"}", client.getAsync("orders", "/orders/42").join().text());
            assertEquals(201, client.postAsync("orders", "/orders", Map.of("sku", "A1")).join().getStatus());
            client.clearMocks();
            CompletionException e = assertThrows(CompletionException.class, () -> client.getAsync("orders", "/orders/42").join());
            assertInstanceOf(HarnessException.Connect.class, e.getCause());
        }
    }

    /** An in-house format adapter written in Java: CompletableFutures, kotlinx JsonObjects. */
    static final class JavaInHouse implements AsyncHarnessAdapter {
        @Override
        public CompletableFuture<JsonObject> buildRequest(JsonObject request) {
            boolean stream = JsonElementKt.getBoolean(JsonElementKt.getJsonPrimitive(request.get("stream")));
            Map<String, JsonElement> body = Map.of("prompt", JsonElementKt.JsonPrimitive("hi"), "stream", JsonElementKt.JsonPrimitive(stream));
            return CompletableFuture.supplyAsync(() -> new JsonObject(Map.of("path", JsonElementKt.JsonPrimitive("/inhouse/generate"), "body", new JsonObject(body))));
        }

        @Override
        public CompletableFuture<JsonObject> parseResponse(JsonObject response) {
            String text = JsonElementKt.getJsonPrimitive(response.get("body")).getContent();
            JsonObject answer = JsonElementKt.getJsonObject(Json.Default.parseToJsonElement(text));
            JsonObject output = JsonElementKt.getJsonObject(answer.get("output"));
            return CompletableFuture.completedFuture(new JsonObject(Map.of("content", output.get("text"), "finish_reason", JsonElementKt.JsonPrimitive("stop"))));
        }

        @Override
        public CompletableFuture<JsonObject> parseStreamEvent(JsonObject event) {
            return CompletableFuture.completedFuture(null);
        }
    }

    @Test
    void javaCallersEmbedAndRegisterAnAdapterAnsweringWithFutures() throws Exception {
        TestUpstream.INSTANCE.putProvider("java_embed-oa", Map.of("reset", true, "dimensions", 4));
        TestUpstream.INSTANCE.putProvider("java_adapter-house", Map.of("reset", true, "content", "java house"));
        Map<String, Object> cfg = Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of(
                        "oa", Map.of("base_url", TestUpstream.INSTANCE.llm("java_embed-oa")),
                        "house", Map.of("base_url", TestUpstream.INSTANCE.llm("java_adapter-house"))),
                "routes", Map.of(
                        "embed", Map.of("kind", "embeddings", "adapter", "openai-compatible",
                                "providers", List.of(Map.of("id", "oa", "service", "oa", "model", "e", "weight", 1))),
                        "chat", Map.of("adapter", "openai-compatible",
                                "providers", List.of(Map.of("id", "house", "service", "house", "model", "h", "weight", 1, "adapter", "inhouse")))));
        try (HarnessClient client = new HarnessClient(cfg)) {
            EmbedResult r = client.embedAsync("embed", List.of("ab", "abcd")).get(10, TimeUnit.SECONDS);
            assertEquals(2, r.getCount());
            assertEquals(4, r.getDimensions());
            assertArrayEquals(new float[] {0.25f, 0.28125f, 0.3125f, 0.34375f}, r.getVectors().get(0));
            assertArrayEquals(new float[] {0.5f, 0.53125f, 0.5625f, 0.59375f}, r.vector(1));
            CompletionException e = assertThrows(CompletionException.class, () -> client.embedAsync("embed", List.of()).join());
            assertInstanceOf(HarnessException.Config.class, e.getCause());

            JavaInHouse adapter = new JavaInHouse();
            client.registerAdapterAsync("inhouse", adapter);
            ChatResponse a = client.chatAsync(new ChatRequest("chat", List.of(Map.of("role", "user", "content", "hi")))).get(10, TimeUnit.SECONDS);
            assertEquals("java house", a.getContent());
            assertEquals("house", a.getProvider());
            assertThrows(HarnessException.Config.class, () -> client.registerAdapterAsync("gemini", adapter));
        }
    }

    /** A tenant header and a partner's 200-with-an-error-code check, written in Java. */
    static final class JavaTenant implements AsyncInterceptor {
        @Override
        public String getName() {
            return "java-tenant";
        }

        @Override
        public Level getLevel() {
            return Level.ATTEMPT;
        }

        @Override
        public boolean getWantBody() {
            return true;
        }

        @Override
        public CompletableFuture<RequestChanges> beforeAsync(InterceptedRequest request) {
            Map<String, String> headers = Map.of("x-tenant", "acme", "x-attempt", String.valueOf(request.getAttempt()));
            return CompletableFuture.supplyAsync(() -> new RequestChanges(headers, null, null, null, null, null));
        }

        @Override
        public CompletableFuture<Void> afterAsync(InterceptedResponse response) {
            JsonElement json = response.getJson();
            if (json instanceof JsonObject && ((JsonObject) json).containsKey("errCode")) {
                return CompletableFuture.failedFuture(new Reject("partner busy", true, "BUSY"));
            }
            return CompletableFuture.completedFuture(null);
        }
    }

    @Test
    void javaInterceptorsChangeRequestsAndRejectAnswersWithFutures() throws Exception {
        TestUpstream.INSTANCE.putScript("java_icpt", List.of(Map.of("json", Map.of("errCode", "BUSY")), Map.of("json", Map.of("ok", true))));
        Map<String, Object> cfg = Map.of(
                "log", Map.of("enabled", false),
                "services", Map.of("svc", Map.of(
                        "base_url", TestUpstream.INSTANCE.getUrl(),
                        "retry", Map.of("max_retries", 2, "base_delay_ms", 1, "max_delay_ms", 5))));
        try (HarnessClient client = new HarnessClient(cfg)) {
            assertEquals("java-tenant", client.addInterceptorAsync(new JavaTenant()));
            HarnessResponse r = client.getAsync("svc", "/s/java_icpt/x").get(10, TimeUnit.SECONDS);
            assertEquals(200, r.getStatus());
            assertEquals(2, r.getAttempts());
            var sent = TestUpstream.INSTANCE.log("java_icpt").getJSONArray("requests");
            for (int i = 0; i < 2; i++) {
                assertEquals("acme", sent.getJSONObject(i).getJSONObject("headers").getString("x-tenant"));
                assertEquals(String.valueOf(i + 1), sent.getJSONObject(i).getJSONObject("headers").getString("x-attempt"));
            }
            TestUpstream.INSTANCE.putScript("java_icpt", List.of(Map.of("json", Map.of("errCode", "BUSY"))));
            CompletionException e = assertThrows(CompletionException.class, () -> client.getAsync("svc", "/s/java_icpt/x").join());
            HarnessException.Interceptor cause = assertInstanceOf(HarnessException.Interceptor.class, e.getCause());
            assertEquals("BUSY", cause.getCode());
            assertEquals(3, cause.getAttempts());
            assertTrue(client.removeInterceptor("java-tenant"));
        }
    }
}
