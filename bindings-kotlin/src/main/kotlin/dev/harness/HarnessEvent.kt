package dev.harness

import kotlinx.serialization.json.Json as KotlinxJson

/*
 * The events themselves ([HarnessEvent] and its variants, `HarnessEvent.RequestFinished`, ...)
 * are generated from the core's schema into Types.kt (`harness types`): the same record in
 * every language, under the same names. What is here is how they cross and print.
 */

/** The core's JSON of one event; a field the core adds later is ignored until regenerated. */
internal fun decodeEvent(json: String): HarnessEvent = ViewJson.json.decodeFromString(HarnessEvent.serializer(), json)

/** Null fields are left out, as the JSON log line leaves them out. */
private val fieldsJson = KotlinxJson { explicitNulls = false }

/**
 * Every field of [event] under its cross-language (snake_case) name, `type` first, in the
 * log line's order; null ones are left out. Values are as [HarnessClient]'s `json` takes
 * them (String, Long, Double, Boolean, Map, List).
 */
internal fun eventFields(event: HarnessEvent): Map<String, Any?> {
    @Suppress("UNCHECKED_CAST")
    return Json.decode(fieldsJson.encodeToString(HarnessEvent.serializer(), event)) as Map<String, Any?>
}
