package dev.harness

import java.util.Properties

/**
 * The native library must come from the same build as this jar: one version for both. A
 * library from another build (a shaded or copied `.so`, a partial upgrade) is refused before
 * the first client is made, with both versions named.
 */
internal object NativeLibrary {
    /** This jar's version, written into `harness-sdk.properties` by Maven. */
    val bindingVersion: String = NativeLibrary::class.java.getResourceAsStream("/dev/harness/harness-sdk.properties")
        ?.use { Properties().apply { load(it) }.getProperty("version") } ?: "unknown"

    private val checked: Unit by lazy { check(dev.harness.ffi.nativeVersion(), bindingVersion) }

    /** Loads and checks the library once; throws [UnsatisfiedLinkError] on a mismatch. */
    fun ensure() = checked

    fun check(nativeVersion: String, bindingVersion: String) {
        if (nativeVersion != bindingVersion) {
            throw UnsatisfiedLinkError(
                "harness-sdk $bindingVersion: its native library (libharness_kotlin.so) is version $nativeVersion; " +
                    "use the jar and the native library of one build",
            )
        }
    }
}
