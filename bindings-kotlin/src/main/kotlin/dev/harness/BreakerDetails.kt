package dev.harness


/**
 * One circuit breaker now, as [HarnessClient.breakerDetails] shows it.
 *
 * @property endpoint the endpoint the breaker is keyed by (the path's template unless named).
 * @property method the upper-case method it is keyed by.
 * @property state `closed`, `open` or `half_open` (probing or ramping back), as [HarnessClient.breakerState].
 * @property phase `closed`, `open`, `probing` (half-open probes in flight) or `ramping`
 *   (after the probes, admitting a growing share of calls: `half_open.ramp`).
 * @property admitRatio the share of calls let through now, 0.0 to 1.0 (1.0 when closed, 0.0 when open).
 * @property calls calls in the current window (a `sliding_window` breaker).
 * @property failureRate the share of the window's calls that failed, 0.0 to 1.0.
 * @property slowCallRate the share of the window's calls slower than `slow_call.duration_ms`, 0.0 to 1.0.
 */
typealias BreakerDetails = BreakerInfo
