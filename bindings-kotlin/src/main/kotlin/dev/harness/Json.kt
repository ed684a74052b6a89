package dev.harness

import java.math.BigDecimal
import java.math.BigInteger

/**
 * Writes a Map/List/scalar tree as JSON text, the form config, JSON bodies and receiver results
 * cross the FFI in, and reads JSON text back ([decode], for a receiver's stored result);
 * the core sends a body byte for byte (after its own checks), so the text is what the caller gave:
 *
 * - a Map is an object, its keys (Strings only) in the map's iteration order (LinkedHashMap order);
 * - any Iterable (List, Set, ...) or array is an array, in iteration order;
 * - Int, Long, Short, Byte, their unsigned kinds, BigInteger and BigDecimal are written exactly
 *   (`toString`); Double and Float as Kotlin prints them; NaN and ±Infinity are refused;
 * - String, Char and Enum (its name) are strings; a String with a lone surrogate is refused;
 * - nesting stops at the core's limit ([maxDepth], 512): past it a ConfigError, never a
 *   StackOverflowError (the walk is iterative), also for a value that contains itself.
 *
 * A refused value is a ConfigError naming where it sits (`json.items[2].price`).
 */
internal object Json {
    /** The core's limit (`harness_core::json::MAX_DEPTH`), asked once. */
    val maxDepth: Int by lazy { dev.harness.ffi.jsonMaxDepth().toInt() }

    /** One open array or object: its remaining items and where the walk is inside it. */
    private class Frame(val items: Iterator<*>, val isObject: Boolean) {
        var index = -1
        var key: String? = null
    }

    fun encode(value: Any?, field: String): String {
        val out = StringBuilder(128)
        val stack = ArrayList<Frame>()
        write(out, stack, value, field)
        while (stack.isNotEmpty()) {
            val top = stack[stack.size - 1]
            if (!top.items.hasNext()) {
                out.append(if (top.isObject) '}' else ']')
                stack.removeAt(stack.size - 1)
                continue
            }
            val item = top.items.next()
            top.index++
            if (top.index > 0) out.append(',')
            if (top.isObject) {
                val (k, v) = item as Map.Entry<*, *>
                top.key = null // errors in the key itself name the enclosing object
                if (k !is String) throw HarnessException.config("${path(field, stack)}: map keys must be strings, got ${k?.javaClass?.simpleName}")
                string(out, k, field, stack)
                top.key = k
                out.append(':')
                write(out, stack, v, field)
            } else {
                write(out, stack, item, field)
            }
        }
        return out.toString()
    }

    /** A scalar is written at once; an array or object is opened and pushed for the loop in [encode]. */
    private fun write(out: StringBuilder, stack: ArrayList<Frame>, value: Any?, field: String) {
        val items: Iterator<*>
        val isObject: Boolean
        when (value) {
            null -> return run { out.append("null") }
            is String -> return string(out, value, field, stack)
            is Boolean -> return run { out.append(value) }
            is Int, is Long, is Short, is Byte, is BigInteger, is BigDecimal -> return run { out.append(value) }
            is UInt, is ULong, is UShort, is UByte -> return run { out.append(value) }
            is Double -> return finite(out, value.isFinite(), value, field, stack)
            is Float -> return finite(out, value.isFinite(), value, field, stack)
            is Number -> return number(out, value, field, stack)
            is Char -> return string(out, value.toString(), field, stack)
            is Enum<*> -> return string(out, value.name, field, stack)
            is Map<*, *> -> { items = value.entries.iterator(); isObject = true }
            is Iterable<*> -> { items = value.iterator(); isObject = false }
            is Array<*> -> { items = value.iterator(); isObject = false }
            is IntArray -> { items = value.iterator(); isObject = false }
            is LongArray -> { items = value.iterator(); isObject = false }
            is DoubleArray -> { items = value.iterator(); isObject = false }
            is FloatArray -> { items = value.iterator(); isObject = false }
            is ShortArray -> { items = value.iterator(); isObject = false }
            is BooleanArray -> { items = value.iterator(); isObject = false }
            else -> throw HarnessException.config("${path(field, stack)}: cannot be written as JSON (a ${value.javaClass.name})")
        }
        // The same words as the core's check, which would refuse the text anyway.
        if (stack.size >= maxDepth) throw HarnessException.config("$field: nested deeper than $maxDepth levels")
        out.append(if (isObject) '{' else '[')
        stack.add(Frame(items, isObject))
    }

