"""Harness: one resilient HTTP API-access engine, written in Rust.

Business code names a service, a method, a path and a payload; Harness owns
timeouts, retries, circuit breaking, bulkheads, metrics and traces. This
package only translates: every behaviour lives in the Rust core.

    >>> import harness
    >>> with harness.Client({"services": {"orders": {"base_url": "http://127.0.0.1:8080"}}}) as c:
    ...     r = c.get("orders", "/orders/42")
"""

import asyncio
import json as _json
import os
import weakref
from collections.abc import Mapping
from typing import Any, Iterator, List, Optional, Tuple, Union

from . import _native
from ._errors import (
    AuthError,
    BulkheadFullError,
    CancelledError,
    CircuitOpenError,
    ConfigError,
    ConnectError,
    HarnessError,
    HttpStatusError,
    NoHealthyProviderError,
    ProtocolError,
    RateLimitedError,
    ResponseTooLargeError,
    SchemaError,
    TimeoutError,
)

__version__: str = _native.__version__

__all__ = [
    "Client",
    "AsyncClient",
    "Response",
    "Headers",
    "HarnessError",
    "TimeoutError",
    "CircuitOpenError",
    "BulkheadFullError",
    "RateLimitedError",
    "HttpStatusError",
    "AuthError",
    "SchemaError",
    "ConnectError",
    "CancelledError",
    "NoHealthyProviderError",
    "ConfigError",
    "ProtocolError",
    "ResponseTooLargeError",
]


class Headers(Mapping):
    """Response headers: a read-only mapping with case-insensitive names.

    Repeated headers are joined with ``", "``; ``get_list`` returns each value.
    """

    __slots__ = ("_raw", "_map")

    def __init__(self, raw: List[Tuple[str, str]]) -> None:
        self._raw = raw
        self._map: Optional[dict] = None

    def _index(self) -> dict:
        if self._map is None:
            m: dict = {}
            for k, v in self._raw:
                k = k.lower()
                m[k] = f"{m[k]}, {v}" if k in m else v
            self._map = m
        return self._map

    def __getitem__(self, name: str) -> str:
        return self._index()[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index()

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())

    def get_list(self, name: str) -> List[str]:
        """Every value of a header, in the order received."""
        name = name.lower()
        return [v for k, v in self._raw if k.lower() == name]

    def raw(self) -> List[Tuple[str, str]]:
        """The (lower-case name, value) pairs as received."""
        return list(self._raw)

    def __repr__(self) -> str:
        return f"Headers({list(self._index())!r})"


class Response:
    """A successful response (status 2xx/3xx); error statuses raise ``HttpStatusError``."""

    # A dict of slots documents each attribute (help(), inspect.getdoc).
    __slots__ = {
        "status": "The HTTP status code.",
        "content": "The body as bytes.",
        "elapsed_ms": "Wall time of the whole call, retries included, in milliseconds.",
        "attempts": "How many attempts the call took (1 = no retry).",
        "trace_id": "The W3C trace id of this call (sent downstream in ``traceparent``).",
        "_raw_headers": "",
        "_headers": "",
    }

    status: int
    content: bytes
    elapsed_ms: float
    attempts: int
    trace_id: str

    def __init__(
        self,
        status: int,
        headers: List[Tuple[str, str]],
        content: bytes,
        elapsed_ms: float,
        attempts: int,
        trace_id: str,
    ) -> None:
        self.status = status
        self._raw_headers = headers
        self._headers: Optional[Headers] = None
        self.content = content
        self.elapsed_ms = elapsed_ms
        self.attempts = attempts
        self.trace_id = trace_id

    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
        if self._headers is None:
            self._headers = Headers(self._raw_headers)
        return self._headers

    @property
    def text(self) -> str:
        """The body decoded with the charset of ``content-type`` (UTF-8 by default)."""
        charset = "utf-8"
        ctype = self.headers.get("content-type", "")
        for part in ctype.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.content)

    def __repr__(self) -> str:
        return f"<Response [{self.status}] attempts={self.attempts} trace_id={self.trace_id}>"


Config = Union[Mapping, str, "os.PathLike[str]"]


# One completion queue per event loop: Rust queues finished requests and wakes the loop
# through an eventfd, so no runtime thread ever waits for the GIL.
_BRIDGES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()


def _bridge(loop: asyncio.AbstractEventLoop) -> Any:
    bridge = _native.Bridge()
    loop.add_reader(bridge.fileno(), bridge.drain)
    _BRIDGES[loop] = bridge
    return bridge


if hasattr(os, "register_at_fork"):
    # A forked child shares its parent's eventfds: it must never wait on (or wake) a parent's bridge.
    os.register_at_fork(after_in_child=_BRIDGES.clear)


