package dev.harness

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
