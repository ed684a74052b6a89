package dev.harness

import dev.harness.ffi.NativeException

// The exception tree (HarnessException, a class per kind of the core, HarnessErrorInfo and
// `errorInfo`) is generated from the core's kinds and ErrorView into Errors.kt (`harness types`).
// Here: how a native error, and a bad argument the facade catches itself, become one.

/** A native error as its exception; the context crosses as the core's ErrorView (generated in Types.kt). */
internal fun HarnessException.Companion.from(e: NativeException): HarnessException = when (e) {
    is NativeException.Failure -> of(errorInfo(ViewJson.decode<ErrorView>(e.view), e.detail, e.body))
}

/**
 * A bad argument caught before the call reached the engine, named like the core names
 * fields; control characters are escaped as the core escapes them (one line, nothing forged).
 */
internal fun HarnessException.Companion.config(message: String): HarnessException {
    val reason = escapeControl(message)
    return HarnessException.Config(HarnessErrorInfo(kind = "ConfigError", message = "ConfigError: $reason", reason = reason))
}

/** The core's words (`harness_core::json::lone_surrogate`) for a string that is not valid Unicode. */
internal fun HarnessException.Companion.loneSurrogate(field: String): HarnessException =
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
