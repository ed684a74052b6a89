package dev.harness.bench

import dev.harness.HarnessClient
import dev.harness.RequestChanges
import dev.harness.interceptor
import io.github.resilience4j.circuitbreaker.CircuitBreaker
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig
import io.github.resilience4j.retry.Retry
import io.github.resilience4j.retry.RetryConfig
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import okhttp3.ConnectionPool
import okhttp3.OkHttpClient
import okhttp3.Request
import java.io.File
import java.io.IOException
import java.lang.management.ManagementFactory
import java.time.Duration
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/**
 * HarnessClient (retry, breaker and bulkhead on, as by default) vs plain OkHttp vs OkHttp wrapped in
 * resilience4j Retry + CircuitBreaker, GET /bench on the loopback harness-upstream, at concurrency 1
 * and 64. CPU is this process's CPU time (so it includes the engine's Rust threads), per 1,000 requests.
 * At 64, "harness (suspend)+before" is the suspend row's client with one interceptor (a plain `before`
 * adding one header), in the same interleaved rounds: the cost of crossing to Kotlin per call.
 */

/** The row with one interceptor, and the row it is paired with (bench/summary.py). */
private const val INTERCEPTED = "harness (suspend)+before"
private const val INTERCEPTED_BASELINE = "harness (suspend)"
private const val SIGNED = "harness (suspend)+hmac"

private val osBean = ManagementFactory.getOperatingSystemMXBean() as com.sun.management.OperatingSystemMXBean

private class Row(val name: String, val concurrency: Int, val n: Int, val seconds: Double, val p50: Double, val p99: Double, val cpuMsPer1k: Double) {
    val rps get() = n / seconds
}

/** Runs [total] calls of [call] from [concurrency] blocking threads; latencies in ms. */
private fun measureThreads(name: String, concurrency: Int, total: Int, call: () -> Unit): Row {
    val lat = LongArray(total)
    val next = AtomicInteger()
    val failures = AtomicInteger()
    val done = CountDownLatch(concurrency)
    val cpu0 = osBean.processCpuTime
    val t0 = System.nanoTime()
    repeat(concurrency) {
        Thread {
            while (true) {
                val i = next.getAndIncrement()
                if (i >= total) break
                val s = System.nanoTime()
                try { call() } catch (e: Exception) { failures.incrementAndGet() }
                lat[i] = System.nanoTime() - s
            }
            done.countDown()
        }.start()
    }
    done.await()
    return row(name, concurrency, total, t0, cpu0, lat, failures.get())
}

/** The same with [concurrency] coroutines on Dispatchers.Default (the idiomatic Kotlin caller). */
private fun measureCoroutines(name: String, concurrency: Int, total: Int, call: suspend () -> Unit): Row {
    val lat = LongArray(total)
    val next = AtomicInteger()
    val failures = AtomicInteger()
    val cpu0 = osBean.processCpuTime
    val t0 = System.nanoTime()
    runBlocking {
        repeat(concurrency) {
            launch(Dispatchers.Default) {
                while (true) {
                    val i = next.getAndIncrement()
                    if (i >= total) break
                    val s = System.nanoTime()
                    try { call() } catch (e: Exception) { failures.incrementAndGet() }
                    lat[i] = System.nanoTime() - s
                }
            }
        }
    }
    return row(name, concurrency, total, t0, cpu0, lat, failures.get())
}

private fun row(name: String, concurrency: Int, total: Int, t0: Long, cpu0: Long, lat: LongArray, failures: Int): Row {
    val seconds = (System.nanoTime() - t0) / 1e9
    val cpuMs = (osBean.processCpuTime - cpu0) / 1e6
    check(failures == 0) { "$name: $failures of $total requests failed" }
    lat.sort()
    fun pct(p: Double) = lat[((lat.size - 1) * p).toInt()] / 1e6
    return Row(name, concurrency, total, seconds, pct(0.50), pct(0.99), cpuMs / (total / 1000.0))
}

