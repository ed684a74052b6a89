@file:JvmName("Interceptors")

package dev.harness

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import dev.harness.ffi.InterceptorHostException
import dev.harness.ffi.NativeInterceptor
import dev.harness.ffi.uniffiCallbackInterfaceNativeInterceptor
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.future.await
import kotlinx.coroutines.withContext
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put
import java.util.Base64
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import java.util.concurrent.ExecutionException
import kotlin.coroutines.Continuation

/** An interceptor's level ([Interceptor.level]): `APPLICATION` (once per call) or `ATTEMPT` (once per attempt). */
typealias InterceptorLevel = Level

/**
 * A team's own rule on calls, written in Kotlin ([HarnessClient.addInterceptor]): a tenant
 * header, a field a partner needs in the body, a 200 that is really an error.
 *
 * - [before] sees the request ([InterceptedRequest]: method, service, endpoint, path, query,
 *   headers, body as base64 and parsed [InterceptedRequest.json], attempt, provider, trace id)
 *   and returns `null` (no change) or [RequestChanges]: headers and query parameters to set
 *   (a `null` value removes one), a new `path`, a new `json` body or bytes ([withBody]), and
 *   the names of headers whose values are `secret` (redacted and scrubbed like credentials).
 * - [after] sees the answer ([InterceptedResponse]: status, headers, elapsed ms, and with
 *   [wantBody] a buffered answer's body) and throws [Reject] to fail it.
 *
 * Only the functions the class overrides are called (an interceptor with neither is refused);
 * [interceptor] builds one from lambdas. The level is [level], or the config's
 * `interceptors.levels`, else [Level.APPLICATION]: an application interceptor's [before] runs
 * once per call ahead of the first attempt and its [after] on the answer the caller gets; an
 * attempt interceptor runs on every attempt (retries, hedges and failover included; [before]
 * ahead of credentials and signing). [services] limits it to calls to those services or routes.
 *
 * The functions run on [Dispatchers.IO], never on an engine thread, so a blocking one holds
 * only its own call; each call is bounded by `interceptors.timeout_ms` (default 1 s) and the
 * call's deadline, past which it is cancelled. Any exception, a timeout, or a change the
 * engine refuses (framing headers such as `content-length` or `host`, a path with `..`, a body
 * over `limits.max_request_bytes`) fails the call with [HarnessException.Interceptor] (code
 * `raised`, `timeout` or `invalid`) and sends nothing.
 *
 * ```kotlin
 * client.addInterceptor(object : Interceptor {
 *     override val name = "tenant"
 *     override suspend fun before(request: InterceptedRequest) = RequestChanges(headers = mapOf("x-tenant" to "acme"))
 * })
 * ```
 */
interface Interceptor {
    /** Names it in errors and in `interceptors.levels`: 1-64 letters, digits, `-`, `_` or `.`. */
    val name: String

    /** `null`: the config's `interceptors.levels`, else [Level.APPLICATION]. */
    val level: InterceptorLevel? get() = null

    /** Only calls to these services or routes (an attempt interceptor: also a route provider's service); empty: every call. */
    val services: List<String> get() = emptyList()

    /** [after] sees a buffered answer's body ([InterceptedResponse.bodyBase64], [InterceptedResponse.json]). */
    val wantBody: Boolean get() = false

    /** The changes to make to the request, or `null` for none. */
    suspend fun before(request: InterceptedRequest): RequestChanges? = null

    /** Looks at the answer; throw [Reject] to fail it. */
    suspend fun after(response: InterceptedResponse) {}
}

/**
 * For Java: an [Interceptor] whose functions answer with a [CompletableFuture]
 * ([HarnessClient.addInterceptorAsync]). Only the methods the class overrides are called. A
 * future that completes exceptionally, or a method that throws, is the interceptor raising;
 * one that completes with a [Reject] (from [afterAsync]) fails the answer.
 *
 * ```java
 * client.addInterceptorAsync(new AsyncInterceptor() {
 *     public String getName() { return "tenant"; }
 *     public CompletableFuture<RequestChanges> beforeAsync(InterceptedRequest request) {
 *         return CompletableFuture.completedFuture(new RequestChanges(Map.of("x-tenant", "acme"), null, null, null, null, null));
 *     }
 * });
 * ```
 */
