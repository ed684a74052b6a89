package dev.harness

import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit

/**
 * `harness codegen --lang kotlin` over the public OpenAPI documents in ../shared/openapi-corpus/
 * (read from there, never copied into the project): every operation is generated or refused,
 * and the four packages compile together, with the kotlinx.serialization plugin, against the
 * binding. Prints the counts per document (the Kotlin side of tests/openapi_corpus.py).
 */
class OpenApiCorpusTest {
    private val corpus = File(TestUpstream.repoRoot.parentFile, "shared/openapi-corpus")
    private val documents = listOf("oai-petstore-expanded.json", "oai-uspto.json", "adyen-checkout-v71.json", "twilio-messaging-v1.json")
    private val methods = setOf("get", "put", "post", "delete", "options", "head", "patch", "trace")

    private fun harnessBin(): String {
        val bin = System.getenv("HARNESS_BIN") ?: System.getProperty("harness.bin")
            ?: File(TestUpstream.repoRoot, "target/x86_64-unknown-linux-gnu/debug/harness").path
        check(File(bin).canExecute()) { "no harness binary at $bin: run the tests through `mvn install` (it builds harness-cli), or set HARNESS_BIN" }
        return bin
    }

    private fun operations(doc: File): Int {
        val paths = JSONObject(doc.readText()).optJSONObject("paths") ?: return 0
        return paths.keySet().sumOf { p -> paths.getJSONObject(p).keySet().count { it in methods } }
    }

    @Test
    fun `the public corpus generates Kotlin clients that compile`() {
        assertTrue(corpus.isDirectory, "$corpus is missing: the corpus lives beside the project (see its SOURCES.md)")
        val out = Files.createTempDirectory("harness-kotlin-corpus").toFile()
        try {
            val rows = ArrayList<String>()
            for (name in documents) {
                val spec = File(corpus, name)
                val p = ProcessBuilder(harnessBin(), "codegen", "--spec", spec.path, "--lang", "kotlin", "--out", out.path).redirectErrorStream(true).start()
                val text = p.inputStream.bufferedReader().readText()
                assertTrue(p.waitFor(120, TimeUnit.SECONDS), "harness codegen did not finish for $name")
                assertEquals(0, p.exitValue(), "harness codegen failed for $name:\n$text")
                val m = Regex("^generated (\\d+) operations, refused (\\d+)$", RegexOption.MULTILINE).find(text) ?: error("no counts for $name:\n$text")
                val (generated, refused) = m.destructured
                assertEquals(operations(spec), generated.toInt() + refused.toInt(), "$name: every operation is generated or refused\n$text")
                rows.add("$name: generated $generated, refused $refused")
            }
            val started = System.nanoTime()
            val result = KotlinCompiler.compile(listOf(out), plugin = true)
            val seconds = (System.nanoTime() - started) / 1_000_000_000.0
            assertTrue(result.ok, result.messages.lines().filter { ": error: " in it }.take(40).joinToString("\n"))
            val files = out.walkTopDown().filter { it.name.endsWith(".kt") }.toList()
            println("Kotlin clients of the OpenAPI corpus (${files.size} files, ${files.sumOf { it.readLines().size }} lines, compiled in ${"%.1f".format(seconds)} s):")
            rows.forEach { println("  $it") }
        } finally {
            out.deleteRecursively()
        }
    }
}
