package dev.harness

import dev.harness.ffi.NativeException

/**
 * Every failure of a Harness call. The subclass says what happened; [kind] carries the
 * cross-language name used by the Python and Node bindings and in logs and metrics:
 *
 * | core kind                | Kotlin / Java class                    |
 * |--------------------------|----------------------------------------|
 * | `TimeoutError`           | [HarnessException.Timeout] ([phase])   |
 * | `CircuitOpenError`       | [HarnessException.CircuitOpen]         |
 * | `BulkheadFullError`      | [HarnessException.BulkheadFull]        |
 * | `RateLimitedError`       | [HarnessException.RateLimited]         |
 * | `DuplicateInFlightError` | [HarnessException.DuplicateInFlight]   |
 * | `HttpStatusError`        | [HarnessException.HttpStatus]          |
 * | `AuthError`              | [HarnessException.Auth]                |
 * | `SchemaError`            | [HarnessException.Schema]              |
 * | `ConnectError`           | [HarnessException.Connect]             |
 * | `CancelledError`         | [HarnessException.Cancelled]           |
 * | `NoHealthyProviderError` | [HarnessException.NoHealthyProvider]   |
 * | `ConfigError`            | [HarnessException.Config]              |
 * | `ProtocolError`          | [HarnessException.Protocol]            |
 * | `ResponseTooLargeError`  | [HarnessException.ResponseTooLarge]    |
 * | `HarnessError` (base)    | [HarnessException.Other]               |
 *
 * Cancelling the calling coroutine surfaces as kotlinx's own `CancellationException`, as
 * coroutines expect; [Cancelled] is for a request the engine itself abandoned.
 * The message (`Kind: reason (service=..., endpoint=..., attempts=..., trace_id=...)`) is one
 * line and never contains header values, tokens or the response body.
 */
sealed class HarnessException(private val info: HarnessErrorInfo) : Exception(info.message) {
    /** The cross-language kind name, e.g. `TimeoutError`. */
    val kind: String get() = info.kind
    /**
     * The engine's message alone, without the kind name and the context that [message] adds
     * (Python's `error.message`); for a [Config] it starts with the field path.
     */
    val reason: String get() = info.reason
    val service: String? get() = info.service
    val endpoint: String? get() = info.endpoint
    val method: String? get() = info.method
    val attempts: Int get() = info.attempts
    /** The downstream status, for [HttpStatus] and friends. */
    val status: Int? get() = info.status
    /** The normalised downstream error code (`code`, `errCode`, `error.code`). */
    val code: String? get() = info.code
    val retryAfterMs: Long? get() = info.retryAfterMs
    val traceId: String? get() = info.traceId
    /**
     * For [Timeout]: `connect`, `response`, `idle` (no body bytes for `timeouts.idle_ms`),
     * `ttft` (a streamed chat answer's first chunk not within the route's `ttft_ms`) or `total`.
     */
    val phase: String? get() = info.phase
    /** The raw downstream body, when there was one. */
    val body: ByteArray? get() = info.body
    /** Routed requests: the provider whose answer this error is. */
    val provider: String? get() = info.provider
    /**
     * For [NoHealthyProvider]: each provider of the route (in config order) and its last
     * error, or why it was not tried. Empty otherwise.
     */
    val providerErrors: List<Pair<String, String>> get() = info.providerErrors

    class Timeout(info: HarnessErrorInfo) : HarnessException(info)
    class CircuitOpen(info: HarnessErrorInfo) : HarnessException(info)
    class BulkheadFull(info: HarnessErrorInfo) : HarnessException(info)
    /**
     * Too many requests: a downstream 429, or the client's own `rate_limit` (code
     * `client_rate_limited`, no [status]: nothing was sent). [retryAfterMs] says when to try again.
     */
    class RateLimited(info: HarnessErrorInfo) : HarnessException(info)
    /**
     * [Idempotency.run]: another delivery of this message is being processed now; [retryAfterMs]
     * is the time left on its lease (code `duplicate_in_flight`). The handler did not run.
     */
    class DuplicateInFlight(info: HarnessErrorInfo) : HarnessException(info)
    class HttpStatus(info: HarnessErrorInfo) : HarnessException(info)
    class Auth(info: HarnessErrorInfo) : HarnessException(info)
    class Schema(info: HarnessErrorInfo) : HarnessException(info)
    class Connect(info: HarnessErrorInfo) : HarnessException(info)
    class Cancelled(info: HarnessErrorInfo) : HarnessException(info)
    /** No provider of the route could answer: [providerErrors] says why, provider by provider. */
    class NoHealthyProvider(info: HarnessErrorInfo) : HarnessException(info)
    class Config(info: HarnessErrorInfo) : HarnessException(info)
    /** The server answered, but not with valid HTTP (bad status line, conflicting lengths, too many headers, a final 1xx). */
    class Protocol(info: HarnessErrorInfo) : HarnessException(info)
    /** The response is larger than the service's `limits.max_response_bytes`. */
    class ResponseTooLarge(info: HarnessErrorInfo) : HarnessException(info)
    /**
     * The base kind `HarnessError`: a closed client, a runtime used after fork, a broken body;
     * from [Idempotency], the receiver's [code]d outcomes (`store_unavailable`, `lease_lost`,
     * `failed_before`).
     */
    class Other(info: HarnessErrorInfo) : HarnessException(info)

