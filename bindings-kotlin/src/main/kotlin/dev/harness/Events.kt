package dev.harness

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import dev.harness.ffi.ListenerException
import dev.harness.ffi.NativeEventSink
import dev.harness.ffi.uniffiCallbackInterfaceNativeEventSink
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.SharedFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.runBlocking
import org.slf4j.Logger
import org.slf4j.LoggerFactory
import org.slf4j.spi.LoggingEventBuilder
import org.slf4j.spi.NOPLoggingEventBuilder

/*
 * Host code the engine calls: each of these implements the engine's one sink trait
 * (`NativeEventSink`, a UniFFI foreign trait). The engine calls a sink on the client's own
 * event thread, in order, never on a request's thread; a sink that throws is reported once
 * (on stderr, by the engine) and keeps receiving events. So a sink only translates.
 */

/** Keeps the engine's event threads attached to the JVM between callbacks; before the library loads. */
internal object EventThreads {
    init {
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceNativeEventSink.`onEvent`, CallbackThreadInitializer(true, false, "harness-events"))
    }

    fun ensure() = Unit
}

/** A listener's exception becomes the error the engine reports (once per listener). */
private inline fun guarded(f: () -> Unit) {
    try {
        f()
    } catch (t: Throwable) {
        throw ListenerException.Failed(t.toString())
    }
}

/** One [HarnessClient.addListener] listener. */
internal class ListenerSink(private val listener: (HarnessEvent) -> Unit) : NativeEventSink {
    override fun onEvent(event: String) = guarded { listener(decodeEvent(event)) }
}

/**
 * [HarnessClient.events]: one sink feeding a SharedFlow. A collector that falls behind
 * holds up the client's event thread (not its requests) once the buffer is full, so the
 * engine's bounded queue fills and drops are counted in `harness_events_dropped_total`.
 * [close] releases a waiting event thread, so closing a client never waits on a collector.
 */
internal class EventFlow : NativeEventSink {
    private val shared = MutableSharedFlow<HarnessEvent>(extraBufferCapacity = 1024)
    private val open = Job()
    val flow: SharedFlow<HarnessEvent> = shared.asSharedFlow()

    override fun onEvent(event: String) {
        val e = decodeEvent(event)
        if (shared.tryEmit(e)) return
        try {
            runBlocking(open) { shared.emit(e) }
        } catch (_: CancellationException) {
            // the client is closing
        }
    }

    fun close() {
        open.cancel()
    }
}

/**
 * `log: { sink: slf4j }`: each request record to SLF4J logger `dev.harness`, INFO for a
 * success and WARN for an error, with every field of the record as a key-value pair (the
 * snake_case names of the JSON line). The logger is looked up at the first record, so
 * applications that do not use the sink never initialise SLF4J.
 */
internal object Slf4jLog : NativeEventSink {
    private val logger: Logger by lazy { LoggerFactory.getLogger("dev.harness") }

    override fun onEvent(event: String) = guarded {
        val r = decodeEvent(event) as? HarnessEvent.RequestFinished ?: return@guarded
        val builder: LoggingEventBuilder = if (r.errorKind == null) logger.atInfo() else logger.atWarn()
        if (builder is NOPLoggingEventBuilder) return@guarded
        for ((k, v) in r.fields()) {
            if (k != "type" && v != null) builder.addKeyValue(k, v)
        }
        builder.log(message(r))
    }

    private fun message(r: HarnessEvent.RequestFinished): String {
        val outcome = if (r.errorKind == null) "${r.status}" else "${r.errorKind}: ${r.errorMessage}"
        val attempts = if (r.attempts == 1) "1 attempt" else "${r.attempts} attempts"
        val via = r.provider?.let { " via $it" } ?: r.fallback?.let { " from the $it fallback" } ?: ""
        return "${r.method} ${r.service} ${r.endpoint} -> $outcome$via (${r.durationMs} ms, $attempts)"
    }
}