    private fun finite(out: StringBuilder, ok: Boolean, value: Number, field: String, stack: List<Frame>) {
        if (!ok) throw HarnessException.config("${path(field, stack)}: $value is not a JSON number (NaN and Infinity are refused)")
        out.append(value.toString())
    }

    /** Another Number type (AtomicLong, a library's decimal): its text, if JSON accepts it as a number. */
    private fun number(out: StringBuilder, value: Number, field: String, stack: List<Frame>) {
        val text = value.toString()
        if (!JSON_NUMBER.matches(text)) throw HarnessException.config("${path(field, stack)}: ${value.javaClass.simpleName} $text is not a JSON number")
        out.append(text)
    }

    private val JSON_NUMBER = Regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")

    private fun string(out: StringBuilder, s: String, field: String, stack: List<Frame>) {
        out.append('"')
        var i = 0
        while (i < s.length) {
            val c = s[i]
            when {
                c == '"' -> out.append("\\\"")
                c == '\\' -> out.append("\\\\")
                c == '\n' -> out.append("\\n")
                c == '\r' -> out.append("\\r")
                c == '\t' -> out.append("\\t")
                c < ' ' -> out.append("\\u00").append(HEX[c.code shr 4]).append(HEX[c.code and 0xf])
                c.isHighSurrogate() && i + 1 < s.length && s[i + 1].isLowSurrogate() -> {
                    out.append(c).append(s[i + 1])
                    i++
                }
                c.isSurrogate() -> throw HarnessException.loneSurrogate(path(field, stack))
                else -> out.append(c)
            }
            i++
        }
        out.append('"')
    }

    private val HEX = "0123456789abcdef".toCharArray()

    /**
     * One flat JSON object written field by field: a request's head or a chat call, the form the
     * core reads them in (`Request::from_host`, `ChatRequest::from_host`, which own the field
     * names and every rule). A null is left out; a string that is not valid Unicode is a
     * ConfigError naming its field as the core names request fields (`request.headers.x-id`).
     */
    class Head(capacity: Int = 256) {
        private val out = StringBuilder(capacity).append('{')

        private fun key(name: String) {
            if (out.length > 1) out.append(',')
            out.append('"').append(name).append("\":")
        }

        fun string(name: String, value: String?, field: String = "request.$name"): Head {
            if (value != null) {
                key(name)
                string(out, value, field, NO_FRAMES)
            }
            return this
        }

        fun long(name: String, value: Long?): Head {
            if (value != null) key(name).also { out.append(value) }
            return this
        }

        /** JSON text [encode] already wrote (and checked). */
        fun json(name: String, text: String?): Head {
            if (text != null) key(name).also { out.append(text) }
            return this
        }

        /** Name-value pairs as `[[name, value], ...]`: [map]'s, then [list]'s, in order, repeats kept. */
        fun pairs(name: String, map: Map<String, String>, list: List<Pair<String, String>> = emptyList()): Head {
            key(name)
            out.append('[')
            for ((k, v) in map) pair("request.$name", k, v)
            for ((k, v) in list) pair("request.$name", k, v)
            out.append(']')
            return this
        }

        private fun pair(field: String, name: String, value: String) {
            if (out[out.length - 1] != '[') out.append(',')
            out.append('[')
            string(out, name, field, NO_FRAMES)
            out.append(',')
            // A bad name is not printed (it cannot be); a bad value is named by its (printable) name.
            string(out, value, "$field.$name", NO_FRAMES)
            out.append(']')
        }

        fun bytes(): ByteArray = out.append('}').toString().toByteArray(Charsets.UTF_8)
    }

    private val NO_FRAMES = emptyList<Frame>()

    /** Where the walk is, for an error: `json.items[2].price` (built only when something is refused). */
    private fun path(field: String, stack: List<Frame>): String {
        val p = StringBuilder(field)
        for (f in stack) {
            if (f.index < 0) break
            if (f.isObject) f.key?.let { p.append('.').append(it) } else p.append('[').append(f.index).append(']')
        }
        return p.toString()
    }

    /**
     * Reads JSON text (a receiver's stored result) back as the tree [encode] takes: an object
     * is a `LinkedHashMap<String, Any?>` (key order kept), an array an `ArrayList<Any?>`, an
     * integer a `Long` (a `BigInteger` past Long's range), a fraction or exponent a `Double`
     * when a Double holds it exactly as written (else a `BigDecimal`), and strings, booleans
     * and null as themselves. Iterative and capped at [maxDepth], like [encode]; text that is
     * not JSON is an [IllegalArgumentException] saying where.
     */
    fun decode(text: String): Any? = Reader(text).document()

    private class Reader(private val s: String) {
        private var i = 0

