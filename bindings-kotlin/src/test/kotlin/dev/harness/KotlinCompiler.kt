package dev.harness

import org.jetbrains.kotlin.cli.common.ExitCode
import org.jetbrains.kotlin.cli.jvm.K2JVMCompiler
import java.io.ByteArrayOutputStream
import java.io.File
import java.io.PrintStream
import java.net.URI
import java.nio.file.Files
import java.util.jar.JarFile

/**
 * The Kotlin compiler in this JVM (kotlin-compiler-embeddable, a test dependency), compiling
 * against the tests' own classpath: the binding, the generated example clients and their
 * dependencies. For checks that generated code compiles, and that wrong calls do not.
 */
object KotlinCompiler {
    /** The test classpath: surefire's manifest-only jar expanded into its entries. */
    val classpath: List<File> by lazy {
        val out = LinkedHashSet<File>()
        for (p in System.getProperty("java.class.path").split(File.pathSeparator).filter { it.isNotBlank() }) {
            val f = File(p)
            out.add(f)
            if (f.isFile && f.name.endsWith(".jar")) {
                JarFile(f).use { jar ->
                    jar.manifest?.mainAttributes?.getValue("Class-Path")?.split(" ")?.filter { it.isNotBlank() }?.forEach { u ->
                        out.add(if (u.startsWith("file:")) File(URI(u)) else File(f.parentFile, u))
                    }
                }
            }
        }
        out.filter { it.exists() }
    }

    private val serializationPlugin: File by lazy {
        classpath.firstOrNull { it.name.startsWith("kotlin-serialization-compiler-plugin-embeddable") }
            ?: error("kotlin-serialization-compiler-plugin-embeddable is not on the test classpath")
    }

    /** The outcome of one compile: whether it succeeded and the compiler's messages. */
    data class Result(val ok: Boolean, val messages: String)

    /** Compiles [sources] (files or directories) to a temporary directory. */
    fun compile(sources: List<File>, plugin: Boolean = false): Result {
        val out = Files.createTempDirectory("harness-kotlinc").toFile()
        try {
            val cp = classpath.filter { !it.name.startsWith("kotlin-compiler-embeddable") && !it.name.startsWith("surefire") }
            val args = buildList {
                add("-no-stdlib")
                add("-no-reflect")
                add("-jvm-target"); add("17")
                add("-cp"); add(cp.joinToString(File.pathSeparator))
                add("-d"); add(out.path)
                if (plugin) add("-Xplugin=${serializationPlugin.path}")
                addAll(sources.map { it.path })
            }
            val messages = ByteArrayOutputStream()
            val code = PrintStream(messages, true, Charsets.UTF_8).use { K2JVMCompiler().exec(it, *args.toTypedArray()) }
            return Result(code == ExitCode.OK, messages.toString(Charsets.UTF_8))
        } finally {
            out.deleteRecursively()
        }
    }

    /** Compiles one Kotlin file with [text]. */
    fun compileSnippet(name: String, text: String): Result {
        val dir = Files.createTempDirectory("harness-snippet").toFile()
        try {
            val file = File(dir, name).apply { writeText(text) }
            return compile(listOf(file))
        } finally {
            dir.deleteRecursively()
        }
    }
}
