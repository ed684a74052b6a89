package dev.harness.micrometer

/** A series' key: its sample name and labels, in the order the text gives them. */
internal data class SeriesKey(val name: String, val labels: List<Pair<String, String>>)

/** How a series is published: a monotonic count, or a value that goes up and down. */
internal enum class SeriesKind { COUNTER, GAUGE }

internal class Sample(val key: SeriesKey, val kind: SeriesKind, val help: String?, val value: Double)

/**
 * Reads the Prometheus / OpenMetrics text of `metrics()` into samples: `*_total` of a counter,
 * `_count` and `_sum` of a histogram or summary are counters; gauges, `unknown` and untyped
 * samples are gauges. Buckets, quantiles and `_created` are left out (no Micrometer meter
 * takes them as they are). A line it cannot read is skipped, never fatal.
 */
internal object PrometheusText {
    private val suffixes = listOf("_total", "_count", "_sum", "_bucket", "_created", "_info", "_gcount", "_gsum")

    fun parse(text: String): List<Sample> {
        val types = HashMap<String, String>()
        val helps = HashMap<String, String>()
        val out = ArrayList<Sample>()
        for (raw in text.lineSequence()) {
            val line = raw.trim()
            if (line.isEmpty()) continue
            if (line.startsWith("#")) {
                val parts = line.split(' ', limit = 4)
                if (parts.size >= 4 && parts[1] == "TYPE") types[parts[2]] = parts[3].trim()
                if (parts.size >= 4 && parts[1] == "HELP") helps[parts[2]] = unescapeHelp(parts[3])
                continue
            }
            val (key, value) = sample(line) ?: continue
            val (family, suffix) = familyOf(key.name, types)
            val kind = kindOf(types[family], suffix) ?: continue
            out.add(Sample(key, kind, helps[family], value))
        }
        return out
    }

    private fun familyOf(name: String, types: Map<String, String>): Pair<String, String> {
        if (name in types) return name to ""
        for (s in suffixes) {
            if (name.endsWith(s)) {
                val family = name.removeSuffix(s)
                if (family in types) return family to s
            }
        }
        return name to ""
    }

    private fun kindOf(type: String?, suffix: String): SeriesKind? = when (type) {
        // `counter` with no suffix: the 0.0.4 text format, where the family is named `*_total`.
        "counter" -> if (suffix == "_total" || suffix == "") SeriesKind.COUNTER else null
        "histogram", "summary" -> when (suffix) {
            "_count", "_sum" -> SeriesKind.COUNTER
            else -> null
        }
        "gaugehistogram" -> if (suffix == "_gcount" || suffix == "_gsum") SeriesKind.GAUGE else null
        "info" -> if (suffix == "_info") SeriesKind.GAUGE else null
        "gauge", "unknown", "untyped", null -> if (suffix == "") SeriesKind.GAUGE else null
        else -> null
    }

    /** `name{a="x",b="y"} value [timestamp]`, or null when the line is not a sample. */
    private fun sample(line: String): Pair<SeriesKey, Double>? {
        var i = 0
        while (i < line.length && line[i] != '{' && line[i] != ' ') i++
        val name = line.substring(0, i)
        if (name.isEmpty()) return null
        val labels = ArrayList<Pair<String, String>>()
        if (i < line.length && line[i] == '{') {
            i++
            while (true) {
                while (i < line.length && (line[i] == ',' || line[i] == ' ')) i++
                if (i >= line.length) return null
                if (line[i] == '}') {
                    i++
                    break
                }
                val eq = line.indexOf('=', i)
                if (eq < 0 || eq + 1 >= line.length || line[eq + 1] != '"') return null
                val label = line.substring(i, eq).trim()
                val value = StringBuilder()
                i = eq + 2
                while (true) {
                    if (i >= line.length) return null
                    val c = line[i++]
                    if (c == '"') break
                    if (c == '\\' && i < line.length) {
                        when (val e = line[i++]) {
                            'n' -> value.append('\n')
                            else -> value.append(e)
                        }
                    } else {
                        value.append(c)
                    }
                }
                labels.add(label to value.toString())
            }
        }
        val rest = line.substring(i).trim().split(' ', limit = 2)
        val value = number(rest[0]) ?: return null
        return SeriesKey(name, labels) to value
    }

    private fun number(s: String): Double? = when (s) {
        "+Inf", "Inf" -> Double.POSITIVE_INFINITY
        "-Inf" -> Double.NEGATIVE_INFINITY
        "NaN" -> Double.NaN
        else -> s.toDoubleOrNull()
    }

    private fun unescapeHelp(s: String): String {
        if ('\\' !in s) return s
        val out = StringBuilder(s.length)
        var i = 0
        while (i < s.length) {
            val c = s[i++]
            if (c == '\\' && i < s.length) {
                val e = s[i++]
                out.append(if (e == 'n') '\n' else e)
            } else {
                out.append(c)
            }
        }
        return out.toString()
    }
}
