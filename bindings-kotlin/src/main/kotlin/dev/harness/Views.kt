package dev.harness

import kotlinx.serialization.json.Json as KotlinxJson

/**
 * The core's views (chat answers and chunks, routing, credential and breaker state) cross
 * as the core's JSON and decode into the types generated from its schema (`Types.kt`,
 * `harness types`), so no field is restated by hand here. Keys the core adds later are
 * ignored until the types are regenerated.
 */
internal object Views {
    val json = KotlinxJson { ignoreUnknownKeys = true }

    inline fun <reified T> decode(text: String): T = json.decodeFromString<T>(text)
}
