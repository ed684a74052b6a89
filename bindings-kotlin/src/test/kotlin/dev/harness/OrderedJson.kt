package dev.harness

import java.math.BigInteger

/**
 * A small JSON parser for the tests that keeps what org.json loses: object key order
 * (LinkedHashMap) and integers of any size (Long, else BigInteger). Decimals are Doubles.
 * Recursive: it reads the repository's own files, not hostile input.
 */
object OrderedJson {
    fun parse(text: String): Any? {
        val p = Parser(text)
        val v = p.value()
        p.ws()
        check(p.i == text.length) { "trailing text at ${p.i}" }
        return v
    }

    private class Parser(val s: String) {
        var i = 0

        fun ws() {
            while (i < s.length && s[i] in " \t\r\n") i++
        }

        fun value(): Any? {
            ws()
            return when (val c = s[i]) {
                '{' -> obj()
                '[' -> arr()
                '"' -> str()
                't' -> lit("true", true)
                'f' -> lit("false", false)
                'n' -> lit("null", null)
                else -> if (c == '-' || c.isDigit()) num() else error("unexpected '$c' at $i")
            }
        }

        fun lit(word: String, v: Any?): Any? {
            check(s.startsWith(word, i)) { "bad literal at $i" }
            i += word.length
            return v
        }

        fun obj(): Map<String, Any?> {
            val m = LinkedHashMap<String, Any?>()
            i++
            ws()
            if (s[i] == '}') return m.also { i++ }
            while (true) {
                ws()
                val k = str()
                ws()
                check(s[i] == ':') { "expected ':' at $i" }
                i++
                m[k] = value()
                ws()
                when (s[i++]) {
                    ',' -> continue
                    '}' -> return m
                    else -> error("expected ',' or '}' at ${i - 1}")
                }
            }
        }

        fun arr(): List<Any?> {
            val a = ArrayList<Any?>()
            i++
            ws()
            if (s[i] == ']') return a.also { i++ }
            while (true) {
                a.add(value())
                ws()
                when (s[i++]) {
                    ',' -> continue
                    ']' -> return a
                    else -> error("expected ',' or ']' at ${i - 1}")
                }
            }
        }

        fun str(): String {
            check(s[i] == '"') { "expected a string at $i" }
            i++
            val b = StringBuilder()
            while (true) {
                val c = s[i++]
                when (c) {
                    '"' -> return b.toString()
                    '\\' -> when (val e = s[i++]) {
                        'n' -> b.append('\n')
                        'r' -> b.append('\r')
                        't' -> b.append('\t')
                        'b' -> b.append('\b')
                        'f' -> b.append('\u000c')
                        'u' -> b.append(s.substring(i, i + 4).toInt(16).toChar()).also { i += 4 }
                        else -> b.append(e)
                    }
                    else -> b.append(c)
                }
            }
        }

        fun num(): Any {
            val start = i
            if (s[i] == '-') i++
            while (i < s.length && (s[i].isDigit() || s[i] in ".eE+-")) i++
            val t = s.substring(start, i)
            if (t.any { it in ".eE" }) return t.toDouble()
            return t.toLongOrNull() ?: BigInteger(t)
        }
    }
}
