"""Type stubs for the native extension ``harness._native`` (PyO3). Use ``harness`` instead."""

import asyncio
from os import PathLike
from typing import Any, Awaitable, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str
ERROR_NAMES: List[str]

_Pairs = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]
_Reply = Tuple[int, List[Tuple[str, str]], bytes, float, int, str]

class Client:
    """The native client: one core client shared by the sync and async wrappers."""

    def __init__(self, config: Union[Mapping[str, Any], str, PathLike[str]]) -> None: ...
    def request(
        self,
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
    ) -> _Reply:
        """Runs one request, blocking this thread (not the GIL) until it finishes."""
    def request_async(
        self,
        bridge: Bridge,
        future: "asyncio.Future[_Reply]",
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
    ) -> Pending:
        """Starts one request whose result resolves ``future`` through ``bridge``."""
    def metrics(self) -> str:
        """The Prometheus text exposition of this client's metrics."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The breaker state (``closed``, ``open``, ``half_open``)."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on a service."""
    def close(self) -> None:
        """Refuses new requests; requests in flight finish."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""

class Bridge:
    """One per asyncio loop: finished requests queue here and an eventfd wakes the loop."""

    def __init__(self) -> None: ...
    def fileno(self) -> int:
        """The fd the loop watches."""
    def drain(self) -> None:
        """Resolves every finished request's future (on the loop's thread)."""

class Pending:
    """An in-flight async request."""

    def cancel(self) -> None:
        """Cancels the request and frees its permits."""