        @Suppress("UNCHECKED_CAST")
        fun document(): Any? {
            // Open arrays and objects, innermost last; `keys` holds each open object's current key.
            val open = ArrayList<Any>()
            val keys = ArrayList<String>()
            while (true) {
                var value: Any?
                ws()
                when (val c = peek()) {
                    '{', '[' -> {
                        if (open.size >= maxDepth) bad("nested deeper than $maxDepth levels")
                        i++
                        ws()
                        val empty = peek() == (if (c == '{') '}' else ']')
                        if (empty) {
                            i++
                            value = if (c == '{') LinkedHashMap<String, Any?>() else ArrayList<Any?>()
                        } else {
                            if (c == '{') {
                                open.add(LinkedHashMap<String, Any?>())
                                keys.add(key())
                            } else {
                                open.add(ArrayList<Any?>())
                            }
                            continue
                        }
                    }
                    '"' -> value = string()
                    't' -> value = literal("true", true)
                    'f' -> value = literal("false", false)
                    'n' -> value = literal("null", null)
                    else -> value = if (c == '-' || c in '0'..'9') number() else bad("unexpected ${describe(c)}")
                }
                // A complete value: add it to its container, then close every container that ends here.
                while (true) {
                    if (open.isEmpty()) {
                        ws()
                        if (i < s.length) bad("unexpected text after the value")
                        return value
                    }
                    val top = open[open.size - 1]
                    if (top is LinkedHashMap<*, *>) (top as LinkedHashMap<String, Any?>)[keys[keys.size - 1]] = value else (top as ArrayList<Any?>).add(value)
                    ws()
                    val c = peek()
                    i++
                    if (c == ',') {
                        if (top is LinkedHashMap<*, *>) keys[keys.size - 1] = key()
                        break
                    }
                    if (c != (if (top is LinkedHashMap<*, *>) '}' else ']')) { i--; bad("unexpected ${describe(c)}") }
                    value = open.removeAt(open.size - 1)
                    if (top is LinkedHashMap<*, *>) keys.removeAt(keys.size - 1)
                }
            }
        }

        /** An object's key and its colon. */
        private fun key(): String {
            ws()
            if (peek() != '"') bad("expected a string key")
            val k = string()
            ws()
            if (peek() != ':') bad("expected ':'")
            i++
            return k
        }

        private fun string(): String {
            i++ // the opening quote
            val out = StringBuilder()
            while (true) {
                if (i >= s.length) bad("unterminated string")
                val c = s[i++]
                when {
                    c == '"' -> return out.toString()
                    c == '\\' -> {
                        if (i >= s.length) bad("unterminated string")
                        when (val e = s[i++]) {
                            '"', '\\', '/' -> out.append(e)
                            'b' -> out.append('\b')
                            'f' -> out.append('\u000c')
                            'n' -> out.append('\n')
                            'r' -> out.append('\r')
                            't' -> out.append('\t')
                            'u' -> {
                                val hex = if (i + 4 <= s.length && (i until i + 4).all { s[it].isHexDigit() }) s.substring(i, i + 4).toInt(16) else null
                                out.append((hex ?: bad("bad \\u escape")).toChar())
                                i += 4
                            }
                            else -> { i--; bad("bad escape") }
                        }
                    }
                    c < ' ' -> { i--; bad("a control character in a string") }
                    else -> out.append(c)
                }
            }
        }

        private fun literal(word: String, value: Boolean?): Boolean? {
            if (!s.startsWith(word, i)) bad("unexpected ${describe(peek())}")
            i += word.length
            return value
        }

        private fun number(): Any {
            val start = i
            while (i < s.length && (s[i] in '0'..'9' || s[i] in "+-.eE")) i++
            val text = s.substring(start, i)
            if (!JSON_NUMBER.matches(text)) { i = start; bad("not a JSON number: $text") }
            if (text.none { it == '.' || it == 'e' || it == 'E' }) return text.toLongOrNull() ?: BigInteger(text)
            val d = text.toDouble()
            return if (d.isFinite() && BigDecimal(d.toString()).compareTo(BigDecimal(text)) == 0) d else BigDecimal(text)
        }

        private fun ws() {
            while (i < s.length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++
        }

        private fun peek(): Char = if (i < s.length) s[i] else bad("unexpected end of the text")

        private fun Char.isHexDigit() = this in '0'..'9' || this in 'a'..'f' || this in 'A'..'F'

        private fun describe(c: Char) = if (c < ' ') "control character" else "'$c'"

        private fun bad(why: String): Nothing = throw IllegalArgumentException("$why at offset $i")
    }
}
