package dev.harness.micrometer

import dev.harness.HarnessClient
import dev.harness.Idempotency
import io.micrometer.core.instrument.FunctionCounter
import io.micrometer.core.instrument.Gauge
import io.micrometer.core.instrument.MeterRegistry
import io.micrometer.core.instrument.Tag
import io.micrometer.core.instrument.binder.MeterBinder
import java.time.Duration
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList
import java.util.function.Supplier

/**
 * Publishes a Harness client's metrics into any Micrometer [MeterRegistry] (Spring Boot's
 * included: expose the binder as a `@Bean`), with the names and labels of its Prometheus
 * text: `harness_requests_total{service,endpoint,method,status}` is a `FunctionCounter` of
 * that name with those tags; gauges are `Gauge`s; a histogram gives its `_count` and `_sum`
 * as `FunctionCounter`s (its buckets stay in `metrics()`).
 *
 * The engine keeps the numbers: each poll reads `metrics()` (at most once per [cacheTtl]
 * for every meter together) and registers series that appeared since, such as a new
 * endpoint or status; [refresh] does that now. A gauge whose series went away reads NaN; a
 * counter keeps its last value. The registry's meters hold the binder (and so the client)
 * strongly. `io.micrometer:micrometer-core` is an optional dependency: bring your own.
 *
 * ```kotlin
 * HarnessMeterBinder(harness).bindTo(registry)
 * ```
 */
class HarnessMeterBinder @JvmOverloads constructor(
    private val source: Supplier<String>,
    cacheTtl: Duration = Duration.ofSeconds(1),
) : MeterBinder {
    /** The series of [client] (`client.metrics()`). */
    @JvmOverloads
    constructor(client: HarnessClient, cacheTtl: Duration = Duration.ofSeconds(1)) : this(Supplier { client.metrics() }, cacheTtl)

    /** The series of an idempotent [receiver] (`harness_idempotency_total{outcome}`). */
    @JvmOverloads
    constructor(receiver: Idempotency, cacheTtl: Duration = Duration.ofSeconds(1)) : this(Supplier { receiver.metricsText() }, cacheTtl)

    private val ttlNanos = cacheTtl.toNanos()
    private val values = ConcurrentHashMap<SeriesKey, Double>()
    private val known = ConcurrentHashMap<SeriesKey, Sample>()
    private val bound = CopyOnWriteArrayList<Bound>()
    private val lock = Any()

    @Volatile
    private var readAt = 0L

    @Volatile
    private var everRead = false

    private class Bound(val registry: MeterRegistry) {
        val registered: MutableSet<SeriesKey> = ConcurrentHashMap.newKeySet()
    }

    override fun bindTo(registry: MeterRegistry) {
        val b = bound.firstOrNull { it.registry === registry } ?: Bound(registry).also { bound.add(it) }
        read(force = true)
        register(b)
    }

    /** Reads the metrics now and registers, in every bound registry, the series that appeared since the last read. */
    fun refresh() {
        read(force = true)
        bound.forEach(::register)
    }

    private fun valueOf(key: SeriesKey): Double {
        if (read(force = false)) bound.forEach(::register)
        return values[key] ?: Double.NaN
    }

    /** Re-reads the text when the cache is older than the ttl (or when [force]); true when new series appeared. */
    private fun read(force: Boolean): Boolean {
        if (!force && everRead && System.nanoTime() - readAt < ttlNanos) return false
        synchronized(lock) {
            if (!force && everRead && System.nanoTime() - readAt < ttlNanos) return false
            val text = try {
                source.get()
            } catch (e: Exception) {
                // A closed client: keep the last values rather than fail the registry's poll.
                readAt = System.nanoTime()
                return false
            }
            var grew = false
            val seen = HashSet<SeriesKey>()
            for (s in PrometheusText.parse(text)) {
                seen.add(s.key)
                values[s.key] = s.value
                if (known.putIfAbsent(s.key, s) == null) grew = true
            }
            for ((key, s) in known) if (s.kind == SeriesKind.GAUGE && key !in seen) values[key] = Double.NaN
            readAt = System.nanoTime()
            everRead = true
            return grew
        }
    }

    // Outside [lock]: registering takes the registry's own lock, which a poll may hold. The
    // functions capture the binder: Micrometer holds a meter's object only weakly.
    private fun register(b: Bound) {
        for (s in known.values) {
            if (!b.registered.add(s.key)) continue
            val key = s.key
            val tags = key.labels.map { (k, v) -> Tag.of(k, v) }
            when (s.kind) {
                SeriesKind.COUNTER -> FunctionCounter.builder(key.name, this) { _ -> valueOf(key) }
                    .tags(tags).description(s.help).register(b.registry)
                SeriesKind.GAUGE -> Gauge.builder(key.name, this) { _ -> valueOf(key) }
                    .tags(tags).description(s.help).strongReference(true).register(b.registry)
            }
        }
    }

    override fun toString(): String = "HarnessMeterBinder(series=${known.size}, registries=${bound.size})"
}