interface AsyncInterceptor {
    val name: String
    val level: InterceptorLevel? get() = null
    val services: List<String> get() = emptyList()
    val wantBody: Boolean get() = false
    fun beforeAsync(request: InterceptedRequest): CompletableFuture<RequestChanges?> = CompletableFuture.completedFuture(null)
    fun afterAsync(response: InterceptedResponse): CompletableFuture<Void?> = CompletableFuture.completedFuture(null)
}

/**
 * Thrown by [Interceptor.after] to fail an answer: the call fails with
 * [HarnessException.Interceptor] whose `code` is [code] (default `rejected`) and whose status
 * is the answer's. A [retryable] one goes through the retry rules as a 503 would (retried, or
 * failed over on a route; a POST is not resent). Thrown from `before`, it is an exception like
 * any other (code `raised`).
 */
class Reject @JvmOverloads constructor(message: String, val retryable: Boolean = false, val code: String? = null) : Exception(message)

/** An [Interceptor] from lambdas: a null [before] or [after] is not registered for that phase. */
@JvmSynthetic
fun interceptor(
    name: String,
    level: InterceptorLevel? = null,
    services: List<String> = emptyList(),
    wantBody: Boolean = false,
    before: (suspend (InterceptedRequest) -> RequestChanges?)? = null,
    after: (suspend (InterceptedResponse) -> Unit)? = null,
): Interceptor = FunctionInterceptor(name, level, services, wantBody, before, after)

/** The request's body as bytes (`null` when it has none). */
val InterceptedRequest.body: ByteArray? get() = bodyBase64?.let { Base64.getDecoder().decode(it) }

/** The answer's body as bytes (only with [Interceptor.wantBody], for a buffered answer). */
val InterceptedResponse.body: ByteArray? get() = bodyBase64?.let { Base64.getDecoder().decode(it) }

/** These changes with [body] as the new request body (within `limits.max_request_bytes`). */
fun RequestChanges.withBody(body: ByteArray): RequestChanges = copy(json = null, bodyBase64 = Base64.getEncoder().encodeToString(body))

/** These changes with [value] (maps, lists, strings, numbers, ... as a request's `json` takes) as the new JSON body. */
fun RequestChanges.withJson(value: Any?): RequestChanges =
    copy(json = ViewJson.json.parseToJsonElement(Json.encode(value, "json")), bodyBase64 = null)

private class FunctionInterceptor(
    override val name: String,
    override val level: InterceptorLevel?,
    override val services: List<String>,
    override val wantBody: Boolean,
    val beforeFn: (suspend (InterceptedRequest) -> RequestChanges?)?,
    val afterFn: (suspend (InterceptedResponse) -> Unit)?,
) : Interceptor {
    override suspend fun before(request: InterceptedRequest): RequestChanges? = beforeFn?.invoke(request)
    override suspend fun after(response: InterceptedResponse) {
        afterFn?.invoke(response)
    }

    override fun toString(): String = "Interceptor($name)"
}

private class FutureInterceptor(val async: AsyncInterceptor) : Interceptor {
    override val name: String get() = async.name
    override val level: InterceptorLevel? get() = async.level
    override val services: List<String> get() = async.services
    override val wantBody: Boolean get() = async.wantBody

    override suspend fun before(request: InterceptedRequest): RequestChanges? =
        (async.beforeAsync(request) ?: throw NullPointerException("beforeAsync returned no future")).await()

    override suspend fun after(response: InterceptedResponse) {
        (async.afterAsync(response) ?: throw NullPointerException("afterAsync returned no future")).await()
    }
}

/**
 * The engine's view of a host interceptor (`src/interceptors.rs`). The engine awaits [call]
 * from its runtime; the interceptor runs on [Dispatchers.IO] (UniFFI starts the coroutine on
 * Dispatchers.Default, never on the calling engine thread), and a call past its time is
 * cancelled. A [Reject] from `after` becomes `{"fail": ...}`; any other exception
 * `<SimpleName>: <message>`, which the engine names with the interceptor and the phase.
 */
