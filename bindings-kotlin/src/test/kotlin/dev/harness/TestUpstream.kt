package dev.harness

import org.json.JSONObject
import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.util.concurrent.TimeUnit

/**
 * The shared fault-injecting upstream (tests/upstream), one process for the whole test run.
 * It exits when its stdin closes, so a killed JVM leaves nothing behind.
 */
object TestUpstream {
    val repoRoot: File = File(System.getProperty("harness.root") ?: findRoot()).canonicalFile

    private val process: Process
    val url: String
    val blackholeUrl: String
    val closedUrl: String
    private val admin = HttpClient.newHttpClient()

    init {
        // Maven builds the upstream before the tests and passes its path (pom.xml, cargo-build-upstream).
        val bin = System.getenv("HARNESS_UPSTREAM_BIN")
            ?: System.getProperty("harness.upstream.bin")
            ?: File(repoRoot, "target/x86_64-unknown-linux-gnu/debug/harness-upstream").path
        check(File(bin).canExecute()) { "no harness-upstream at $bin: run the tests through `mvn install` (or `cargo build -p harness-upstream`, or set HARNESS_UPSTREAM_BIN)" }
        process = ProcessBuilder(bin).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        val line = process.inputStream.bufferedReader().readLine() ?: error("harness-upstream printed nothing")
        val addrs = JSONObject(line)
        url = "http://" + addrs.getString("addr")
        blackholeUrl = "http://" + addrs.getString("blackhole")
        closedUrl = "http://" + addrs.optString("closed", "127.0.0.1:1")
        Runtime.getRuntime().addShutdownHook(Thread {
            runCatching { process.outputStream.close() }
            if (!process.waitFor(2, TimeUnit.SECONDS)) process.destroyForcibly()
        })
    }

    fun putScript(name: String, steps: Any) {
        val body = JSONObject(mapOf("steps" to steps)).toString()
        val r = admin.send(
            HttpRequest.newBuilder(URI("$url/__admin/script/$name")).PUT(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString(),
        )
        check(r.statusCode() in 200..299) { "upstream refused script $name: ${r.body()}" }
    }

    fun log(name: String): JSONObject = JSONObject(logText(name))

    /** What script [name]'s requests did: `{"requests", "disconnects", "max_in_flight"}`. */
    fun stats(name: String): JSONObject =
        JSONObject(admin.send(HttpRequest.newBuilder(URI("$url/__admin/stats/$name")).GET().build(), HttpResponse.BodyHandlers.ofString()).body())

    /**
     * Sets how simulated provider [name] answers `POST {url}/llm/{name}/...` (a spec of
     * tests/upstream/src/provider.rs as a Map, or JSON text).
     */
    fun putProvider(name: String, spec: Any) {
        val body = if (spec is String) spec else JSONObject(spec as Map<*, *>).toString()
        val r = admin.send(
            HttpRequest.newBuilder(URI("$url/__admin/provider/$name")).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString(),
        )
        check(r.statusCode() in 200..299) { "upstream refused provider $name: ${r.body()}" }
    }

    /** Provider [name]'s log as JSON text: `{"count", "requests": [{"n", "model", "stream", "body", "at_ms", "outcome"}]}`. */
    fun providerLogText(name: String): String =
        admin.send(HttpRequest.newBuilder(URI("$url/__admin/provider-log/$name")).GET().build(), HttpResponse.BodyHandlers.ofString()).body()

    fun providerLog(name: String): JSONObject = JSONObject(providerLogText(name))

    /** The base URL a service uses to reach simulated provider [name]. */
    fun llm(name: String): String = "$url/llm/$name"

    /**
     * The spans the upstream's OTLP receiver holds (`otel.endpoint` = [url]), oldest first:
     * `{trace_id, span_id, parent_span_id, name, kind, service_name, attributes, ...}`. The
     * receiver is shared by every test: filter by trace id.
     */
    fun otlpSpans(): List<JSONObject> {
        val text = admin.send(HttpRequest.newBuilder(URI("$url/__admin/otlp/spans")).GET().build(), HttpResponse.BodyHandlers.ofString()).body()
        val spans = JSONObject(text).getJSONArray("spans")
        return (0 until spans.length()).map { spans.getJSONObject(it) }
    }

    /** The script's log as JSON text (for a parser that keeps key order). */
    fun logText(name: String): String =
        admin.send(HttpRequest.newBuilder(URI("$url/__admin/log/$name")).GET().build(), HttpResponse.BodyHandlers.ofString()).body()

    private fun findRoot(): String {
        var dir: File? = File(System.getProperty("user.dir")).absoluteFile
        while (dir != null && !File(dir, "tests/vectors/scenarios.json").exists()) dir = dir.parentFile
        return dir?.path ?: error("cannot find the repository root from ${System.getProperty("user.dir")}")
    }
}
