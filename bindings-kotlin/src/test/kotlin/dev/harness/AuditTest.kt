package dev.harness

import kotlinx.serialization.json.boolean
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive

import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Path
import java.util.concurrent.CopyOnWriteArrayList

/**
 * The audit log through the binding: the caller's `principal` on every kind of call, records
 * to a listener (`audit_record`) and to a file, bodies masked, and no secret anywhere; all
 * against the loopback upstream.
 */
class AuditTest {
    private val secret = "tok-kotlin-audit-secret"

    private fun config(sink: Map<String, Any?>) = mapOf(
        "client" to mapOf("name" to "kotlin-audit"),
        "log" to mapOf("enabled" to false),
        "audit" to mapOf("enabled" to true, "include_bodies" to true, "sink" to sink),
        "services" to mapOf(
            "svc" to mapOf(
                "base_url" to TestUpstream.url,
                "headers" to mapOf("authorization" to "Bearer $secret"),
                "retry" to mapOf("max_retries" to 0),
            ),
            "llm" to mapOf("base_url" to TestUpstream.llm("kt_audit_chat")),
        ),
        "routes" to mapOf(
            "chat" to mapOf(
                "adapter" to "openai-compatible",
                "strategy" to "priority",
                "providers" to listOf(mapOf("id" to "p", "service" to "llm", "model" to "m", "weight" to 100)),
            ),
        ),
    )

    /** A client whose audit records also land in the returned list. */
    private fun listening(): Pair<HarnessClient, List<HarnessEvent.AuditRecord>> {
        val h = HarnessClient(config(mapOf("listener" to true)))
        val records = CopyOnWriteArrayList<HarnessEvent.AuditRecord>()
        h.addListener { if (it is HarnessEvent.AuditRecord) records += it }
        return h to records
    }

    private fun login(name: String) = TestUpstream.putScript(
        name,
        listOf(mapOf("json" to mapOf("ok" to true, "token" to "Bearer $secret", "note" to "issued $secret"))),
    )

    private val credentials = mapOf("user" to "ann", "password" to "hunter2-kotlin")

    @Test
    fun `an audit record reaches listeners with the principal, masked bodies and no secret`() = runBlocking<Unit> {
        login("kt_audit")
        val (h, records) = listening()
        h.use {
            val r = h.post("svc", "/s/kt_audit/login", json = credentials, principal = "user-42")
            h.flush()
            assertEquals(1, records.size, "$records")
            val rec = records[0]
            assertEquals("audit_record", rec.type)
            assertEquals("user-42", rec.principal)
            assertEquals("ok", rec.outcome)
            assertEquals(200, rec.status)
            assertEquals(listOf("kotlin-audit", "svc", "POST", r.traceId), listOf(rec.client, rec.service, rec.method, rec.traceId))
            // The bodies are JSON (kotlinx JsonElement), as the engine masked them.
            val response = rec.responseBody!!.jsonObject
            val request = rec.requestBody!!.jsonObject
            assertEquals(listOf("***", true), listOf(response["token"]!!.jsonPrimitive.content, response["ok"]!!.jsonPrimitive.boolean))
            assertEquals(listOf("ann", "***"), listOf(request["user"]!!.jsonPrimitive.content, request["password"]!!.jsonPrimitive.content))

            val fields = rec.fields()
            assertEquals(listOf("type", "ts_ms", "client", "principal", "service"), fields.keys.take(5))
            assertEquals("***", (fields["response_body"] as Map<*, *>)["token"])
            for (text in listOf(Json.encode(fields, "fields"), rec.toString(), rec.requestBody.toString(), rec.responseBody.toString())) {
                assertFalse(text.contains(secret), text)
                assertFalse(text.contains("hunter2"), text)
            }
            // The principal is the audit record's alone: never sent downstream.
            assertFalse(TestUpstream.logText("kt_audit").contains("user-42"))
        }
    }

