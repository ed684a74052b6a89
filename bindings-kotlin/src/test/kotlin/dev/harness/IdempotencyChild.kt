package dev.harness

import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.json.JSONObject
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger

/**
 * One OS process of the cross-process receiver test (SharedStateTest): delivers the same
 * message [deliveries] times at once, twice over, through `Idempotency.run` on a shared Redis,
 * and prints what it saw as one JSON line.
 *
 * Args: redis URL, message id, deliveries per wave, how long the handler holds (ms).
 * Protocol: prints `ready` once warmed up, waits for a line on stdin, then prints
 * `{"pid", "runs", "stored", "in_flight", "results", "errors"}`.
 */
object IdempotencyChild {
    @JvmStatic
    fun main(args: Array<String>) = runBlocking<Unit> {
        val (url, msgId) = args
        val deliveries = args[2].toInt()
        val holdMs = args[3].toLong()
        val pid = ProcessHandle.current().pid()
        Idempotency(mapOf("redis_url" to url, "lease_ms" to 30_000)).use { idem ->
            // Connect and warm up on a key of our own, so the race below is the only thing timed.
            idem.run(idem.key("warmup", "child", "$pid")) { "warm" }
            println("ready")
            System.out.flush()
            readlnOrNull() ?: return@use

            val key = idem.key("fleet", "invoice.paid", msgId)
            val runs = AtomicInteger()
            val stored = AtomicInteger()
            val inFlight = AtomicInteger()
            val results = ConcurrentHashMap.newKeySet<String>()
            val errors = ConcurrentHashMap.newKeySet<String>()
            suspend fun deliver() {
                try {
                    val r = idem.run(key) {
                        runs.incrementAndGet()
                        delay(holdMs)
                        mapOf("by" to pid, "amount" to 1250)
                    }
                    stored.incrementAndGet()
                    results.add(Json.encode(r, "result"))
                } catch (e: HarnessException.DuplicateInFlight) {
                    inFlight.incrementAndGet()
                } catch (e: Exception) {
                    errors.add(e.toString())
                }
            }
            // Wave 1 races every process for the claim; wave 2 comes after the handler's hold.
            (1..deliveries).map { async(Dispatchers.Default) { deliver() } }.awaitAll()
            delay(holdMs * 2)
            (1..deliveries).map { async(Dispatchers.Default) { deliver() } }.awaitAll()

            val report = JSONObject()
                .put("pid", pid)
                .put("runs", runs.get())
                .put("stored", stored.get())
                .put("in_flight", inFlight.get())
                .put("results", results.toList())
                .put("errors", errors.toList())
            println(report.toString())
            System.out.flush()
        }
    }
}
