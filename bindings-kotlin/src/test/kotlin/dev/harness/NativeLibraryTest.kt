package dev.harness

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

class NativeLibraryTest {
    @Test
    fun `the jar and the native library carry one version`() {
        assertTrue(NativeLibrary.bindingVersion.matches(Regex("""\d+\.\d+\.\d+.*""")), NativeLibrary.bindingVersion)
        assertEquals(NativeLibrary.bindingVersion, dev.harness.ffi.nativeVersion())
        NativeLibrary.ensure()
    }

    @Test
    fun `a native library from another build is refused, naming both versions`() {
        val e = assertThrows<UnsatisfiedLinkError> { NativeLibrary.check("0.0.9", "0.1.0") }
        assertTrue(e.message!!.contains("harness-sdk 0.1.0: its native library (libharness_kotlin.so) is version 0.0.9"), e.message)
    }
}
