package dev.harness

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonPrimitive
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.net.URI
import java.net.URLDecoder
import java.time.OffsetDateTime
import java.time.ZoneOffset
import java.util.UUID

/**
 * The client generated from src/test/openapi/hostile.yaml (names that are Kotlin and Java
 * keywords or collide with generated members, `$` and comment ends in every text) compiles with
 * these tests, and sends what the document says: space- and pipe-delimited arrays, a header
 * array, a date-time and reserved words in the path, a query named like a generated argument.
 */
class OpenApiHostileTest {
    private fun config(script: String): Map<String, Any?> = mapOf(
        "log" to mapOf("enabled" to false),
        "services" to mapOf("hostile" to mapOf("base_url" to "${TestUpstream.url}/s/$script", "retry" to mapOf("max_retries" to 0))),
    )

    @Test
    fun `keywords and dollar signs survive and every array style goes on the wire`() = runBlocking<Unit> {
        val thing = mapOf("class" to "c", "fun" to 1, "copy" to "x", "\$dollar" to "d", "kind" to "*/", "shape" to 7, "any" to listOf(1, "a"))
        TestUpstream.putScript("kt_oa_hostile", listOf(mapOf("json" to thing), mapOf("status" to 404, "json" to mapOf("message" to "no \$such")), mapOf("status" to 204)))
        val id = UUID.fromString("00000000-0000-4000-8000-000000000001")
        HarnessClient(config("kt_oa_hostile")).use { h ->
            val c = hostile.HostileClient(h)
            val got = c.new_(`class` = "a/b", `when` = OffsetDateTime.of(2026, 1, 2, 3, 4, 5, 0, ZoneOffset.UTC), `in` = listOf(1L, 2L), `is` = true, ids = listOf(id, id), xObject = listOf("p", "q"), timeoutMs2 = 9)
            assertEquals(hostile.Object(`class` = "c", `fun` = 1, copy_ = "x", dollar = "d", kind = hostile.Kind.EMPTY_2, shape = hostile.ShapeLong(7), any = Json.parseToJsonElement("""[1,"a"]""")), got)
            assertEquals("\$z", got.xY)
            val e = assertThrows<hostile.Status4XXError> { c.new_(`class` = "x", `when` = OffsetDateTime.of(2026, 1, 2, 3, 4, 5, 0, ZoneOffset.UTC)) }
            assertEquals("no \$such", e.model.message)
            c.toString_(hostile.Object(`class` = "c", `fun` = 2, copy_ = "y", shape = hostile.ShapeString("s")))
        }
        val log = TestUpstream.log("kt_oa_hostile").getJSONArray("requests")
        val first = log.getJSONObject(0)
        val uri = URI("http://x" + first.getString("path"))
        assertEquals("/s/kt_oa_hostile/things/a%2Fb/2026-01-02T03%3A04%3A05Z", uri.rawPath)
        val query = uri.rawQuery.split("&").map { it.split("=", limit = 2) }.map { (k, v) -> k to URLDecoder.decode(v, Charsets.UTF_8) }
        assertEquals(listOf("in" to "1 2", "is" to "true", "ids" to "$id|$id", "timeoutMs" to "9"), query)
        assertEquals("p,q", first.getJSONObject("headers").getString("x-object"))
        val posted = JSONObject(log.getJSONObject(2).getString("body"))
        assertEquals(setOf("class", "fun", "copy", "x-\$y", "shape"), posted.keySet())
        assertEquals("\$z", posted.getString("x-\$y"))
        assertEquals(JsonPrimitive("s"), hostile.Shape.fromJson(JsonPrimitive("s")).toJson())
        // A type that contains itself is its JSON, checked all the way down.
        val nested = Json.parseToJsonElement("""{"class":"c","fun":1,"copy":"x","tree":[[],[[]]]}""")
        assertEquals(Json.parseToJsonElement("[[],[[]]]"), hostile.Object.fromJson(nested).tree)
        val drifted = Json.parseToJsonElement("""{"class":"c","fun":1,"copy":"x","tree":[[],[1]]}""")
        assertEquals("/tree/1/0: expected an array, got an integer", assertThrows<HarnessException.Schema> { hostile.Object.fromJson(drifted) }.reason)
    }
}
