package dev.harness

import dev.harness.ffi.NativeToken
import dev.harness.ffi.NativeTokenProvider
import dev.harness.ffi.TokenException
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.future.await
import kotlinx.coroutines.withContext
import java.util.concurrent.CompletableFuture
import kotlin.time.toJavaDuration

/**
 * A token from a host token provider ([HarnessClient.setTokenProvider]): the value and, when
 * it expires, how soon (`null`: it does not expire). [toString] never shows the value.
 *
 * ```kotlin
 * Token(fetched.accessToken, fetched.expiresIn.seconds)
 * ```
 * ```java
 * new Token(accessToken, Duration.ofSeconds(expiresIn))
 * ```
 */
class Token @JvmOverloads constructor(val value: String, val expiresIn: java.time.Duration? = null) {
    /** With a Kotlin [kotlin.time.Duration]. */
    constructor(value: String, expiresIn: kotlin.time.Duration) : this(value, expiresIn.toJavaDuration())

    init {
        require(expiresIn == null || !expiresIn.isNegative) { "Token.expiresIn must not be negative, got $expiresIn" }
    }

    override fun equals(other: Any?): Boolean = other is Token && other.value == value && other.expiresIn == expiresIn

    override fun hashCode(): Int = value.hashCode() * 31 + expiresIn.hashCode()

    override fun toString(): String = "Token(value=***, expiresIn=$expiresIn)"
}

/**
 * For Java: a token provider that answers with a [CompletableFuture] (see
 * [HarnessClient.setTokenProviderAsync]). A future that completes exceptionally, or a
 * `fetch` that throws, is an [HarnessException.Auth] for the requests that needed the token.
 */
fun interface AsyncTokenProvider {
    fun fetch(): CompletableFuture<Token>
}

/**
 * The engine's view of a host provider. The engine awaits [fetch] from its runtime; the
 * provider runs on [Dispatchers.Default], never on an engine thread, and a timed-out refresh
 * cancels it. Whatever the provider throws becomes the refresh's error message (its class
 * and message; never the token, which only travels in a successful answer).
 */
internal class HostTokenProvider(private val fetchToken: suspend () -> Token) : NativeTokenProvider {
    override suspend fun fetch(): NativeToken = try {
        withContext(Dispatchers.Default) { fetchToken().toNative() }
    } catch (e: CancellationException) {
        throw e
    } catch (t: Throwable) {
        throw TokenException.Failed(describe(t))
    }

    private fun Token.toNative(): NativeToken {
        // A lone surrogate cannot cross as UTF-8; say so instead of failing in the encoder.
        if (hasLoneSurrogate(value)) throw IllegalArgumentException("the token is not valid Unicode (a lone surrogate)")
        // A lifetime past Long.MAX_VALUE milliseconds saturates (the core holds it for its maximum).
        val ms = expiresIn?.let { runCatching { it.toMillis() }.getOrDefault(Long.MAX_VALUE) }
        return NativeToken(value, ms?.toULong())
    }

    companion object {
        fun of(provider: AsyncTokenProvider) = HostTokenProvider {
            // Java may return null whatever the signature says.
            val future: CompletableFuture<Token>? = provider.fetch()
            if (future == null) throw NullPointerException("the provider returned no future")
            future.await() ?: throw NullPointerException("the provider's future completed with null")
        }

        private fun describe(t: Throwable): String = describeHostException(t)
    }
}