internal class HostInterceptor private constructor(private val interceptor: Interceptor) : NativeInterceptor {
    override suspend fun call(phase: String, input: String): String = try {
        withContext(Dispatchers.IO) {
            when (phase) {
                "before" -> interceptor.before(ViewJson.decode<InterceptedRequest>(input))?.toJson() ?: "null"
                "after" -> {
                    interceptor.after(ViewJson.decode<InterceptedResponse>(input))
                    "null"
                }
                else -> throw IllegalArgumentException("unknown phase `$phase`")
            }
        }
    } catch (e: CancellationException) {
        throw e
    } catch (t: Throwable) {
        val cause = unwrap(t)
        if (phase == "after" && cause is Reject) cause.toJson() else throw InterceptorHostException.Raised(describeHostException(cause))
    }

    companion object {
        init {
            // Engine threads that call interceptors stay attached to the JVM between calls (as the request path's).
            Native.setCallbackThreadInitializer(uniffiCallbackInterfaceNativeInterceptor.`call`, CallbackThreadInitializer(true, false, "harness-worker"))
        }

        /** What the engine registers: the interceptor, and which of its functions it has. */
        fun of(interceptor: Interceptor): Pair<HostInterceptor, Phases> {
            val phases = when (interceptor) {
                is FunctionInterceptor -> Phases(interceptor.beforeFn != null, interceptor.afterFn != null)
                is FutureInterceptor -> Phases(
                    overrides(interceptor.async, AsyncInterceptor::class.java, "beforeAsync", InterceptedRequest::class.java),
                    overrides(interceptor.async, AsyncInterceptor::class.java, "afterAsync", InterceptedResponse::class.java),
                )
                else -> Phases(
                    overrides(interceptor, Interceptor::class.java, "before", InterceptedRequest::class.java, Continuation::class.java),
                    overrides(interceptor, Interceptor::class.java, "after", InterceptedResponse::class.java, Continuation::class.java),
                )
            }
            return HostInterceptor(interceptor) to phases
        }

        fun of(interceptor: AsyncInterceptor): Pair<HostInterceptor, Phases> = of(FutureInterceptor(interceptor))

        /**
         * Whether [obj]'s class overrides [iface]'s default method. Kotlin compiles a class that
         * does not as a bridge to the default (`ACC_BRIDGE`); when in doubt (a class compiled to
         * call `DefaultImpls`), it does: a call that changes nothing.
         */
        private fun overrides(obj: Any, iface: Class<*>, name: String, vararg params: Class<*>): Boolean =
            try {
                val method = obj.javaClass.getMethod(name, *params)
                method.declaringClass != iface && !method.isBridge
            } catch (_: NoSuchMethodException) {
                true
            }

        /** The exception itself: not a future's wrapper, nor a copy coroutines made to recover a stack trace (which loses a [Reject]'s fields). */
        private fun unwrap(t: Throwable): Throwable {
            var e = t
            while (true) {
                val cause = e.cause ?: return e
                if (e is CompletionException || e is ExecutionException || cause.javaClass == e.javaClass) e = cause else return e
            }
        }
    }

    data class Phases(val before: Boolean, val after: Boolean)
}

/** The changes as the engine reads them: only what was given (a `json` of [kotlinx.serialization.json.JsonNull] is a JSON `null` body). */
private fun RequestChanges.toJson(): String = buildJsonObject {
    headers?.let { h -> put("headers", JsonObject(h.mapValues { (_, v) -> JsonPrimitive(v) })) }
    query?.let { q -> put("query", JsonObject(q.mapValues { (_, v) -> JsonPrimitive(v) })) }
    path?.let { put("path", it) }
    json?.let { put("json", it) }
    bodyBase64?.let { put("body_base64", it) }
    secret?.let { s -> put("secret", JsonArray(s.map(::JsonPrimitive))) }
}.toString()

private fun Reject.toJson(): String = buildJsonObject {
    put("fail", buildJsonObject {
        put("message", message ?: "rejected")
        put("retryable", retryable)
        code?.let { put("code", it) }
    })
}.toString()
