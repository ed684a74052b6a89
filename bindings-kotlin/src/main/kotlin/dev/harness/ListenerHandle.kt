package dev.harness

import dev.harness.ffi.NativeClient

/**
 * What [HarnessClient.addListener] returns: [remove] (or [close]) takes that listener off
 * the client, so it receives no further events (one already being delivered may finish).
 * Removing twice, or after the client is closed, is harmless.
 */
class ListenerHandle internal constructor(private val native: NativeClient, private val id: ULong) : AutoCloseable {

    /** Removes the listener; false if it was already removed. */
    fun remove(): Boolean = native.unlisten(id)

    /** [remove], for try-with-resources and `use`. */
    override fun close() {
        remove()
    }

    override fun toString(): String = "ListenerHandle($id)"
}
