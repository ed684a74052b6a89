package dev.harness

import dev.harness.ffi.NativeEntry
import dev.harness.ffi.NativeRequest

/*
 * Kotlin strings are UTF-16 and may hold a lone surrogate, which no UTF-8 text can carry.
 * Such a string is refused before it crosses, with a ConfigError naming the argument (the
 * core's wording), instead of UniFFI's raw CharacterCodingException or a silent `?`.
 */

/** True if [s] has a surrogate that is not half of a pair. */
internal fun hasLoneSurrogate(s: String): Boolean {
    var i = 0
    while (i < s.length) {
        val c = s[i]
        if (c.isHighSurrogate() && i + 1 < s.length && s[i + 1].isLowSurrogate()) {
            i += 2
            continue
        }
        if (c.isSurrogate()) return true
        i++
    }
    return false
}

/** Throws a ConfigError naming the first argument (name to value) that is not valid Unicode. */
internal fun requireUnicode(vararg arguments: Pair<String, String?>) {
    for ((name, value) in arguments) if (value != null && hasLoneSurrogate(value)) throw HarnessException.loneSurrogate(name)
}

/** The error for a request UniFFI could not encode, naming the field as the core names request fields. */
internal fun loneSurrogateIn(r: NativeRequest): HarnessException {
    fun bad(s: String?) = s != null && hasLoneSurrogate(s)
    fun entries(field: String, list: List<NativeEntry>): String? {
        for (e in list) {
            // A bad name is not printed (it cannot be); a bad value is named by its (printable) name.
            if (bad(e.name)) return field
            if (bad(e.value)) return "$field.${e.name}"
        }
        return null
    }
    val field = when {
        bad(r.service) -> "request.service"
        bad(r.method) -> "request.method"
        bad(r.path) -> "request.path"
        bad(r.endpoint) -> "request.endpoint"
        bad(r.idempotencyKey) -> "request.idempotency_key"
        bad(r.traceparent) -> "request.traceparent"
        bad(r.principal) -> "request.principal"
        bad(r.json) -> "json"
        else -> entries("request.query", r.query) ?: entries("request.headers", r.headers) ?: "request"
    }
    return HarnessException.loneSurrogate(field)
}