    @Test
    fun `streams, Java futures and chat calls carry the principal into their audit records`() = runBlocking<Unit> {
        TestUpstream.putScript("kt_audit_more", listOf(mapOf("status" to 200, "body" to "streamed")))
        TestUpstream.putProvider("kt_audit_chat", mapOf("reset" to true))
        val hi = listOf(mapOf("role" to "user", "content" to "Hi"))
        val (h, records) = listening()
        h.use {
            h.stream("svc", "GET", "/s/kt_audit_more/a", principal = "p-stream").use { it.body.toList() }
            h.requestAsync(HarnessRequest("svc", "GET", "/s/kt_audit_more/a").withPrincipal("p-future")).join()
            h.chat("chat", hi, principal = "p-chat")
            h.chatStream(ChatRequest("chat", hi).withPrincipal("p-chat-stream")).toList()
            h.chatAsync(ChatRequest("chat", hi, principal = "p-chat-future")).join()
            h.get("svc", "/s/kt_audit_more/a")
            h.flush()
            assertEquals(6, records.size, "$records")
            val byPrincipal = records.associateBy { it.principal }
            assertEquals(setOf("p-stream", "p-future", "p-chat", "p-chat-stream", "p-chat-future", null), byPrincipal.keys, "$records")
            assertEquals("chat", byPrincipal["p-chat"]!!.service, "a chat call is audited under its route")
            assertEquals("p", byPrincipal["p-chat-stream"]!!.provider)
            assertTrue(records.all { it.outcome == "ok" })
            assertFalse("principal" in byPrincipal[null]!!.fields(), "no principal: the field is left out, as in the file")
        }
    }

    @Test
    fun `a file sink holds the record with the principal and no secret after flush`(@TempDir dir: Path) = runBlocking<Unit> {
        login("kt_audit_file")
        val file = dir.resolve("audit.jsonl").toFile()
        HarnessClient(config(mapOf("file" to file.path))).use { h ->
            val records = CopyOnWriteArrayList<HarnessEvent>()
            h.addListener { if (it is HarnessEvent.AuditRecord) records += it }
            h.post("svc", "/s/kt_audit_file/login", json = credentials, principal = "user-43")
            h.flush()
            val lines = file.readLines()
            assertEquals(1, lines.size, lines.joinToString("\n"))
            @Suppress("UNCHECKED_CAST")
            val rec = Json.decode(lines[0]) as Map<String, Any?>
            assertEquals(listOf("user-43", "ok", "svc"), listOf(rec["principal"], rec["outcome"], rec["service"]))
            assertEquals("***", (rec["response_body"] as Map<*, *>)["token"])
            assertFalse(lines[0].contains(secret) || lines[0].contains("hunter2"), lines[0])
            assertTrue(records.isEmpty(), "file only: no audit_record events")
        }
    }

    @Test
    fun `a principal with a control character is a ConfigError naming request principal, and nothing is sent`() = runBlocking<Unit> {
        login("kt_audit_bad")
        val (h, records) = listening()
        h.use {
            val bad = listOf("ann\nforged-line", "", "x".repeat(257))
            for (p in bad) {
                val e = assertThrows<HarnessException.Config>(p) { h.get("svc", "/s/kt_audit_bad/a", principal = p) }
                assertTrue(e.reason.startsWith("request.principal:"), e.reason)
                assertFalse(e.message!!.contains("\n"), "one line: ${e.message}")
            }
            val chat = assertThrows<HarnessException.Config> {
                h.chat("chat", listOf(mapOf("role" to "user", "content" to "Hi")), principal = "ann\nforged-line")
            }
            assertTrue(chat.reason.startsWith("request.principal:"), chat.reason)
            val surrogate = assertThrows<HarnessException.Config> { h.get("svc", "/s/kt_audit_bad/a", principal = "ann\uD800") }
            assertTrue(surrogate.reason.startsWith("request.principal:"), surrogate.reason)

            h.get("svc", "/s/kt_audit_bad/a", principal = "user-44")
            h.flush()
            val log = TestUpstream.log("kt_audit_bad").getJSONArray("requests")
            assertEquals(1, log.length(), "only the valid request reached the upstream: $log")
            val text = log.toString()
            assertFalse(text.contains("forged-line") || text.contains("user-44"), text)
            assertEquals(listOf("user-44"), records.map { it.principal }, "no record for a request refused before it started")
        }
    }

    @Test
    fun `an audit record's toString shows no body`() {
        val rec = HarnessEvent.AuditRecord(
            1, "c", "u", "svc", null, "/x", "POST", 200, "ok", 1, 1.0, null, "t",
            buildJsonObject { put("note", "private words") }, null,
        )
        assertFalse(rec.toString().contains("private words"), rec.toString())
        assertNull(rec.fields()["response_body"])
        assertFalse("cost" in rec.fields())
    }
}
