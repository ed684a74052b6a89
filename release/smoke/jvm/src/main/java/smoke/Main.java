package smoke;

import dev.harness.HarnessClient;
import dev.harness.HarnessResponse;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;

/** One request through the released jar against the test upstream (HARNESS_UPSTREAM_BIN). */
public final class Main {
    public static void main(String[] args) throws Exception {
        Process upstream = new ProcessBuilder(System.getenv("HARNESS_UPSTREAM_BIN")).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try {
            String line = new BufferedReader(new InputStreamReader(upstream.getInputStream())).readLine();
            String addr = line.replaceAll(".*\"addr\":\"([^\"]+)\".*", "$1");
            String base = "http://" + addr;
            // A flaky endpoint: one 503, then the answer; Harness retries the GET.
            HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base + "/__admin/script/smoke"))
                .PUT(HttpRequest.BodyPublishers.ofString("{\"steps\":[{\"status\":503},{\"status\":200,\"json\":{\"id\":42}}]}")).build(),
                HttpResponse.BodyHandlers.discarding());
            Map<String, Object> config = Map.of(
                "client", Map.of("name", "smoke"),
                "log", Map.of("enabled", false),
                "services", Map.of("orders", Map.of("base_url", base, "retry", Map.of("max_retries", 2, "base_delay_ms", 20))));
            try (HarnessClient client = new HarnessClient(config)) {
                HarnessResponse res = client.getAsync("orders", "/s/smoke/orders/42").join();
                System.out.println("GET /orders/42 -> " + res.getStatus() + " after " + res.getAttempts() + " attempts: " + new String(res.getBody(), java.nio.charset.StandardCharsets.UTF_8));
                if (res.getStatus() != 200 || res.getAttempts() != 2) throw new IllegalStateException("unexpected answer");
            }
        } finally {
            upstream.getOutputStream().close();
            upstream.waitFor();
        }
    }
}
