package dev.harness


/** The provider with id [id] of a route's [RouteState] (from [HarnessClient.routingState]), or null. */
fun RouteState.provider(id: String): ProviderState? = providers.firstOrNull { it.id == id }
