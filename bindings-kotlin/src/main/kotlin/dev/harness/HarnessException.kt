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
 * | `HttpStatusError`        | [HarnessException.HttpStatus]          |
 * | `AuthError`              | [HarnessException.Auth]                |
 * | `SchemaError`            | [HarnessException.Schema]              |
 * | `ConnectError`           | [HarnessException.Connect]             |
 * | `CancelledError`         | [HarnessException.Cancelled]           |
 * | `NoHealthyProviderError` | [HarnessException.NoHealthyProvider]   |
 * | `ConfigError`            | [HarnessException.Config]              |
 * | `HarnessError` (base)    | [HarnessException.Other]               |
 *
 * Cancelling the calling coroutine surfaces as kotlinx's own `CancellationException`, as
 * coroutines expect; [Cancelled] is for a request the engine itself abandoned.
 * The message never contains header values, tokens or the response body.
 */
sealed class HarnessException(private val info: HarnessErrorInfo) : Exception(info.message) {
    /** The cross-language kind name, e.g. `TimeoutError`. */
    val kind: String get() = info.kind
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
    /** For [Timeout]: `connect`, `response` or `total`. */
    val phase: String? get() = info.phase
    /** The raw downstream body, when there was one. */
    val body: ByteArray? get() = info.body

    class Timeout(info: HarnessErrorInfo) : HarnessException(info)
    class CircuitOpen(info: HarnessErrorInfo) : HarnessException(info)
    class BulkheadFull(info: HarnessErrorInfo) : HarnessException(info)
    class RateLimited(info: HarnessErrorInfo) : HarnessException(info)
    class HttpStatus(info: HarnessErrorInfo) : HarnessException(info)
    class Auth(info: HarnessErrorInfo) : HarnessException(info)
    class Schema(info: HarnessErrorInfo) : HarnessException(info)
    class Connect(info: HarnessErrorInfo) : HarnessException(info)
    class Cancelled(info: HarnessErrorInfo) : HarnessException(info)
    class NoHealthyProvider(info: HarnessErrorInfo) : HarnessException(info)
    class Config(info: HarnessErrorInfo) : HarnessException(info)
    /** The base kind `HarnessError`: a closed client, a runtime used after fork, a broken body. */
    class Other(info: HarnessErrorInfo) : HarnessException(info)

    companion object {
        /** The one place a core error becomes a JVM exception. */
        @JvmStatic
        fun of(info: HarnessErrorInfo): HarnessException = when (info.kind) {
            "TimeoutError" -> Timeout(info)
            "CircuitOpenError" -> CircuitOpen(info)
            "BulkheadFullError" -> BulkheadFull(info)
            "RateLimitedError" -> RateLimited(info)
            "HttpStatusError" -> HttpStatus(info)
            "AuthError" -> Auth(info)
            "SchemaError" -> Schema(info)
            "ConnectError" -> Connect(info)
            "CancelledError" -> Cancelled(info)
            "NoHealthyProviderError" -> NoHealthyProvider(info)
            "ConfigError" -> Config(info)
            else -> Other(info)
        }

        internal fun from(e: NativeException): HarnessException = when (e) {
            is NativeException.Failure -> of(
                HarnessErrorInfo(
                    kind = e.kind,
                    message = e.detail,
                    service = e.service,
                    endpoint = e.endpoint,
                    method = e.method,
                    attempts = e.attempts.toInt(),
                    status = e.status?.toInt(),
                    code = e.code,
                    retryAfterMs = e.retryAfterMs?.toLong(),
                    traceId = e.traceId,
                    phase = e.phase,
                    body = e.body,
                ),
            )
        }

        /** A bad argument caught before the call reached the engine, named like the core names fields. */
        internal fun config(message: String): HarnessException =
            Config(HarnessErrorInfo(kind = "ConfigError", message = "ConfigError: $message"))
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
) {
    // The body is downstream data and may be large or sensitive: never printed.
    override fun toString(): String = "HarnessErrorInfo(kind=$kind, message=$message)"
}
