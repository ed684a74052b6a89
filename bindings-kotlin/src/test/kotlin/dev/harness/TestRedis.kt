package dev.harness

import java.io.File
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.Socket
import java.util.concurrent.TimeUnit

/**
 * A real `redis-server` on a free loopback port, for the shared-state tests: no persistence,
 * killed on [close] (and when the JVM exits). Missing `redis-server` fails the test loudly.
 */
class TestRedis private constructor(val port: Int, private val process: Process) : AutoCloseable {
    val url: String get() = "redis://127.0.0.1:$port/0"

    override fun close() {
        process.destroy()
        if (!process.waitFor(5, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
    }

    companion object {
        fun start(): TestRedis {
            val bin = System.getenv("PATH").orEmpty().split(File.pathSeparator).map { File(it, "redis-server") }.firstOrNull { it.canExecute() }
                ?: error("redis-server is not installed (apt-get install redis-server): the shared-state tests need a real one")
            var lastError = "no attempt"
            repeat(5) {
                val port = freePort()
                val process = ProcessBuilder(bin.path, "--port", "$port", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start()
                val server = TestRedis(port, process)
                Runtime.getRuntime().addShutdownHook(Thread { process.destroyForcibly() })
                val deadline = System.nanoTime() + 10_000_000_000L
                while (System.nanoTime() < deadline && process.isAlive) {
                    if (ping(port)) return server
                    Thread.sleep(20)
                }
                lastError = if (process.isAlive) "no PONG within 10 s" else "exited with ${process.exitValue()}"
                server.close() // the port may have been taken meanwhile: try another
            }
            error("redis-server did not start: $lastError")
        }

        /** A loopback port nothing listens on (just now). */
        fun freePort(): Int = ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()).use { it.localPort }

        private fun ping(port: Int): Boolean = try {
            Socket().use { s ->
                s.connect(InetSocketAddress("127.0.0.1", port), 200)
                s.soTimeout = 500
                s.getOutputStream().write("PING\r\n".toByteArray())
                s.getInputStream().bufferedReader().readLine() == "+PONG"
            }
        } catch (e: java.io.IOException) {
            false
        }
    }
}