class _Base:
    __slots__ = ("_native",)

    def __init__(self, config: Config) -> None:
        """Builds a client from a config dict or a path to a YAML/JSON/TOML file; bad config raises ``ConfigError``."""
        self._native = _native.Client(config)

    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
        return self._native.metrics()

    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state for (service, endpoint, method): ``closed``, ``open`` or ``half_open``.

        ``endpoint`` defaults to the template of ``path`` (IDs collapsed to ``{id}``).
        """
        return self._native.breaker_state(service, method, path, endpoint)

    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service`` (0 at rest)."""
        return self._native.bulkhead_in_use(service)

    def close(self) -> None:
        """Refuses new requests; requests in flight finish."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._native.closed

    def __repr__(self) -> str:
        return f"<harness.{type(self).__name__} {self._native!r}>"


class Client(_Base):
    """A blocking Harness client. Thread-safe: share one across threads.

    Calls release the GIL while they wait, and Ctrl-C interrupts a call
    (cancelling the request) within 100 ms.
    """

    __slots__ = ()

    def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        endpoint: Optional[str] = None,
        params: Any = None,
        headers: Any = None,
        json: Any = None,
        content: Union[bytes, str, None] = None,
        idempotency_key: Optional[str] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline and returns its ``Response``.

        ``params`` and ``headers`` are a mapping or a list of pairs; ``json`` is a
        JSON-serialisable value and ``content`` raw bytes (not both).
        ``timeout_ms`` overrides the service's total timeout. Raises a
        ``HarnessError`` subclass on failure.
        """
        return Response(
            *self._native.request(
                service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent
            )
        )

    def get(self, service: str, path: str, **kwargs: Any) -> Response:
        """``request(service, "GET", path, **kwargs)``."""
        return self.request(service, "GET", path, **kwargs)

    def post(self, service: str, path: str, **kwargs: Any) -> Response:
        """``request(service, "POST", path, **kwargs)``."""
        return self.request(service, "POST", path, **kwargs)

    def put(self, service: str, path: str, **kwargs: Any) -> Response:
        """``request(service, "PUT", path, **kwargs)``."""
        return self.request(service, "PUT", path, **kwargs)

    def patch(self, service: str, path: str, **kwargs: Any) -> Response:
        """``request(service, "PATCH", path, **kwargs)``."""
        return self.request(service, "PATCH", path, **kwargs)

    def delete(self, service: str, path: str, **kwargs: Any) -> Response:
        """``request(service, "DELETE", path, **kwargs)``."""
        return self.request(service, "DELETE", path, **kwargs)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(_Base):
    """An asyncio Harness client; requests run on the Rust core's runtime.

    Cancelling the asyncio task that awaits a call cancels the request in Rust
    and frees its permits.
    """

    __slots__ = ()

    async def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        endpoint: Optional[str] = None,
        params: Any = None,
        headers: Any = None,
        json: Any = None,
        content: Union[bytes, str, None] = None,
        idempotency_key: Optional[str] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline and returns its ``Response``.

        Same arguments as ``Client.request``. Raises a ``HarnessError`` subclass on failure.
        """
        loop = asyncio.get_running_loop()
        bridge = _BRIDGES.get(loop) or _bridge(loop)
        future = loop.create_future()
        pending = self._native.request_async(
            bridge, future, service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent
        )
        try:
            reply = await future
        except BaseException:
            pending.cancel()  # asyncio cancel (or any interruption) drops the Rust future
            raise
        return Response(*reply)

    async def get(self, service: str, path: str, **kwargs: Any) -> Response:
        """``await request(service, "GET", path, **kwargs)``."""
        return await self.request(service, "GET", path, **kwargs)

    async def post(self, service: str, path: str, **kwargs: Any) -> Response:
        """``await request(service, "POST", path, **kwargs)``."""
        return await self.request(service, "POST", path, **kwargs)

    async def put(self, service: str, path: str, **kwargs: Any) -> Response:
        """``await request(service, "PUT", path, **kwargs)``."""
        return await self.request(service, "PUT", path, **kwargs)

    async def patch(self, service: str, path: str, **kwargs: Any) -> Response:
        """``await request(service, "PATCH", path, **kwargs)``."""
        return await self.request(service, "PATCH", path, **kwargs)

    async def delete(self, service: str, path: str, **kwargs: Any) -> Response:
        """``await request(service, "DELETE", path, **kwargs)``."""
        return await self.request(service, "DELETE", path, **kwargs)

    async def aclose(self) -> None:
        """Same as ``close()``, for ``contextlib.aclosing`` and friends."""
        self.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
