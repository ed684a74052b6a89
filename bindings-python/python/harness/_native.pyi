"""Type stubs for the native extension ``harness._native`` (PyO3). Use ``harness`` instead."""

import asyncio
from os import PathLike
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str
ERROR_NAMES: List[str]

def shut_down() -> None:
    """At interpreter exit: waits for listener calls in progress and skips later ones."""

_Pairs = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]
_Reply = Tuple[int, List[Tuple[str, str]], bytes, float, int, str, Optional[Dict[str, Any]], Optional[Dict[str, Any]]]
"""(status, headers, content, elapsed_ms, attempts, trace_id, routed, cache): ``routed`` has ``route``,
``provider``, ``model``, ``attempts_by_provider``, ``fallback``, ``usage`` (a 3-tuple or None) and
``cost`` for a request that named a route; ``cache`` has ``outcome``, ``similarity`` and
``saved_cost`` when a cache had a part in the answer."""
"""(kind, content, provider, model, finish_reason, usage, cost, reason)"""

class Client:
    """The native client: one core client shared by the sync and async wrappers."""

    def __init__(self, config: Union[Mapping[str, Any], str, PathLike[str]], watch: bool = False) -> None: ...
    def reload(self, config: Union[Mapping[str, Any], str, PathLike[str]]) -> str:
        """Replaces the config if it is valid; returns the new version."""
    @property
    def config_version(self) -> str:
        """A short hash of the active config."""
    def add_listener(self, listener: Callable[[Any], Any]) -> None:
        """Calls ``listener(event)`` for every event, on the client's event thread."""
    def set_token_provider(self, service: str, provider: Callable[[Callable[[bool, Any], None]], None]) -> None:
        """Sets a ``type: callback`` service's provider (a ``harness._credentials.TokenProvider``)."""
    def view(self, name: str, args: List[Optional[str]]) -> Any:
        """A read-only view by name (``routing_state``, ``credentials_state``, ``breaker_details``,
        ``breakers``) as plain objects with the core's names (typed in ``harness._types``)."""
    def flush(self) -> None:
        """Delivers this client's queued log records and events now."""
    def call(
        self,
        op: str,
        bridge: Optional[Bridge],
        future: Optional["asyncio.Future[Any]"],
        service: str,
        method: str,
        path: str,
        endpoint: Optional[str] = None,
        params: _Pairs = None,
        headers: _Pairs = None,
        json: Any = None,
        content: Union[bytes, bytearray, str, None] = None,
        idempotency_key: Optional[str] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> Any:
        """``op`` ``"request"`` (a ``_Reply``) or ``"stream"`` (a ``Stream``): without ``bridge``,
        blocking this thread (not the GIL); with ``bridge`` and ``future``, a ``Pending`` whose
        outcome resolves ``future``."""
    def chat(
        self,
        op: str,
        bridge: Optional[Bridge],
        future: Optional["asyncio.Future[Any]"],
        route: str,
        messages: Any,
        params: Optional[Mapping[str, Any]] = None,
        headers: _Pairs = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> Any:
        """``op`` ``"chat"`` (a dict of ``harness.ChatResponse`` fields) or ``"chat_stream"`` (a
        ``ChatStream``), driven as ``call`` drives a request."""
    def embed(
        self,
        bridge: Optional[Bridge],
        future: Optional["asyncio.Future[Any]"],
        route: str,
        inputs: Union[List[str], Tuple[str, ...]],
        dimensions: Optional[int] = None,
        headers: _Pairs = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> Any:
        """A dict of ``harness.EmbedResponse`` fields and ``data`` (the vectors as little-endian
        float32 bytes), driven as ``call`` drives a request."""
    def register_adapter(self, name: str, adapter: Callable[[str, str, Callable[[bool, Any], None]], None]) -> None:
        """Registers a host adapter (a ``harness._adapters.HostAdapter``) under ``name``."""
    def add_interceptor(
        self,
        name: str,
        host: Callable[[str, str, Callable[[bool, Any], None]], None],
        level: Optional[str] = None,
        services: Union[str, Sequence[str], None] = None,
        before: bool = False,
        after: bool = False,
        want_body: bool = False,
    ) -> None:
        """Registers an interceptor (a ``harness._interceptors.HostInterceptor``) under ``name``."""
    def remove_interceptor(self, name: str) -> bool:
        """Removes the interceptor of this name; whether there was one."""
    def set_weight(self, route: str, provider: str, weight: int) -> str:
        """Sets a provider's weight; returns the new config version."""
    def mock(
        self,
        service: str,
        method: str,
        path: str,
        status: int,
        latency_ms: int,
        json: Any = None,
        body: Optional[str] = None,
        headers: _Pairs = None,
    ) -> None:
        """Answers ``service``'s matching requests from this rule (latest first)."""
    def clear_mocks(self, service: Optional[str] = None) -> None:
        """Removes the mocks set by ``mock`` for ``service`` (every service when ``None``)."""
    def cache_clear(self, name: Optional[str] = None) -> int:
        """Drops the stored answers of a service or route (every one's when ``None``); how many."""
    def metrics(self) -> str:
        """The Prometheus text exposition of this client's metrics."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The breaker state (``closed``, ``open``, ``half_open``)."""
    def bulkhead_limit(self, service: str) -> int:
        """The bulkhead's current concurrency limit on a service."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on a service."""
    def close(self) -> None:
        """Refuses new requests; requests in flight finish."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""

class Bridge:
    """One per asyncio loop: finished work queues here and a notifier (eventfd or socket pair) wakes the loop."""

    def __init__(self, portable: bool = False) -> None: ...
    def fileno(self) -> int:
        """The fd the loop watches."""
    @property
    def kind(self) -> str:
        """``eventfd`` or ``socketpair``."""
    def drain(self) -> None:
        """Resolves every finished request's future (on the loop's thread)."""

class Pending:
    """An in-flight async request."""

    def cancel(self) -> None:
        """Cancels the request and frees its permits."""

class Stream:
    """A streamed response (the core's StreamHandle)."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> List[Tuple[str, str]]: ...
    @property
    def attempts(self) -> int: ...
    @property
    def trace_id(self) -> str: ...
    def next(self) -> Optional[bytes]:
        """The next chunk (``None`` at the end), blocking this thread (not the GIL)."""
    def next_async(self, bridge: Bridge, future: "asyncio.Future[Optional[bytes]]") -> None:
        """Reads the next chunk on the runtime; ``future`` resolves through ``bridge``."""
    def cancel(self) -> None:
        """Stops reading; frees the connection and the permit."""

class ChatStream:
    """A streamed chat answer (the core's ChatStreamHandle)."""

    @property
    def route(self) -> str: ...
    @property
    def trace_id(self) -> str: ...
    def next(self) -> Optional[Dict[str, Any]]:
        """The next chunk as the core's ``ChatChunk`` view (``None`` after ``done``), blocking this thread (not the GIL)."""
    def next_async(self, bridge: Bridge, future: "asyncio.Future[Optional[Dict[str, Any]]]") -> None:
        """Reads the next chunk on the runtime; ``future`` resolves through ``bridge``."""
    def cancel(self) -> None:
        """Stops the answer; frees the connection and the permits."""

class Idempotency:
    """The idempotent receiver (the core's); ``harness._idempotency`` composes its calls."""

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None: ...
    def key(self, tenant: str, event_type: str, msg_id: str) -> str:
        """``{prefix}{tenant}:{event_type}:{msg_id}``."""
    def encode(self, result: Any) -> bytes:
        """The handler's result as the JSON text that is stored."""
    def claim(self, key: str) -> Union[Lease, bytes]:
        """Claims ``key``, blocking this thread (not the GIL): a ``Lease`` or the stored result."""
    def complete(self, lease: Lease, result: bytes) -> None:
        """Stores the result (JSON text), blocking this thread (not the GIL)."""
    def fail(self, lease: Lease) -> None:
        """Marks the claim failed, blocking this thread (not the GIL)."""
    def claim_async(self, bridge: Bridge, future: "asyncio.Future[Union[Lease, bytes]]", key: str) -> Pending:
        """``claim`` on the runtime; ``future`` resolves through ``bridge``."""
    def complete_async(self, bridge: Bridge, future: "asyncio.Future[None]", lease: Lease, result: bytes) -> Pending:
        """``complete`` on the runtime; ``future`` resolves through ``bridge``."""
    def fail_async(self, bridge: Bridge, future: "asyncio.Future[None]", lease: Lease) -> Pending:
        """``fail`` on the runtime; ``future`` resolves through ``bridge``."""
    def verify(self, timestamp: str, body: Union[bytes, bytearray, memoryview, str], signature: str) -> None:
        """Checks a signed delivery."""
    def sign(self, timestamp: str, body: Union[bytes, bytearray, memoryview, str]) -> str:
        """The hex signature of ``{timestamp}.{body}``."""
    def metrics(self) -> str:
        """``harness_idempotency_total{outcome}``, Prometheus text."""

class Lease:
    """A delivery's claim to run the handler (opaque: its fencing number cannot be forged)."""

    @property
    def key(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def deduplicated(self) -> bool: ...
