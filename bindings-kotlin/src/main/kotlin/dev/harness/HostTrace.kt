package dev.harness

import io.opentelemetry.api.trace.Span

/**
 * The host's active OpenTelemetry span as a W3C `traceparent`, so that Harness's span is its
 * child. `io.opentelemetry:opentelemetry-api` is an optional dependency: without it on the
 * class path (or without an active, valid span) there is no parent and requests behave as
 * before. Read on the calling thread, where OpenTelemetry keeps its current context.
 */
internal object HostTrace {
    // Checked once; only [OtelSpan] names OpenTelemetry types, so nothing else links against them.
    @Volatile
    private var available: Boolean = try {
        Class.forName("io.opentelemetry.api.trace.Span", false, HostTrace::class.java.classLoader)
        true
    } catch (e: ClassNotFoundException) {
        false
    } catch (e: LinkageError) {
        false
    }

    /** `00-<trace id>-<span id>-<flags>` of the current span, or null when there is none. */
    fun traceparent(): String? {
        if (!available) return null
        return try {
            OtelSpan.traceparent()
        } catch (e: LinkageError) {
            // An API older than 1.0 (no TraceFlags): no parent, rather than failing requests.
            available = false
            null
        }
    }

    /**
     * The traceparent to send: the caller's explicit one (the option, or a `traceparent` among
     * [headers] or [list], which the engine also honours) always wins over the host's span.
     */
    fun resolve(explicit: String?, headers: Map<String, String>, list: List<Pair<String, String>> = emptyList()): String? =
        explicit ?: if (headers.keys.any(::isTraceparent) || list.any { isTraceparent(it.first) }) null else traceparent()

    private fun isTraceparent(name: String) = name.equals("traceparent", ignoreCase = true)
}

private object OtelSpan {
    fun traceparent(): String? {
        val ctx = Span.current().spanContext
        if (!ctx.isValid) return null
        return "00-${ctx.traceId}-${ctx.spanId}-${ctx.traceFlags.asHex()}"
    }
}