fun main(args: Array<String>) {
    val root = File(System.getProperty("harness.root") ?: "../..").canonicalFile
    val scale = (System.getenv("BENCH_SCALE") ?: "1").toDouble()
    // BENCH_UPSTREAM=http://addr: a running upstream (bench/compare.sh runs two builds against one).
    val running = System.getenv("BENCH_UPSTREAM")?.trimEnd('/')?.substringAfter("://")
    val upstream = if (running != null) null else {
        val bin = System.getenv("HARNESS_UPSTREAM_BIN")
            ?: listOf("release", "debug").map { File(root, "target/x86_64-unknown-linux-gnu/$it/harness-upstream") }.first { it.canExecute() }.path
        ProcessBuilder(bin).redirectError(ProcessBuilder.Redirect.INHERIT).start()
    }
    try {
        val addr = running ?: Regex("\"addr\":\"([^\"]+)\"").find(upstream!!.inputStream.bufferedReader().readLine())!!.groupValues[1]
        val url = "http://$addr/bench"

        val harness = HarnessClient(mapOf(
            "client" to mapOf("name" to "bench"),
            "log" to mapOf("enabled" to false),
            // Defaults: 1 retry for GET, breaker on 5 consecutive failures, bulkhead of 200.
            "services" to mapOf("up" to mapOf("base_url" to "http://$addr")),
        ))
        val intercepted = HarnessClient(mapOf(
            "client" to mapOf("name" to "bench"),
            "log" to mapOf("enabled" to false),
            "services" to mapOf("up" to mapOf("base_url" to "http://$addr")),
        ))
        intercepted.addInterceptor(interceptor("bench-header", before = { RequestChanges(headers = mapOf("x-bench" to "1")) }))
        // The same service signing every request in the core (auth type hmac, preset github).
        val signed = HarnessClient(mapOf(
            "client" to mapOf("name" to "bench"),
            "log" to mapOf("enabled" to false),
            "services" to mapOf("up" to mapOf("base_url" to "http://$addr",
                "auth" to mapOf("type" to "hmac", "preset" to "github", "secret" to mapOf("value" to "bench-signing-secret")))),
        ))
        val ok = OkHttpClient.Builder()
            .connectionPool(ConnectionPool(128, 5, TimeUnit.MINUTES))
            .connectTimeout(Duration.ofMillis(1000)).readTimeout(Duration.ofMillis(3000)).callTimeout(Duration.ofMillis(15000))
            .build()
        val retry = Retry.of("up", RetryConfig.custom<Any>()
            .maxAttempts(2).waitDuration(Duration.ofMillis(200)).retryExceptions(IOException::class.java).build())
        val breaker = CircuitBreaker.of("up", CircuitBreakerConfig.custom()
            .slidingWindowType(CircuitBreakerConfig.SlidingWindowType.COUNT_BASED).slidingWindowSize(5)
            .failureRateThreshold(100f).waitDurationInOpenState(Duration.ofSeconds(30)).build())

        fun okGet() {
            ok.newCall(Request.Builder().url(url).build()).execute().use { r ->
                val body = r.body!!.bytes()
                if (r.code >= 500) throw IOException("status ${r.code}")
                check(body.size == 11)
            }
        }
        val resilient = Retry.decorateCheckedSupplier(retry, CircuitBreaker.decorateCheckedSupplier(breaker) { okGet() })

        val contenders: List<Pair<String, (Int, Int) -> Row>> = listOf(
            "okhttp" to { c, n -> measureThreads("okhttp", c, n) { okGet() } },
            "okhttp + resilience4j" to { c, n -> measureThreads("okhttp + resilience4j", c, n) { resilient.get() } },
            "harness (suspend)" to { c, n -> measureCoroutines("harness (suspend)", c, n) { check(harness.get("up", "/bench").status == 200) } },
            "harness (future)" to { c, n -> measureThreads("harness (future)", c, n) { check(harness.getAsync("up", "/bench").join().status == 200) } },
            INTERCEPTED to { c, n -> measureCoroutines(INTERCEPTED, c, n) { check(intercepted.get("up", "/bench").status == 200) } },
            SIGNED to { c, n -> measureCoroutines(SIGNED, c, n) { check(signed.get("up", "/bench").status == 200) } },
        )
        // BENCH_ONLY=harness (a comma list: a contender's whole name picks that one only, a part
        // of a name every contender containing it; NAME@C also pins the concurrency) and
        // BENCH_CONCURRENCY=64 narrow the run, e.g. for a profile.
        val only = System.getenv("BENCH_ONLY")?.split(",")?.map { it.trim() }
        val names = contenders.map { it.first }.toSet()
        fun wanted(name: String, c: Int) = only == null || only.any { o ->
            val n = o.substringBefore('@')
            (if (n in names) name == n else name.contains(n)) && o.substringAfter('@', "").let { it.isEmpty() || it.toInt() == c }
        }
        val levels = System.getenv("BENCH_CONCURRENCY")?.split(",")?.map { it.trim().toInt() } ?: listOf(1, 64)
        val rounds = (System.getenv("BENCH_ROUNDS") ?: "5").toInt()
        val results = linkedMapOf<String, MutableList<Row>>()
        for (c in levels) {
            // The interceptor row is measured at 64 only.
            val picked = contenders.filter { wanted(it.first, c) && ((it.first != INTERCEPTED && it.first != SIGNED) || c == 64) }
            if (picked.isEmpty()) continue
            val n = ((if (c == 1) 5_000 else 30_000) * scale).toInt()
            for ((_, run) in picked) run(c, n / 5) // warm-up: JIT, connection pools
            // Interleaved rounds, each starting with the next contender, so drift hits every one alike.
            for (round in 0 until rounds) {
                for (k in picked.indices) {
                    val row = picked[(round + k) % picked.size].second(c, n)
                    results.getOrPut("${row.name}@$c") { mutableListOf() } += row
                }
            }
        }
        // 10,000 in flight (BENCH_HUGE, 0 = skip): suspend calls on a service with room for every caller.
        val huge = (System.getenv("BENCH_HUGE") ?: "10000").toInt()
        var hugeRows = listOf<Row>()
        var hugeErrors = 0
        var leaked = -1
        if (huge > 0 && wanted("harness (suspend)", huge)) {
            val wide = HarnessClient(mapOf(
                "client" to mapOf("name" to "bench"),
                "log" to mapOf("enabled" to false),
                "services" to mapOf("up" to mapOf("base_url" to "http://$addr",
                    "timeouts" to mapOf("connect_ms" to 5000, "response_ms" to 30000, "request_ms" to 60000),
                    "bulkhead" to mapOf("max_concurrency" to 20000))),
            ))
            val errors = AtomicInteger()
            val call: suspend () -> Unit = {
                try { check(wide.get("up", "/bench").status == 200) } catch (e: Exception) { errors.incrementAndGet() }
            }
            measureCoroutines("harness (suspend)", huge, huge, call)
            errors.set(0)
            hugeRows = (0 until minOf(rounds, 3)).map { measureCoroutines("harness (suspend)", huge, huge * 5, call) }
            hugeErrors = errors.get()
            leaked = Regex("""harness_bulkhead_permits_in_use\{service="up"\} (\d+)""").find(wide.metrics())?.groupValues?.get(1)?.toInt() ?: -1
            wide.close()
        }
        fun med(rows: List<Row>, f: (Row) -> Double) = rows.map(f).sorted()[rows.size / 2]
        println("median of $rounds interleaved rounds")
        println("| client                             |   c |   req/s   | p50 ms   | p99 ms   | CPU ms/1k |")
        println("|------------------------------------|-----|-----------|----------|----------|-----------|")
        for ((key, rows) in results) {
            println("| %-34s | %3d | %9.0f | %8.3f | %8.3f | %8.1f |".format(key.substringBefore('@'), rows[0].concurrency,
                med(rows) { it.rps }, med(rows) { it.p50 }, med(rows) { it.p99 }, med(rows) { it.cpuMsPer1k }))
        }
        if (hugeRows.isNotEmpty()) {
            println("| %-34s | %3d | %9.0f | %8.3f | %8.3f | %8.1f | errors %d, permits left in use %d".format("harness (suspend)", huge,
                med(hugeRows) { it.rps }, med(hugeRows) { it.p50 }, med(hugeRows) { it.p99 }, med(hugeRows) { it.cpuMsPer1k }, hugeErrors, leaked))
        }
        System.getenv("BENCH_JSON")?.let { path ->
            fun round(r: Row) = """{"rps":${r.rps},"p50_ms":${r.p50},"p99_ms":${r.p99},"cpu_ms_per_1k":${r.cpuMsPer1k}}"""
            val out = results.map { (key, rows) ->
                val name = key.substringBefore('@')
                // bench/summary.py pairs a row marked so with its baseline, round by round.
                val marked = when (name) {
                    INTERCEPTED -> ""","interceptor":"one before (adds a header)","baseline":"$INTERCEPTED_BASELINE""""
                    SIGNED -> ""","interceptor":"hmac signing (preset github)","baseline":"$INTERCEPTED_BASELINE""""
                    else -> ""
                }
                """{"client":"$name","concurrency":${rows[0].concurrency},"errors":0$marked,"rounds":[${rows.joinToString(",") { round(it) }}]}"""
            }.toMutableList()
            if (hugeRows.isNotEmpty()) out += """{"client":"harness (suspend)","concurrency":$huge,"errors":$hugeErrors,"leaked_permits":$leaked,"rounds":[${hugeRows.joinToString(",") { round(it) }}]}"""
            File(path).writeText("""{"bench":"jvm","runtime":"Java ${System.getProperty("java.version")}","rows":[${out.joinToString(",")}]}""")
        }
        harness.close()
        intercepted.close()
        signed.close()
        ok.dispatcher.executorService.shutdown()
        ok.connectionPool.evictAll()
    } finally {
        if (upstream != null) {
            runCatching { upstream.outputStream.close() }
            if (!upstream.waitFor(2, TimeUnit.SECONDS)) upstream.destroyForcibly()
        }
    }
    System.exit(0)
}
