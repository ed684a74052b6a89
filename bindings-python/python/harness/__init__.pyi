"""Type stubs for ``harness``: every public name of the package."""

from collections.abc import Mapping
from os import PathLike
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

__version__: str
__all__: List[str]

Config = Union[Mapping[str, Any], str, PathLike[str]]
Pairs = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]
Content = Union[bytes, bytearray, str, None]

class HarnessError(Exception):
    """Base class of every Harness error."""

    message: str
    service: Optional[str]
    endpoint: Optional[str]
    method: Optional[str]
    attempts: int
    status: Optional[int]
    code: Optional[str]
    retry_after_ms: Optional[int]
    trace_id: Optional[str]
    def __init__(
        self,
        text: str = "",
        *,
        message: Optional[str] = None,
        service: Optional[str] = None,
        endpoint: Optional[str] = None,
        method: Optional[str] = None,
        attempts: int = 0,
        status: Optional[int] = None,
        code: Optional[str] = None,
        retry_after_ms: Optional[int] = None,
        trace_id: Optional[str] = None,
        phase: Optional[str] = None,
        body: Optional[bytes] = None,
    ) -> None: ...
    @property
    def kind(self) -> str:
        """The stable error kind name."""

class TimeoutError(HarnessError):
    """A timeout expired; ``phase`` says which."""

    @property
    def phase(self) -> Optional[str]:
        """``connect``, ``response`` or ``total``."""

class CircuitOpenError(HarnessError):
    """The circuit breaker is open: the call was not sent."""

class BulkheadFullError(HarnessError):
    """The service's bulkhead has no free permit."""

class RateLimitedError(HarnessError):
    """Rate limited; ``retry_after_ms`` says when to try again."""

class HttpStatusError(HarnessError):
    """The upstream answered with an error status."""

    @property
    def body(self) -> Optional[bytes]:
        """The raw response body."""

class AuthError(HarnessError):
    """Credentials were refused or could not be obtained."""

class SchemaError(HarnessError):
    """The response did not match its JSON Schema."""

class ConnectError(HarnessError):
    """The connection could not be made."""

class CancelledError(HarnessError):
    """The request was cancelled."""

class NoHealthyProviderError(HarnessError):
    """Every provider of a route is unhealthy, open or full."""

class ConfigError(HarnessError):
    """Bad config or bad input; the message starts with the field path."""

class ProtocolError(HarnessError):
    """The server answered, but not with valid HTTP; not retried."""

class ResponseTooLargeError(HarnessError):
    """The response body is larger than ``limits.max_response_bytes``."""

class Headers(Mapping[str, str]):
    """Response headers: a read-only mapping with case-insensitive names."""

    def __init__(self, raw: List[Tuple[str, str]]) -> None: ...
    def __getitem__(self, name: str) -> str: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def get_list(self, name: str) -> List[str]:
        """Every value of a header, in the order received."""
    def raw(self) -> List[Tuple[str, str]]:
        """The (lower-case name, value) pairs as received."""

class Response:
    """A successful response."""

    status: int
    content: bytes
    elapsed_ms: float
    attempts: int
    trace_id: str
    def __init__(
        self, status: int, headers: List[Tuple[str, str]], content: bytes, elapsed_ms: float, attempts: int, trace_id: str
    ) -> None: ...
    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
    @property
    def text(self) -> str:
        """The body decoded as text."""
    def json(self) -> Any:
        """The body parsed as JSON."""

class Client:
    """A blocking Harness client, safe to share across threads."""

    def __init__(self, config: Config) -> None: ...
    def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        endpoint: Optional[str] = None,
        params: Pairs = None,
        headers: Pairs = None,
        json: Any = None,
        content: Content = None,
        idempotency_key: Optional[str] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline."""
    def get(self, service: str, path: str, **kwargs: Any) -> Response:
        """A GET request."""
    def post(self, service: str, path: str, **kwargs: Any) -> Response:
        """A POST request."""
    def put(self, service: str, path: str, **kwargs: Any) -> Response:
        """A PUT request."""
    def patch(self, service: str, path: str, **kwargs: Any) -> Response:
        """A PATCH request."""
    def delete(self, service: str, path: str, **kwargs: Any) -> Response:
        """A DELETE request."""
    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state: ``closed``, ``open`` or ``half_open``."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service``."""
    def close(self) -> None:
        """Refuses new requests; requests in flight finish."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...

class AsyncClient:
    """An asyncio Harness client; requests run on the Rust core's runtime."""

    def __init__(self, config: Config) -> None: ...
    async def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        endpoint: Optional[str] = None,
        params: Pairs = None,
        headers: Pairs = None,
        json: Any = None,
        content: Content = None,
        idempotency_key: Optional[str] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline."""
    async def get(self, service: str, path: str, **kwargs: Any) -> Response:
        """A GET request."""
    async def post(self, service: str, path: str, **kwargs: Any) -> Response:
        """A POST request."""
    async def put(self, service: str, path: str, **kwargs: Any) -> Response:
        """A PUT request."""
    async def patch(self, service: str, path: str, **kwargs: Any) -> Response:
        """A PATCH request."""
    async def delete(self, service: str, path: str, **kwargs: Any) -> Response:
        """A DELETE request."""
    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state: ``closed``, ``open`` or ``half_open``."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service``."""
    def close(self) -> None:
        """Refuses new requests; requests in flight finish."""
    async def aclose(self) -> None:
        """Same as ``close()``."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    async def __aenter__(self) -> "AsyncClient": ...
    async def __aexit__(self, *exc: Any) -> None: ...
