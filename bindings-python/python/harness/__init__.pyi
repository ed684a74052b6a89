"""Type stubs for ``harness``: every public name of the package."""

from collections.abc import Mapping
from os import PathLike
from typing import Any, AsyncIterator, Awaitable, Callable, ContextManager, AsyncContextManager, Dict, Generator, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

__version__: str
__all__: List[str]

Config = Union[Mapping[str, Any], str, PathLike[str]]
Pairs = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], None]
Content = Union[bytes, bytearray, str, None]
Listener = Callable[["Event"], Union[None, Awaitable[None]]]
TokenAnswer = Union[Mapping[str, Any], Tuple[str, Optional[float]]]
"""``{"token": str, "expires_in": seconds or None}`` or ``(token, expires_in)``."""
TokenProvider = Callable[[], Union[TokenAnswer, Awaitable[TokenAnswer]]]
Messages = Sequence[Mapping[str, Any]]
"""The chat-completions ``messages``: ``[{"role": "user", "content": "..."}, ...]``."""
# The views, the chat answer and the config's shape are generated from the core's schema
# (`harness types`, into `_types.py`): not restated here.
from ._types import BreakerInfo as BreakerInfo
from ._types import ChatChunk as ChatChunk
from ._types import ChatResponse as ChatResponse
from ._types import ClientViews as ClientViews
from ._types import Config as ConfigDict
from ._types import CredentialState as CredentialState
from ._types import RouteState as RouteState
from ._types import Usage as Usage

BreakerDetails = BreakerInfo
_C = TypeVar("_C")

# The exception tree is typed where it is defined (_errors.py), one class per core error kind.
from ._errors import HarnessError as HarnessError
from ._errors import TimeoutError as TimeoutError
from ._errors import CircuitOpenError as CircuitOpenError
from ._errors import BulkheadFullError as BulkheadFullError
from ._errors import RateLimitedError as RateLimitedError
from ._errors import HttpStatusError as HttpStatusError
from ._errors import AuthError as AuthError
from ._errors import SchemaError as SchemaError
from ._errors import ConnectError as ConnectError
from ._errors import CancelledError as CancelledError
from ._errors import NoHealthyProviderError as NoHealthyProviderError
from ._errors import ConfigError as ConfigError
from ._errors import ProtocolError as ProtocolError
from ._errors import ResponseTooLargeError as ResponseTooLargeError
from ._errors import DuplicateInFlightError as DuplicateInFlightError

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
    """A successful response; routing attributes are ``None`` unless the request named a route."""

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
        routed: Optional[Dict[str, Any]] = None,
    ) -> None: ...
    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
    @property
    def route(self) -> Optional[str]:
        """The route the request named."""
    @property
    def provider(self) -> Optional[str]:
        """The provider that answered (``None`` for a static fallback)."""
    @property
    def model(self) -> Optional[str]:
        """The model that answered."""
    @property
    def attempts_by_provider(self) -> Optional[List[Tuple[str, int]]]:
        """``[(provider, attempts), ...]`` in the order first tried."""
    @property
    def fallback(self) -> Optional[str]:
        """``"cache"`` or ``"static"`` when no provider could answer."""
    @property
    def stale(self) -> Optional[bool]:
        """Whether this is a cached answer (``fallback == "cache"``)."""
    @property
    def usage(self) -> Optional[Usage]:
        """Token counts, when the adapter read them."""
    @property
    def cost(self) -> Optional[float]:
        """The answer's cost from the provider's prices."""
    @property
    def text(self) -> str:
        """The body decoded as text."""
    def json(self) -> Any:
        """The body parsed as JSON."""

