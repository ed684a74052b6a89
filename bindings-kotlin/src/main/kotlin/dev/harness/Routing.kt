package dev.harness

import dev.harness.ffi.NativeProviderState
import dev.harness.ffi.NativeRouteState

/**
 * A route as [HarnessClient.routingState] shows it: its selection [strategy]
 * (`weighted-health`, `priority` or `least-latency`) and each provider, in config order.
 */
data class RouteState(val route: String, val strategy: String, val providers: List<ProviderState>) {
    /** The provider with id [id], or null. */
    fun provider(id: String): ProviderState? = providers.firstOrNull { it.id == id }
}

/**
 * One provider of a route, now.
 *
 * @property service the service it is reached through (its timeouts, breaker, bulkhead, auth).
 * @property weight the configured weight ([HarnessClient.setWeight] changes it).
 * @property effectiveWeight the weight selection uses now (health, breaker and cooling applied).
 * @property health 0.0 to 1.0, from [successRate] over the route's health window.
 * @property latencyEwmaMs the smoothed latency of its answers, once it has answered.
 * @property breaker `closed`, `open` or `half_open`.
 * @property inFlight requests on it for this route now.
 * @property coolingMs milliseconds left of a 429's `Retry-After`.
 * @property lastError its last error (kind and message; never a secret).
 */
data class ProviderState(
    val id: String,
    val service: String,
    val model: String?,
    val weight: Int,
    val effectiveWeight: Double,
    val health: Double,
    val successRate: Double,
    val latencyEwmaMs: Double?,
    val breaker: String,
    val inFlight: Int,
    val coolingMs: Long?,
    val lastError: String?,
)

internal fun NativeRouteState.toState() = RouteState(
    route = route,
    strategy = strategy,
    providers = providers.map { it.toState() },
)

private fun NativeProviderState.toState() = ProviderState(
    id = id,
    service = service,
    model = model,
    weight = weight.toInt(),
    effectiveWeight = effectiveWeight,
    health = health,
    successRate = successRate,
    latencyEwmaMs = latencyEwmaMs,
    breaker = breaker,
    inFlight = inFlight.toInt(),
    coolingMs = coolingMs?.toLong(),
    lastError = lastError,
)
