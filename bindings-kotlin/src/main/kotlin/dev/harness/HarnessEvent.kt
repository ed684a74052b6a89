package dev.harness

import dev.harness.ffi.NativeAuditRecord
import dev.harness.ffi.NativeEvent
import dev.harness.ffi.NativeRequestRecord

/**
 * Something the engine did, as the same structured record in every language
 * ([HarnessClient.events], [HarnessClient.addListener]). [type] is the cross-language name
 * (`request_finished`, ...); [fields] gives every field under its snake_case name, as in the
 * JSON log line.
 */
sealed class HarnessEvent {
    abstract val type: String

    /** Every field under its cross-language (snake_case) name, in a fixed order; `type` first. */
    abstract fun fields(): Map<String, Any?>

    /**
     * One per request (a stream: when it ends), with every field of the log line. A routed
     * request (or chat) also has [route], [provider], [model], [cost] and [fallback]; they are
     * null otherwise, and [fields] leaves out the null ones, as the log line does.
     */
    data class RequestFinished(
        /** Unix time in milliseconds when the request ended. */
        val tsMs: Long,
        val client: String,
        val traceId: String,
        val spanId: String,
        val service: String,
        val endpoint: String,
        val method: String,
        /** The last status received, if any. */
        val status: Int?,
        val durationMs: Double,
        val attempts: Int,
        val retryCount: Int,
        /** The breaker's state afterwards: `closed`, `open` or `half_open`. */
        val breaker: String,
        /** Whether the body was streamed to the caller. */
        val streamed: Boolean,
        /** The error kind name (`TimeoutError`, ...), null for a success. */
        val errorKind: String?,
        val errorCode: String?,
        val errorMessage: String?,
        /** The route the request named. */
        val route: String? = null,
        /** The provider that answered (or, for an error, the last one tried). */
        val provider: String? = null,
        val model: String? = null,
        val cost: Double? = null,
        /** `cache` or `static` when no provider answered. */
        val fallback: String? = null,
        /** The fault injected into the last faulted attempt (`latency`, `status`, `reset`, `stream_cut`); null without `faults:`. */
        val fault: String? = null,
        /** `validate: warn`: where and how the 2xx body did not match its schema (never its values). */
        val schemaViolation: String? = null,
    ) : HarnessEvent() {
        override val type: String get() = "request_finished"

        override fun fields(): Map<String, Any?> = linkedMapOf<String, Any?>(
            "type" to type, "ts_ms" to tsMs, "client" to client, "trace_id" to traceId, "span_id" to spanId,
            "service" to service, "endpoint" to endpoint, "method" to method, "status" to status,
            "duration_ms" to durationMs, "attempts" to attempts, "retry_count" to retryCount, "breaker" to breaker,
            "streamed" to streamed, "error_kind" to errorKind, "error_code" to errorCode, "error_message" to errorMessage,
        ).also { m ->
            route?.let { m["route"] = it }
            provider?.let { m["provider"] = it }
            model?.let { m["model"] = it }
            cost?.let { m["cost"] = it }
            fallback?.let { m["fallback"] = it }
            fault?.let { m["fault"] = it }
            schemaViolation?.let { m["schema_violation"] = it }
        }
    }

    /** A retry will be sent after [delayMs]. */
    data class RetryScheduled(
        val service: String,
        val endpoint: String,
        val method: String,
        val traceId: String,
        /** The attempt that failed (1 = the first). */
        val attempt: Int,
        val delayMs: Long,
        /** The error kind of the failed attempt (`HttpStatusError`, `TimeoutError`, ...). */
        val reason: String,
        val status: Int?,
    ) : HarnessEvent() {
        override val type: String get() = "retry_scheduled"

        override fun fields(): Map<String, Any?> = linkedMapOf(
            "type" to type, "service" to service, "endpoint" to endpoint, "method" to method, "trace_id" to traceId,
            "attempt" to attempt, "delay_ms" to delayMs, "reason" to reason, "status" to status,
        )
    }

    data class BreakerStateChanged(val service: String, val endpoint: String, val method: String, val from: String, val to: String) : HarnessEvent() {
        override val type: String get() = "breaker_state_changed"

        override fun fields(): Map<String, Any?> =
            linkedMapOf("type" to type, "service" to service, "endpoint" to endpoint, "method" to method, "from" to from, "to" to to)
    }

    data class BulkheadRejected(val service: String, val endpoint: String, val method: String, val maxConcurrency: Int) : HarnessEvent() {
        override val type: String get() = "bulkhead_rejected"

        override fun fields(): Map<String, Any?> =
            linkedMapOf("type" to type, "service" to service, "endpoint" to endpoint, "method" to method, "max_concurrency" to maxConcurrency)
    }

    /** A new config is in force; [source] is `api` or `file:<path>`. */
    data class ConfigReloaded(val version: String, val source: String) : HarnessEvent() {
        override val type: String get() = "config_reloaded"