class StreamResponse:
    """A response whose body is read as it arrives; from ``client.stream(...)``."""

    @property
    def status(self) -> int:
        """The HTTP status code."""
    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
    @property
    def attempts(self) -> int:
        """How many attempts it took to get the response head."""
    @property
    def trace_id(self) -> str:
        """The W3C trace id of this call."""
    def iter_bytes(self) -> Iterator[bytes]:
        """The body chunk by chunk, as it arrives (the GIL is released while waiting)."""
    def iter_lines(self) -> Iterator[str]:
        """The body as lines of text (``\\n`` or ``\\r\\n``; a last partial line is kept)."""
    def read(self) -> bytes:
        """The rest of the body as one ``bytes``."""
    def close(self) -> None:
        """Stops reading: frees the connection and the permit."""
    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body chunk by chunk, without blocking the event loop."""
    def aiter_lines(self) -> AsyncIterator[str]:
        """``iter_lines`` without blocking the event loop."""
    async def aread(self) -> bytes:
        """``read`` without blocking the event loop."""
    async def aclose(self) -> None:
        """Same as ``close()``."""
    def __enter__(self) -> "StreamResponse": ...
    def __exit__(self, *exc: Any) -> None: ...
    async def __aenter__(self) -> "StreamResponse": ...
    async def __aexit__(self, *exc: Any) -> None: ...

class ChatStream:
    """A streamed chat answer (``client.chat_stream(...)``); leaving the loop early cancels it."""

    @property
    def route(self) -> str: ...
    @property
    def trace_id(self) -> str: ...
    def __iter__(self) -> Iterator[ChatChunk]: ...
    def close(self) -> None:
        """Cancels the answer (no effect once it ended)."""
    def __enter__(self) -> "ChatStream": ...
    def __exit__(self, *exc: Any) -> None: ...

class AsyncChatStream:
    """A streamed chat answer for asyncio (``aclient.chat_stream(...)``): ``async for``, ``async with`` or ``await``."""

    @property
    def route(self) -> str: ...
    @property
    def trace_id(self) -> Optional[str]:
        """``None`` until the stream is open."""
    def __await__(self) -> Generator[Any, None, "AsyncChatStream"]: ...
    def __aiter__(self) -> AsyncIterator[ChatChunk]: ...
    def close(self) -> None:
        """Cancels the answer (no effect once it ended)."""
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> "AsyncChatStream": ...
    async def __aexit__(self, *exc: Any) -> None: ...

class Event:
    """Something the engine did: ``type`` names it, every other field is an attribute.

    Types: ``request_finished``, ``retry_scheduled``, ``breaker_state_changed``,
    ``bulkhead_rejected``, ``config_reloaded``, ``config_rejected``, ``shared_state_unavailable``,
    ``provider_failover``, ``stream_restarted``, ``stream_chunk_skipped``, ``fallback_served``, ``schema_violation``,
    ``audit_record``.
    """

    type: str
    def __init__(self, fields: Dict[str, Any]) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def to_dict(self) -> Dict[str, Any]:
        """The event as a plain dict, ``type`` included."""

class Client(ClientViews):
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
        principal: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline."""
    def stream(
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
        principal: Optional[str] = None,
    ) -> ContextManager[StreamResponse]:
        """A streamed request, for a ``with`` block."""
    def chat(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Pairs = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatResponse:
        """One chat answer on an ``openai-compatible`` route; other keywords are chat-completions parameters."""
    def chat_stream(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Pairs = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatStream:
        """A streamed chat answer; returns once a provider answered."""
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
    @classmethod
    def from_file(cls: "type[_C]", path: Union[str, PathLike[str]], watch: bool = False) -> _C:
        """A client from a YAML/JSON/TOML file; ``watch=True`` reloads it when the file changes."""
    def reload(self, config: Config) -> str:
        """Replaces the config (dict or path) and returns the new ``config_version``."""
    @property
    def config_version(self) -> str:
        """A short hash of the active config."""
    def add_listener(self, listener: Listener) -> None:
        """Calls ``listener(event)`` (a function or an ``async def``) with every event."""
    def set_token_provider(self, service: str, provider: TokenProvider) -> None:
        """Sets the token provider of a service with ``auth: {type: callback}`` (sync or ``async def``)."""
    def set_weight(self, route: str, provider: str, weight: int) -> str:
        """Sets a provider's weight as a reload would; returns the new ``config_version``."""
    def mock(
        self,
        service: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        status: int = 200,
        body: Optional[str] = None,
        headers: Pairs = None,
        latency_ms: int = 0,
    ) -> None:
        """Answers ``service``'s requests matching ``method`` (``""``/``"*"``: any) and the path
        template ``path`` from this rule (latest first); the whole pipeline still runs."""
    def clear_mocks(self, service: Optional[str] = None) -> None:
        """Removes the mocks set by ``mock`` for ``service`` (every service when ``None``)."""
    def flush(self) -> None:
        """Delivers this client's queued log records, events and audit records now."""
    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state: ``closed``, ``open`` or ``half_open``."""
    def bulkhead_limit(self, service: str) -> int:
        """The bulkhead's current concurrency limit on ``service`` (adaptive limits move)."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service``."""
    def close(self) -> None:
        """Refuses new requests (in-flight ones finish), stops watching, flushes records and events."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...

class AsyncClient(ClientViews):
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
        principal: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline."""
    def stream(
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
        principal: Optional[str] = None,
    ) -> AsyncContextManager[StreamResponse]:
        """A streamed request, for a ``async with`` block."""
    async def chat(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Pairs = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatResponse:
        """One chat answer on an ``openai-compatible`` route; other keywords are chat-completions parameters."""
    def chat_stream(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Pairs = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> AsyncChatStream:
        """A streamed chat answer, sent when first awaited, entered or iterated."""
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
    @classmethod
    def from_file(cls: "type[_C]", path: Union[str, PathLike[str]], watch: bool = False) -> _C:
        """A client from a YAML/JSON/TOML file; ``watch=True`` reloads it when the file changes."""
    def reload(self, config: Config) -> str:
        """Replaces the config (dict or path) and returns the new ``config_version``."""
    @property
    def config_version(self) -> str:
        """A short hash of the active config."""
    def add_listener(self, listener: Listener) -> None:
        """Calls ``listener(event)`` (a function or an ``async def``) with every event."""
    def set_token_provider(self, service: str, provider: TokenProvider) -> None:
        """Sets the token provider of a service with ``auth: {type: callback}`` (sync or ``async def``)."""
    def set_weight(self, route: str, provider: str, weight: int) -> str:
        """Sets a provider's weight as a reload would; returns the new ``config_version``."""
    def mock(
        self,
        service: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        status: int = 200,
        body: Optional[str] = None,
        headers: Pairs = None,
        latency_ms: int = 0,
    ) -> None:
        """Answers ``service``'s requests matching ``method`` (``""``/``"*"``: any) and the path
        template ``path`` from this rule (latest first); the whole pipeline still runs."""
    def clear_mocks(self, service: Optional[str] = None) -> None:
        """Removes the mocks set by ``mock`` for ``service`` (every service when ``None``)."""
    def flush(self) -> None:
        """Delivers this client's queued log records, events and audit records now."""
    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state: ``closed``, ``open`` or ``half_open``."""
    def bulkhead_limit(self, service: str) -> int:
        """The bulkhead's current concurrency limit on ``service`` (adaptive limits move)."""
    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service``."""
    def close(self) -> None:
        """Refuses new requests (in-flight ones finish), stops watching, flushes records and events."""
    async def aclose(self) -> None:
        """Same as ``close()``."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    async def __aenter__(self) -> "AsyncClient": ...
    async def __aexit__(self, *exc: Any) -> None: ...

ReceiverConfig = Mapping[str, Any]
"""``prefix``, ``ttl_ms``, ``lease_ms``, ``retry_failed``, ``redis_url``, ``on_store_down``
(``reject``/``process``), ``signature: {secret: {env|file|value}, max_skew_ms}``."""
_T = TypeVar("_T")
Body = Union[bytes, bytearray, memoryview, str]

class Claim:
    """One delivery's claim of a key (``with idem.claim(key) as c:``)."""

    key: str
    """The claimed key."""
    done: bool
    """Whether the message was processed before this delivery (``result`` is the stored result)."""
    result: Any
    """The stored result when ``done``; otherwise set it to the handler's result inside the block."""
    deduplicated: bool
    """``False`` when the store was down and ``on_store_down: process`` let the handler run without dedup."""

class Idempotency:
    """The idempotent receiver: a handler runs at most once per key across the fleet."""

    def __init__(self, config: Optional[ReceiverConfig] = None) -> None: ...
    def key(self, tenant: str, event_type: str, msg_id: str) -> str:
        """``{prefix}{tenant}:{event_type}:{msg_id}``; ``ConfigError`` naming a bad part."""
    def claim(self, key: str) -> ContextManager[Claim]:
        """A ``with`` block holding ``key``: stores ``c.result`` on leaving, marks the key failed on an exception."""
    def run(self, key: str, fn: Callable[[], _T]) -> _T:
        """Calls ``fn()`` at most once for ``key``; returns its result as stored, or the stored result."""
    def verify(self, timestamp: Union[str, int], body: Body, signature: str) -> None:
        """Checks a signed delivery; ``AuthError`` (``bad_signature``/``stale_signature``)."""
    def sign(self, timestamp: Union[str, int], body: Body) -> str:
        """The hex HMAC-SHA256 signature of ``{timestamp}.{body}``."""
    def metrics_text(self) -> str:
        """``harness_idempotency_total{outcome}`` in the Prometheus text format."""

class AsyncIdempotency:
    """The idempotent receiver for asyncio: ``await idem.run(key, async_fn)``, ``async with idem.claim(key)``."""

    def __init__(self, config: Optional[ReceiverConfig] = None) -> None: ...
    def key(self, tenant: str, event_type: str, msg_id: str) -> str:
        """``{prefix}{tenant}:{event_type}:{msg_id}``; ``ConfigError`` naming a bad part."""
    def claim(self, key: str) -> AsyncContextManager[Claim]:
        """An ``async with`` block holding ``key``."""
    async def run(self, key: str, fn: Callable[[], Union[Awaitable[_T], _T]]) -> _T:
        """Awaits ``fn()`` at most once for ``key``; returns its result as stored, or the stored result."""
    def verify(self, timestamp: Union[str, int], body: Body, signature: str) -> None:
        """Checks a signed delivery; ``AuthError`` (``bad_signature``/``stale_signature``)."""
    def sign(self, timestamp: Union[str, int], body: Body) -> str:
        """The hex HMAC-SHA256 signature of ``{timestamp}.{body}``."""
    def metrics_text(self) -> str:
        """``harness_idempotency_total{outcome}`` in the Prometheus text format."""
