package dev.harness

/**
 * Writes a Map/List/scalar tree as JSON text, the form config and JSON bodies cross the FFI in.
 * Only translation: the engine parses and validates; here a value JSON cannot express is a
 * ConfigError naming where it sits.
 */
internal object Json {
    fun encode(value: Any?, field: String): String = StringBuilder().also { write(it, value, field) }.toString()

    private fun write(out: StringBuilder, value: Any?, at: String) {
        when (value) {
            null -> out.append("null")
            is String -> string(out, value)
            is Char -> string(out, value.toString())
            is Boolean -> out.append(value)
            is Int, is Long, is Short, is Byte -> out.append(value)
            is UInt, is ULong, is UShort, is UByte -> out.append(value)
            is java.math.BigInteger, is java.math.BigDecimal -> out.append(value)
            is Double -> finite(out, value.isFinite(), value, at)
            is Float -> finite(out, value.isFinite(), value, at)
            is Number -> out.append(value.toString())
            is Map<*, *> -> {
                out.append('{')
                var first = true
                for ((k, v) in value) {
                    if (k !is String) throw HarnessException.config("$at: map keys must be strings, got ${k?.javaClass?.simpleName}")
                    if (!first) out.append(',')
                    first = false
                    string(out, k)
                    out.append(':')
                    write(out, v, "$at.$k")
                }
                out.append('}')
            }
            is Iterable<*> -> array(out, value.iterator(), at)
            is Array<*> -> array(out, value.iterator(), at)
            is IntArray -> array(out, value.iterator(), at)
            is LongArray -> array(out, value.iterator(), at)
            is DoubleArray -> array(out, value.iterator(), at)
            is Enum<*> -> string(out, value.name)
            else -> throw HarnessException.config("$at: cannot be written as JSON (a ${value.javaClass.name})")
        }
    }

    private fun finite(out: StringBuilder, ok: Boolean, value: Number, at: String) {
        if (!ok) throw HarnessException.config("$at: $value is not a JSON number")
        out.append(value.toString())
    }

    private fun array(out: StringBuilder, items: Iterator<*>, at: String) {
        out.append('[')
        var i = 0
        for (v in items) {
            if (i > 0) out.append(',')
            write(out, v, "$at[$i]")
            i++
        }
        out.append(']')
    }

    private fun string(out: StringBuilder, s: String) {
        out.append('"')
        for (c in s) {
            when (c) {
                '"' -> out.append("\\\"")
                '\\' -> out.append("\\\\")
                '\n' -> out.append("\\n")
                '\r' -> out.append("\\r")
                '\t' -> out.append("\\t")
                else -> if (c < ' ') out.append("\\u%04x".format(c.code)) else out.append(c)
            }
        }
        out.append('"')
    }
}