    companion object {
        /** The one place a core error becomes a JVM exception. */
        @JvmStatic
        fun of(info: HarnessErrorInfo): HarnessException = when (info.kind) {
            "TimeoutError" -> Timeout(info)
            "CircuitOpenError" -> CircuitOpen(info)
            "BulkheadFullError" -> BulkheadFull(info)
            "RateLimitedError" -> RateLimited(info)
            "DuplicateInFlightError" -> DuplicateInFlight(info)
            "HttpStatusError" -> HttpStatus(info)
            "AuthError" -> Auth(info)
            "SchemaError" -> Schema(info)
            "ConnectError" -> Connect(info)
            "CancelledError" -> Cancelled(info)
            "NoHealthyProviderError" -> NoHealthyProvider(info)
            "ConfigError" -> Config(info)
            "ProtocolError" -> Protocol(info)
            "ResponseTooLargeError" -> ResponseTooLarge(info)
            else -> Other(info)
        }

        internal fun from(e: NativeException): HarnessException = when (e) {
            // The context crosses as the core's ErrorView (generated in Types.kt).
            is NativeException.Failure -> ViewJson.decode<ErrorView>(e.view).let { v ->
                of(
                    HarnessErrorInfo(
                        kind = e.kind,
                        message = e.detail,
                        reason = e.reason,
                        service = v.service,
                        endpoint = v.endpoint,
                        method = v.method,
                        attempts = v.attempts,
                        status = v.status,
                        code = v.code,
                        retryAfterMs = v.retryAfterMs,
                        traceId = v.traceId,
                        phase = v.phase,
                        body = e.body,
                        provider = v.provider,
                        providerErrors = v.providerErrors.map { it.provider to it.error },
                    ),
                )
            }
        }

        /**
         * A bad argument caught before the call reached the engine, named like the core names
         * fields; control characters are escaped as the core escapes them (one line, nothing forged).
         */
        internal fun config(message: String): HarnessException {
            val reason = escapeControl(message)
            return Config(HarnessErrorInfo(kind = "ConfigError", message = "ConfigError: $reason", reason = reason))
        }

        /** The core's words (`harness_core::json::lone_surrogate`) for a string that is not valid Unicode. */
        internal fun loneSurrogate(field: String): HarnessException =
            config("$field: contains a lone surrogate (not valid Unicode)")

        /** `\n`, `\r`, `\t` and `\u{..}` for every control character, as `harness_core::redact::escape_control`. */
        private fun escapeControl(s: String): String {
            if (s.none { it.isISOControl() }) return s
            val out = StringBuilder(s.length + 8)
            for (c in s) {
                when {
                    c == '\n' -> out.append("\\n")
                    c == '\r' -> out.append("\\r")
                    c == '\t' -> out.append("\\t")
                    c.isISOControl() -> out.append("\\u{").append(Integer.toHexString(c.code)).append('}')
                    else -> out.append(c)
                }
            }
            return out.toString()
        }
    }
}

/** What a [HarnessException] carries; public so tests and fakes can build exceptions. */
class HarnessErrorInfo @JvmOverloads constructor(
    val kind: String,
    val message: String,
    val service: String? = null,
    val endpoint: String? = null,
    val method: String? = null,
    val attempts: Int = 0,
    val status: Int? = null,
    val code: String? = null,
    val retryAfterMs: Long? = null,
    val traceId: String? = null,
    val phase: String? = null,
    val body: ByteArray? = null,
    /** The engine's message alone; by default [message] without its leading `Kind: `. */
    reason: String? = null,
    val provider: String? = null,
    val providerErrors: List<Pair<String, String>> = emptyList(),
) {
    val reason: String = reason ?: message.removePrefix("$kind: ")

    // The body is downstream data and may be large or sensitive: never printed.
    override fun toString(): String = "HarnessErrorInfo(kind=$kind, message=$message)"
}