        override fun fields(): Map<String, Any?> = linkedMapOf("type" to type, "version" to version, "source" to source)
    }

    /** A reload was refused ([error] says why); [version], the old config's, stays in force. */
    data class ConfigRejected(val version: String, val source: String, val error: String) : HarnessEvent() {
        override val type: String get() = "config_rejected"

        override fun fields(): Map<String, Any?> = linkedMapOf("type" to type, "version" to version, "source" to source, "error" to error)
    }

    /**
     * Shared state (Redis) for [service] could not be used ([what] says which: `credentials`,
     * `rate_limit` or `retry_budget`; [error] why); the engine carries on with local state (a
     * rate limit takes `rps / expected_instances`) and keeps reconnecting. Once per outage.
     */
    data class SharedStateUnavailable(val service: String, val what: String, val error: String) : HarnessEvent() {
        override val type: String get() = "shared_state_unavailable"

        override fun fields(): Map<String, Any?> = linkedMapOf("type" to type, "service" to service, "what" to what, "error" to error)
    }

    /**
     * A routed request moves from provider [from] to provider [to]; [reason] is the error kind
     * that made it move (`HttpStatusError`, `TimeoutError`, ...), with the provider's [status]
     * and error [code] (`context_length_exceeded`, ...) when it gave them.
     */
    data class ProviderFailover(
        val route: String,
        val from: String,
        val to: String,
        val traceId: String,
        val reason: String,
        val status: Int?,
        val code: String?,
    ) : HarnessEvent() {
        override val type: String get() = "provider_failover"

        override fun fields(): Map<String, Any?> = linkedMapOf(
            "type" to type, "route" to route, "from" to from, "to" to to, "trace_id" to traceId,
            "reason" to reason, "status" to status, "code" to code,
        )
    }

    /**
     * A streamed chat answer broke after it began and starts again on provider [to]. [mode] is
     * `hidden` (nothing had reached the caller), `restart` (the caller got a restart chunk) or
     * `continue` (the new provider continues the partial answer); [reason] is the first failure.
     */
    data class StreamRestarted(
        val route: String,
        val from: String,
        val to: String,
        val traceId: String,
        val reason: String,
        val mode: String,
    ) : HarnessEvent() {
        override val type: String get() = "stream_restarted"

        override fun fields(): Map<String, Any?> = linkedMapOf(
            "type" to type, "route" to route, "from" to from, "to" to to, "trace_id" to traceId, "reason" to reason, "mode" to mode,
        )
    }

    /** A malformed streamed chunk from [provider] was skipped ([reason] says why); the stream goes on. */
    data class StreamChunkSkipped(val route: String, val provider: String, val traceId: String, val reason: String) : HarnessEvent() {
        override val type: String get() = "stream_chunk_skipped"

        override fun fields(): Map<String, Any?> =
            linkedMapOf("type" to type, "route" to route, "provider" to provider, "trace_id" to traceId, "reason" to reason)
    }

    /** No provider of [route] could answer; a degraded answer was served ([kind]: `cache` or `static`). */
    data class FallbackServed(val route: String, val kind: String, val traceId: String) : HarnessEvent() {
        override val type: String get() = "fallback_served"

        override fun fields(): Map<String, Any?> = linkedMapOf("type" to type, "route" to route, "kind" to kind, "trace_id" to traceId)
    }

    /**
     * A 2xx body did not match its endpoint's JSON Schema: [mode] `enforce` (the caller got a
     * SchemaError) or `warn` (the response was returned). [violation] names the JSON pointer and
     * what did not match, never the body's values.
     */
    data class SchemaViolation(
        val service: String,
        val endpoint: String,
        val method: String,
        val traceId: String,
        val violation: String,
        val mode: String,
    ) : HarnessEvent() {
        override val type: String get() = "schema_violation"

        override fun fields(): Map<String, Any?> = linkedMapOf(
            "type" to type, "service" to service, "endpoint" to endpoint, "method" to method,
            "trace_id" to traceId, "violation" to violation, "mode" to mode,
        )
    }

    /**
     * One request's audit record (config `audit: { enabled: true, sink: { listener: true } }`),
     * the same record the audit file holds: who it was for ([principal], as the caller passed it),
     * what was called, and how it ended ([outcome]: `ok` or the error kind name). With
     * `audit.include_bodies` the bodies are JSON values as [HarnessClient]'s `json` takes them
     * (Map, List, String, Long, Double, ...), already masked by the engine; null otherwise.
     * Never a header value or token. [fields] leaves out the null optional ones, as the file does.
     */
    data class AuditRecord(
        /** Unix time in milliseconds when the request ended. */
        val tsMs: Long,
        val client: String,
        /** Who the call was made for (a request's `principal`), if given. */
        val principal: String?,
        /** The service, or the route the caller named. */
        val service: String,
        /** A routed request's provider that answered (or the last one tried). */
        val provider: String?,
        val endpoint: String,
        val method: String,
        /** The last status received, if any. */
        val status: Int?,
        /** `ok`, or the error kind name (`TimeoutError`, ...). */
        val outcome: String,
        val attempts: Int,
        val durationMs: Double,
        val cost: Double?,
        val traceId: String,
        val requestBody: Any?,
        val responseBody: Any?,
    ) : HarnessEvent() {
        override val type: String get() = "audit_record"

        override fun fields(): Map<String, Any?> = linkedMapOf<String, Any?>("type" to type, "ts_ms" to tsMs, "client" to client).also { m ->
            principal?.let { m["principal"] = it }
            m["service"] = service
            provider?.let { m["provider"] = it }
            m["endpoint"] = endpoint
            m["method"] = method
            m["status"] = status
            m["outcome"] = outcome
            m["attempts"] = attempts
            m["duration_ms"] = durationMs
            cost?.let { m["cost"] = it }
            m["trace_id"] = traceId
            requestBody?.let { m["request_body"] = it }
            responseBody?.let { m["response_body"] = it }
        }

        // Masked bodies may still hold what users sent: only whether there is one.
        override fun toString(): String =
            "AuditRecord(tsMs=$tsMs, client=$client, principal=$principal, service=$service, provider=$provider, " +
                "endpoint=$endpoint, method=$method, status=$status, outcome=$outcome, attempts=$attempts, durationMs=$durationMs, " +
                "cost=$cost, traceId=$traceId, requestBody=${if (requestBody == null) "none" else "..."}, " +
                "responseBody=${if (responseBody == null) "none" else "..."})"
    }
}

internal fun NativeRequestRecord.toEvent(): HarnessEvent.RequestFinished = HarnessEvent.RequestFinished(
    tsMs = tsMs.toLong(),
    client = client,
    traceId = traceId,
    spanId = spanId,
    service = service,
    endpoint = endpoint,
    method = method,
    status = status?.toInt(),
    durationMs = durationMs,
    attempts = attempts.toInt(),
    retryCount = retryCount.toInt(),
    breaker = breaker,
    streamed = streamed,
    errorKind = errorKind,
    errorCode = errorCode,
    errorMessage = errorMessage,
    route = route,
    provider = provider,
    model = model,
    cost = cost,
    fallback = fallback,
    fault = fault,
    schemaViolation = schemaViolation,
)

internal fun NativeAuditRecord.toEvent(): HarnessEvent.AuditRecord = HarnessEvent.AuditRecord(
    tsMs = tsMs.toLong(),
    client = client,
    principal = principal,
    service = service,
    provider = provider,
    endpoint = endpoint,
    method = method,
    status = status?.toInt(),
    outcome = outcome,
    attempts = attempts.toInt(),
    durationMs = durationMs,
    cost = cost,
    traceId = traceId,
    requestBody = requestBody?.let(::auditBody),
    responseBody = responseBody?.let(::auditBody),
)

/** A masked body the engine wrote as JSON; one nested past the reader's limit stays a note, never a lost event. */
private fun auditBody(text: String): Any? = try {
    Json.decode(text)
} catch (e: IllegalArgumentException) {
    "<${text.length} chars of JSON, nested deeper than ${Json.maxDepth} levels>"
}

/** The one place an engine event becomes a [HarnessEvent]. */
internal fun NativeEvent.toEvent(): HarnessEvent = when (this) {
    is NativeEvent.RequestFinished -> record.toEvent()
    is NativeEvent.RetryScheduled ->
        HarnessEvent.RetryScheduled(service, endpoint, method, traceId, attempt.toInt(), delayMs.toLong(), reason, status?.toInt())
    is NativeEvent.BreakerStateChanged -> HarnessEvent.BreakerStateChanged(service, endpoint, method, from, to)
    is NativeEvent.BulkheadRejected -> HarnessEvent.BulkheadRejected(service, endpoint, method, maxConcurrency.toInt())
    is NativeEvent.ConfigReloaded -> HarnessEvent.ConfigReloaded(version, source)
    is NativeEvent.ConfigRejected -> HarnessEvent.ConfigRejected(version, source, error)
    is NativeEvent.SharedStateUnavailable -> HarnessEvent.SharedStateUnavailable(service, what, error)
    is NativeEvent.ProviderFailover -> HarnessEvent.ProviderFailover(route, from, to, traceId, reason, status?.toInt(), code)
    is NativeEvent.StreamRestarted -> HarnessEvent.StreamRestarted(route, from, to, traceId, reason, mode)
    is NativeEvent.StreamChunkSkipped -> HarnessEvent.StreamChunkSkipped(route, provider, traceId, reason)
    is NativeEvent.FallbackServed -> HarnessEvent.FallbackServed(route, kind, traceId)
    is NativeEvent.SchemaViolation -> HarnessEvent.SchemaViolation(service, endpoint, method, traceId, violation, mode)
    is NativeEvent.AuditRecord -> record.toEvent()
}
