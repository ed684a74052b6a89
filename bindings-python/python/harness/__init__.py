"""Harness: one resilient HTTP API-access engine, written in Rust.

Business code names a service, a method, a path and a payload; Harness owns
timeouts, retries, circuit breaking, bulkheads, metrics and traces. This
package only translates: every behaviour lives in the Rust core.

    >>> import harness
    >>> with harness.Client({"services": {"orders": {"base_url": "http://127.0.0.1:8080"}}}) as c:
    ...     r = c.get("orders", "/orders/42")
"""

import asyncio
import atexit
import codecs
import inspect
import json as _json
import os
import weakref
from collections.abc import Mapping
from typing import Any, AsyncIterator, Callable, Dict, Generator, Iterator, List, Optional, Sequence, Tuple, Union, cast

from . import _native, _otel
from ._version import __version__ as _package_version
from ._types import CacheStamp as CacheStamp, ChatChunk as ChatChunk, ChatResponse as ChatResponse, ClientViews as ClientViews, Level as _Level, Usage as Usage

if getattr(_native, "__version__", None) != _package_version:
    # A native library from another build (a partial upgrade, a copied .so): its types and
    # calls may not match this Python code, so refuse here rather than fail somewhere later.
    raise ImportError(
        f"harness-sdk {_package_version}: its native library {getattr(_native, '__file__', '?')} is version "
        f"{getattr(_native, '__version__', 'unknown')}; reinstall harness-sdk so both come from one build"
    )
from ._credentials import TokenProvider as _TokenProvider
from ._adapters import Adapter as Adapter, HostAdapter as _HostAdapter, methods as _adapter_methods
from ._embed import EmbedResponse as EmbedResponse
from ._interceptors import (
    After as _After,
    Before as _Before,
    HostInterceptor as _HostInterceptor,
    InterceptedRequest as InterceptedRequest,
    InterceptedResponse as InterceptedResponse,
    Reject as Reject,
    default_name as _default_name,
)
from ._events import Event as Event, _AsyncListener
from . import _errors
from ._errors import (
    AuthError as AuthError,
    BulkheadFullError as BulkheadFullError,
    CancelledError as CancelledError,
    CircuitOpenError as CircuitOpenError,
    ConfigError as ConfigError,
    ConnectError as ConnectError,
    DuplicateInFlightError as DuplicateInFlightError,
    HarnessError as HarnessError,
    HttpStatusError as HttpStatusError,
    InterceptorError as InterceptorError,
    NoHealthyProviderError as NoHealthyProviderError,
    ProtocolError as ProtocolError,
    RateLimitedError as RateLimitedError,
    ResponseTooLargeError as ResponseTooLargeError,
    SchemaError as SchemaError,
    TimeoutError as TimeoutError,
)

__version__: str = _native.__version__
Event.__module__ = __name__  # public as harness.Event
Reject.__module__ = InterceptedRequest.__module__ = InterceptedResponse.__module__ = __name__  # public as harness.Reject, ...

__all__ = [
    "Client",
    "AsyncClient",
    "Response",
    "StreamResponse",
    "Headers",
    "Usage",
    "ChatResponse",
    "ChatChunk",
    "ChatStream",
    "AsyncChatStream",
    "EmbedResponse",
    "Adapter",
    "Reject",
    "InterceptedRequest",
    "InterceptedResponse",
    "Event",
    "Idempotency",
    "AsyncIdempotency",
    "Claim",
] + _errors.__all__


class Headers(Mapping[str, str]):
    """Response headers: a read-only mapping with case-insensitive names.

    Repeated headers are joined with ``", "``; ``get_list`` returns each value.
    """

    __slots__ = ("_raw", "_map")

    def __init__(self, raw: List[Tuple[str, str]]) -> None:
        self._raw = raw
        self._map: Optional[Dict[str, str]] = None

    def _index(self) -> Dict[str, str]:
        if self._map is None:
            m: Dict[str, str] = {}
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


# The cache outcomes that mean "served from a store" (the core's `CacheStamp::from_cache`).
_FROM_CACHE = frozenset(("hit", "revalidated", "stale", "exact", "semantic"))


def _usage(u: Optional[Dict[str, int]]) -> Optional[Usage]:
    return None if u is None else Usage._from(u)


class Response:
    """A successful response (status 2xx/3xx); error statuses raise ``HttpStatusError``.

    A request that named a route (``routes:`` in the config) also says who answered and how:
    ``route``, ``provider``, ``model``, ``attempts_by_provider``, ``fallback``, ``stale``,
    ``usage`` and ``cost``; all ``None`` for a plain service. When a cache had a part in the
    answer (README "Caching and coalescing"), ``cache`` says what it did, and ``from_cache`` and
    ``revalidated`` sum it up.
    """

    # A dict of slots documents each attribute (help(), inspect.getdoc).
    __slots__ = {
        "status": "The HTTP status code.",
        "content": "The body as bytes.",
        "elapsed_ms": "Wall time of the whole call, retries included, in milliseconds.",
        "attempts": "How many attempts the call took (1 = no retry).",
        "trace_id": "The W3C trace id of this call (sent downstream in ``traceparent``).",
        "_raw_headers": "",
        "_headers": "",
        "_routed": "",
        "cache": "What a cache did for this answer (``CacheStamp``: ``outcome``, ``similarity``, ``saved_cost``), or ``None`` when no cache had a part in it.",
    }

    status: int
    content: bytes
    elapsed_ms: float
    attempts: int
    trace_id: str
    cache: Optional[CacheStamp]

    def __init__(
        self,
        status: int,
        headers: List[Tuple[str, str]],
        content: bytes,
        elapsed_ms: float,
        attempts: int,
        trace_id: str,
        routed: Optional[Dict[str, Any]] = None,
        cache: Optional[CacheStamp] = None,
    ) -> None:
        self.status = status
        self._raw_headers = headers
        self._headers: Optional[Headers] = None
        self.content = content
        self.elapsed_ms = elapsed_ms
        self.attempts = attempts
        self.trace_id = trace_id
        self._routed = routed
        self.cache = cache

    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
        if self._headers is None:
            self._headers = Headers(self._raw_headers)
        return self._headers

    def _route_field(self, name: str) -> Any:
        return None if self._routed is None else self._routed[name]

    @property
    def route(self) -> Optional[str]:
        """The route the request named (``None`` for a plain service)."""
        return cast(Optional[str], self._route_field("route"))

    @property
    def provider(self) -> Optional[str]:
        """The provider that answered (``None`` for a static fallback or a plain service)."""
        return cast(Optional[str], self._route_field("provider"))

    @property
    def model(self) -> Optional[str]:
        """The model that answered (the provider's report, else its configured model)."""
        return cast(Optional[str], self._route_field("model"))

    @property
    def attempts_by_provider(self) -> Optional[List[Tuple[str, int]]]:
        """``[(provider, attempts), ...]`` in the order the providers were first tried."""
        pairs = self._route_field("attempts_by_provider")
        return None if pairs is None else [(p, n) for p, n in pairs]

    @property
    def fallback(self) -> Optional[str]:
        """``"cache"`` (a stale answer for the same request) or ``"static"`` when no provider could answer."""
        return cast(Optional[str], self._route_field("fallback"))

    @property
    def stale(self) -> Optional[bool]:
        """Whether this is a cached answer served because no provider could answer now."""
        return None if self._routed is None else self._routed["fallback"] == "cache"

    @property
    def usage(self) -> Optional[Usage]:
        """Token counts, when the route's adapter read them from the answer."""
        return _usage(self._route_field("usage"))

    @property
    def cost(self) -> Optional[float]:
        """The answer's cost from the provider's configured prices and the usage it reported."""
        return cast(Optional[float], self._route_field("cost"))

    @property
    def from_cache(self) -> bool:
        """Served from a store, not fetched for this call: a fresh stored answer (``hit``, which
        makes no attempt), one the origin confirmed with a 304 (``revalidated``) or one served
        past its freshness (``stale``)."""
        return self.cache is not None and self.cache["outcome"] in _FROM_CACHE

    @property
    def revalidated(self) -> bool:
        """A stored answer the origin confirmed with a 304 (the caller sees the stored 200)."""
        return self.cache is not None and self.cache["outcome"] == "revalidated"

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
        routed = "" if self._routed is None else f" provider={self.provider}"
        cache = "" if self.cache is None else f" cache={self.cache['outcome']}"
        return f"<Response [{self.status}]{routed}{cache} attempts={self.attempts} trace_id={self.trace_id}>"


class _Lines:
    """Splits decoded text on ``\\n`` (a ``\\r`` before it is dropped); keeps a partial last line."""

    __slots__ = ("_decoder", "_parts")

    def __init__(self, charset: str) -> None:
        try:
            self._decoder = codecs.getincrementaldecoder(charset)(errors="replace")
        except LookupError:
            self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: List[str] = []

    def feed(self, chunk: bytes, final: bool = False) -> List[str]:
        text = self._decoder.decode(chunk, final)
        out: List[str] = []
        if "\n" in text:
            lines = text.split("\n")
            self._parts.append(lines[0])
            lines[0] = "".join(self._parts)
            self._parts = [lines.pop()]
            out = [line[:-1] if line.endswith("\r") else line for line in lines]
        elif text:
            self._parts.append(text)
        if final:
            last = "".join(self._parts)
            self._parts = []
            if last:
                out.append(last[:-1] if last.endswith("\r") else last)
        return out


class StreamResponse:
    """A response whose body is read as it arrives (``client.stream(...)``).

    The status and headers are known on entering the ``with`` block (an error status raises
    there). Leaving the block, normally, by ``break`` or by an exception, or cancelling the
    task, stops reading and frees the connection and the bulkhead permit at once.
    Sync code reads with ``iter_bytes``/``iter_lines``/``read``; async code with
    ``aiter_bytes``/``aiter_lines``/``aread``. A body read to its end cannot be read again.
    """

    __slots__ = ("_native", "_headers", "_content")

    def __init__(self, native: "_native.Stream") -> None:
        self._native = native
        self._headers: Optional[Headers] = None
        self._content: Optional[bytes] = None

    @property
    def status(self) -> int:
        """The HTTP status code."""
        return self._native.status

    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
        if self._headers is None:
            self._headers = Headers(self._native.headers)
        return self._headers

    @property
    def attempts(self) -> int:
        """How many attempts it took to get the response head (1 = no retry)."""
        return self._native.attempts

    @property
    def trace_id(self) -> str:
        """The W3C trace id of this call."""
        return self._native.trace_id

    def _charset(self) -> str:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return str(value.strip('"'))
        return "utf-8"

    def iter_bytes(self) -> Iterator[bytes]:
        """The body chunk by chunk, as it arrives. Each wait releases the GIL; Ctrl-C
        interrupts it. A body cut before its end raises (``ConnectError``/``ProtocolError``),
        and a silent one ``TimeoutError`` (phase ``idle``)."""
        next_chunk = self._native.next
        while True:
            chunk = next_chunk()
            if chunk is None:
                return
            yield chunk

    def iter_lines(self) -> Iterator[str]:
        """The body as lines of text (split on ``\\n``, ``\\r\\n`` handled, no line ends), decoded
        with the ``content-type`` charset (UTF-8 by default); a last line without an end is kept."""
        lines = _Lines(self._charset())
        for chunk in self.iter_bytes():
            yield from lines.feed(chunk)
        yield from lines.feed(b"", final=True)

    def read(self) -> bytes:
        """The rest of the body, as one ``bytes`` (the same object on later calls)."""
        if self._content is None:
            self._content = b"".join(self.iter_bytes())
        return self._content

    def close(self) -> None:
        """Stops reading: frees the connection and the permit (no effect once the body ended)."""
        self._native.cancel()

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body chunk by chunk, as it arrives, without blocking the event loop."""
        loop = asyncio.get_running_loop()
        bridge, native = _bridge(loop), self._native
        while True:
            future = loop.create_future()
            native.next_async(bridge, future)
            try:
                chunk = await future
            except BaseException:
                native.cancel()  # an asyncio cancel ends the pending read and frees the connection now
                raise
            if chunk is None:
                return
            yield chunk

    async def aiter_lines(self) -> AsyncIterator[str]:
        """``iter_lines`` without blocking the event loop."""
        lines = _Lines(self._charset())
        async for chunk in self.aiter_bytes():
            for line in lines.feed(chunk):
                yield line
        for line in lines.feed(b"", final=True):
            yield line

    async def aread(self) -> bytes:
        """``read`` without blocking the event loop."""
        if self._content is None:
            self._content = b"".join([c async for c in self.aiter_bytes()])
        return self._content

    async def aclose(self) -> None:
        """Same as ``close()``."""
        self._native.cancel()

    def __enter__(self) -> "StreamResponse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "StreamResponse":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<StreamResponse [{self.status}] attempts={self.attempts} trace_id={self.trace_id}>"


class _StreamCall:
    """``client.stream(...)``: opens the stream on entering the ``with`` block, closes it on leaving."""

    __slots__ = ("_open", "_response")

    def __init__(self, open_: Callable[[], Any]) -> None:
        self._open = open_
        self._response: Optional[StreamResponse] = None

    def __enter__(self) -> StreamResponse:
        self._response = StreamResponse(self._open())
        return self._response

    def __exit__(self, *exc: Any) -> None:
        if self._response is not None:
            self._response.close()


class _AsyncStreamCall:
    """``aclient.stream(...)``: opens the stream on entering the ``async with`` block."""

    __slots__ = ("_native", "_args", "_response")

    def __init__(self, native: Any, args: Tuple[Any, ...]) -> None:
        self._native = native
        self._args = args
        self._response: Optional[StreamResponse] = None

    async def __aenter__(self) -> StreamResponse:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._native.call("stream", _bridge(loop), future, *self._args)
        try:
            native = await future
        except BaseException:
            pending.cancel()  # a cancel while opening drops the Rust future (and its permit)
            raise
        self._response = StreamResponse(native)
        return self._response

    async def __aexit__(self, *exc: Any) -> None:
        if self._response is not None:
            self._response.close()


class ChatStream:
    """A streamed chat answer (``client.chat_stream(...)``): iterate it for ``ChatChunk`` objects.

    The call returned once a provider answered; the chunks arrive as the provider writes
    them, each read releasing the GIL (Ctrl-C interrupts it). The last chunk is ``done``
    (finish reason, usage, cost). A ``restart`` chunk voids the answer so far: a new one
    follows from another provider. Leaving the loop early (``break``, an exception),
    ``close()`` or leaving a ``with`` block cancels the answer and frees the connection and
    the permits at once; a stream left before its end cannot be read again.
    """

    __slots__ = ("_native", "_ended")

    def __init__(self, native: "_native.ChatStream") -> None:
        self._native = native
        self._ended = False

    @property
    def route(self) -> str:
        """The route the answer comes through."""
        return self._native.route

    @property
    def trace_id(self) -> str:
        """The W3C trace id of this call."""
        return self._native.trace_id

    def __iter__(self) -> Iterator["ChatChunk"]:
        return self._chunks()

    def _chunks(self) -> Generator["ChatChunk", None, None]:
        next_chunk = self._native.next
        try:
            while True:
                chunk = next_chunk()
                if chunk is None:
                    self._ended = True
                    return
                yield ChatChunk._from(chunk)
        finally:
            # Left before the end (break, an exception, Ctrl-C): the answer is not wanted any more.
            if not self._ended:
                self._native.cancel()

    def close(self) -> None:
        """Cancels the answer (no effect once it ended): frees the connection and the permits."""
        if not self._ended:
            self._native.cancel()

    def __enter__(self) -> "ChatStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ChatStream route={self.route} trace_id={self.trace_id}>"


class AsyncChatStream:
    """A streamed chat answer for asyncio (``aclient.chat_stream(...)``): ``async for`` it
    for ``ChatChunk`` objects, with or without ``async with``; ``await`` it to open it first.

    The call is sent when the stream is first awaited, entered or iterated, and that waits
    (without blocking the loop) until a provider answered. The chunks are those of
    ``ChatStream``. Leaving the loop early, ``aclose()``, leaving the ``async with`` block or
    cancelling the task cancels the answer and frees the connection and the permits.
    """

    __slots__ = ("_client", "_args", "_native", "_ended", "_closed")

    def __init__(self, client: Any, args: Tuple[Any, ...]) -> None:
        self._client = client
        self._args = args
        self._native: Any = None
        self._ended = False
        self._closed = False

    @property
    def route(self) -> str:
        """The route the answer comes through."""
        return str(self._args[0])

    @property
    def trace_id(self) -> Optional[str]:
        """The W3C trace id of this call (``None`` until the stream is open)."""
        return None if self._native is None else self._native.trace_id

    async def _open(self) -> "AsyncChatStream":
        if self._native is None:
            if self._closed:
                raise CancelledError("the chat stream was closed before it was opened")
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            pending = self._client.chat("chat_stream", _bridge(loop), future, *self._args)
            try:
                self._native = await future
            except BaseException:
                pending.cancel()  # a cancel while opening drops the Rust future (and its permits)
                raise
        return self

    def __await__(self) -> Generator[Any, None, "AsyncChatStream"]:
        return self._open().__await__()

    def __aiter__(self) -> AsyncIterator["ChatChunk"]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator["ChatChunk"]:
        await self._open()
        loop = asyncio.get_running_loop()
        bridge, native = _bridge(loop), self._native
        try:
            while True:
                future = loop.create_future()
                native.next_async(bridge, future)
                try:
                    chunk = await future
                except BaseException:
                    native.cancel()  # an asyncio cancel ends the pending read and frees the connection now
                    raise
                if chunk is None:
                    self._ended = True
                    return
                yield ChatChunk._from(chunk)
        finally:
            if not self._ended:
                native.cancel()

    def close(self) -> None:
        """Cancels the answer (no effect once it ended): frees the connection and the permits."""
        self._closed = True
        if self._native is not None and not self._ended:
            self._native.cancel()

    async def aclose(self) -> None:
        """Same as ``close()``."""
        self.close()

    async def __aenter__(self) -> "AsyncChatStream":
        return await self._open()

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<AsyncChatStream route={self.route} trace_id={self.trace_id}>"


Messages = Sequence[Mapping[str, Any]]


def _chat_params(extra_body: Optional[Mapping[str, Any]], params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The chat-completions parameters: the keyword arguments, and ``extra_body`` for names
    that are keywords of the call itself (``timeout_ms``...) or not identifiers."""
    if extra_body is None:
        return params or None
    if not isinstance(extra_body, Mapping):
        raise ConfigError(f"extra_body: expected a mapping of chat-completions parameters, got {type(extra_body).__name__}")
    for k in extra_body:
        if k in params:
            raise ConfigError(f"params.{k}: given both as a keyword argument and in extra_body")
    return {**extra_body, **params}


Config = Union[Mapping[str, Any], str, "os.PathLike[str]"]


# One completion queue per event loop: Rust queues finished requests, stream opens and
# stream chunks and wakes the loop through a notifier fd (an eventfd on Linux, a socket pair
# elsewhere), so no runtime thread ever waits for the GIL. See README "One completion pattern".
_BRIDGES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()

# True: the portable socket-pair notifier even on Linux (HARNESS_NOTIFIER=socketpair; tests use it).
_PORTABLE_NOTIFIER = os.environ.get("HARNESS_NOTIFIER", "") == "socketpair"


def _bridge(loop: asyncio.AbstractEventLoop) -> Any:
    bridge = _BRIDGES.get(loop)
    if bridge is None:
        bridge = _native.Bridge(_PORTABLE_NOTIFIER)
        loop.add_reader(bridge.fileno(), bridge.drain)
        _BRIDGES[loop] = bridge
    return bridge


if hasattr(os, "register_at_fork"):
    # A forked child shares its parent's notifier fds: it must never wait on (or wake) a parent's bridge.
    os.register_at_fork(after_in_child=_BRIDGES.clear)


# Live clients, flushed at exit so their last log records and events are delivered.
_CLIENTS: "weakref.WeakSet[_Base]" = weakref.WeakSet()


@atexit.register
def _at_exit() -> None:
    # Runs before logging's own atexit handler (registered earlier, run later) and before
    # the interpreter finalizes: deliver what is queued, then no event thread enters Python.
    for client in list(_CLIENTS):
        try:
            client.flush()
        except Exception:  # noqa: BLE001 - exiting; a closed or forked client has nothing to flush
            pass
    _native.shut_down()


class _Base(ClientViews):
    __slots__ = ("_native", "__weakref__")

    def __init__(self, config: Config) -> None:
        """Builds a client from a config dict or a path to a YAML/JSON/TOML file; bad config raises ``ConfigError``."""
        self._native = _native.Client(config)
        _CLIENTS.add(self)

    @classmethod
    def from_file(cls, path: "Union[str, os.PathLike[str]]", watch: bool = False) -> Any:
        """Builds a client from a YAML/JSON/TOML file. With ``watch=True`` the client reloads
        within about a second of the file changing; an invalid edit is rejected (a
        ``config_rejected`` event and a stderr line say why) and the old config stays."""
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(f"path: expected a path to a config file, got {type(path).__name__}")
        self = cls.__new__(cls)
        self._native = _native.Client(path, watch)
        _CLIENTS.add(self)
        return self

    def reload(self, config: Config) -> str:
        """Replaces the config (a dict or a file path, as for the constructor) and returns the
        new ``config_version``. Everything is validated first: on a ``ConfigError`` (naming the
        field) the old config stays. Breakers, retry budgets and endpoint state carry over for
        unchanged keys; requests in flight finish under the config they started with."""
        return self._native.reload(config)

    @property
    def config_version(self) -> str:
        """A short hash of the active config: equal configs give equal versions, in every language."""
        return self._native.config_version

    def add_listener(self, listener: Callable[[Event], Any]) -> None:
        """Calls ``listener(event)`` with every ``Event`` of this client, in order, on the
        client's event thread. An ``async def`` listener is scheduled on the event loop running
        when ``add_listener`` is called instead (it must be called from inside that loop).

        A listener that raises is reported once on stderr and keeps receiving events; it never
        fails a request. A slow listener never slows requests: past a bounded queue, events are
        dropped and counted in ``harness_events_dropped_total``.
        """
        if inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(getattr(listener, "__call__", None)):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError("listener: an async listener needs a running event loop; call add_listener from inside it") from None
            listener = _AsyncListener(listener, loop)
        self._native.add_listener(listener)

    def set_token_provider(self, service: str, provider: Callable[[], Any]) -> None:
        """Sets where ``service`` (configured with ``auth: {type: callback}``) gets its token.

        ``provider()`` takes no arguments and returns ``{"token": str, "expires_in": seconds}``
        (``expires_in`` may be left out or ``None``: the token does not expire) or a tuple
        ``(token, expires_in)``. It may be an ``async def`` (or return an awaitable): the
        coroutine runs on the event loop running when ``set_token_provider`` is called, or
        under ``asyncio.run`` on a thread of its own when there is none. A plain function runs
        on a thread of its own, never on an event loop.

        The core calls it once per refresh however many requests wait, and gives up after
        ``auth.refresh.timeout_ms``. A provider that raises gives the waiting requests an
        ``AuthError`` carrying the exception's type and message. Replacing the provider
        revives a credential marked dead. ``ConfigError`` if the service is unknown or not
        ``type: callback``.
        """
        if not callable(provider):
            raise ConfigError(f"provider: expected a callable, got {type(provider).__name__}")
        try:
            loop: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._native.set_token_provider(service, _TokenProvider(provider, loop))

    def register_adapter(self, name: str, adapter: Adapter) -> None:
        """Registers a host adapter: the wire format of an in-house model server, written in
        Python, for the providers configured with ``adapter: <name>`` on an
        ``adapter: openai-compatible`` route (until it is registered, those providers are
        refused and the route fails over).

        ``adapter`` is any object with the methods ``build_request(request) -> dict``,
        ``parse_response(response) -> dict`` and ``parse_stream_event(event) -> dict | None``
        (see ``harness.Adapter`` for the dicts). Each may be an ``async def``: the coroutine
        runs on the event loop running when ``register_adapter`` is called, or under
        ``asyncio.run`` on a thread of its own when there is none. A plain method runs on a
        thread of its own, never on an event loop. The request is then sent through the
        provider's service like any other (auth, retries, breaker, failover, cost).

        A method that raises, returns something that is not JSON, or does not return within
        the call's deadline fails that provider's attempt with an error naming the adapter
        and the step (``adapter `inhouse` raised in build_request: ValueError: ...``); the
        route fails over. Registering a name again replaces the adapter. ``ConfigError`` if a
        method is missing or the name is not letters, digits, ``-`` and ``_`` or is a built-in
        adapter's (``openai-compatible``, ``anthropic``, ``gemini``, ``azure-openai``).
        """
        _adapter_methods(adapter)
        try:
            loop: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._native.register_adapter(name, _HostAdapter(adapter, loop))

    def add_interceptor(
        self,
        before: Optional[_Before] = None,
        after: Optional[_After] = None,
        *,
        name: Optional[str] = None,
        services: Union[str, Sequence[str], None] = None,
        level: Optional[_Level] = None,
        want_body: bool = False,
    ) -> str:
        """Adds an interceptor: your own rule on every call (a tenant header, a field one
        partner needs, a response header to log, a ``200`` that is really an error). Returns
        its name.

        ``before(request)`` gets an ``InterceptedRequest`` (method, service, endpoint, path,
        query and headers as pairs, body bytes, json, attempt, provider, trace_id) and returns
        ``None`` or changes: ``{"headers": {name: value or None}, "query": {name: value or
        None}, "path": "/...", "json": value, "body": bytes, "secret": [header names]}``
        (``None`` removes; a header named in ``secret`` is redacted and scrubbed from errors
        like a credential). Raising refuses the call: nothing is sent.
        ``after(response)`` gets an ``InterceptedResponse`` (status, headers, elapsed_ms,
        attempt, provider, trace_id; body and json only with ``want_body=True``, on buffered
        calls) and returns ``None``; ``raise harness.Reject("...", retryable=True,
        code="BUSY")`` fails the answer (a retryable one goes through the retry rules as a 503
        would).

        Either may be an ``async def``: the coroutine runs on the event loop running when
        ``add_interceptor`` is called, or under ``asyncio.run`` on a thread of its own when
        there is none. A plain function runs on a thread of its own, never on an event loop
        or an engine thread, so one that blocks holds up only its own call.

        ``name`` defaults to the function's ``__name__`` (letters, digits, ``-``, ``_`` and
        ``.`` kept, the rest ``_``); adding a name again replaces that interceptor in its
        place. ``services`` (a name or a list) limits it to calls to those services or
        routes. ``level`` is ``"application"`` (the default: once per call) or ``"attempt"``
        (on every attempt: retries, hedges, failover), unless ``interceptors.levels`` in the
        config names it. Each call is bounded by ``interceptors.timeout_ms`` and the call's
        deadline; one that raises, hangs or returns a change that may not be made (framing
        headers, a ``..`` path, a body over ``limits.max_request_bytes``) fails the call with
        ``InterceptorError`` (``code`` ``raised``, ``timeout``, ``invalid`` or the Reject's).
        ``ConfigError`` for bad arguments.
        """
        for field, fn in (("before", before), ("after", after)):
            if fn is not None and not callable(fn):
                raise ConfigError(f"{field}: expected a callable, got {type(fn).__name__}")
        if before is None and after is None:
            raise ConfigError("add_interceptor: give `before`, `after` or both")
        if name is None:
            name = _default_name(before if before is not None else after)
        try:
            loop: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        host = _HostInterceptor(before, after, loop)
        self._native.add_interceptor(name, host, level, services, before is not None, after is not None, bool(want_body))
        return name

    def remove_interceptor(self, name: str) -> bool:
        """Removes the interceptor of this name; whether there was one. Calls already past
        it are not affected."""
        return self._native.remove_interceptor(name)

    def _view(self, name: str, args: List[Optional[str]]) -> Any:
        # The generated ClientViews methods (routing_state, credentials_state, ...) ask here.
        return self._native.view(name, args)

    def set_weight(self, route: str, provider: str, weight: int) -> str:
        """Sets a provider's weight (0 stops its traffic) as a reload would: validated, with a
        ``config_reloaded`` event; returns the new ``config_version``. ``ConfigError`` for an
        unknown route or provider."""
        return self._native.set_weight(route, provider, weight)

    def mock(
        self,
        service: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        status: int = 200,
        body: Optional[str] = None,
        headers: Any = None,
        latency_ms: int = 0,
    ) -> None:
        """Answers ``service``'s requests from this rule instead of the network, for unit tests.

        ``method`` is an HTTP method, or ``""``/``"*"`` for any; ``path`` is a template relative
        to the service's base URL (``/orders/{id}``) or ``"*"``. ``{id}`` in the strings of
        ``json`` (or in ``body``) becomes the captured segment. The answer is ``status`` with
        ``json`` (sent as ``json=`` is, with ``content-type: application/json``) or a text
        ``body``, ``headers`` (a mapping or pairs), after ``latency_ms``. The latest rule
        matching wins, then the config's ``mock.services`` rules; a request none matches raises
        ``ConfigError`` naming its method and path. Timeouts, retries, the breaker, metrics,
        events and schema validation run as for a real answer. Mocks stay across reloads until
        ``clear_mocks``. ``ConfigError`` naming the field for an unknown service, a path not
        starting with ``/``, a status below 200, or both ``json`` and ``body``.
        """
        self._native.mock(service, method, path, status, latency_ms, json, body, headers)

    def clear_mocks(self, service: Optional[str] = None) -> None:
        """Removes the mocks set by ``mock`` for ``service`` (every service when ``None``): its
        requests reach the network again, unless mock mode is on in the config."""
        self._native.clear_mocks(service)

    def cache_clear(self, name: Optional[str] = None) -> int:
        """Drops the stored answers of ``name``, a service or a route (its HTTP cache entries, or
        its exact chat answers), or of every service and route when ``None``; returns how many
        were dropped. The next call fetches again. ``ConfigError`` for an unknown name."""
        return self._native.cache_clear(name)

    def flush(self) -> None:
        """Delivers this client's queued log records, events and audit records now (otherwise
        they go out on their own thread a moment after each request)."""
        self._native.flush()

    def metrics(self) -> str:
        """This client's metrics in the Prometheus text format."""
        return self._native.metrics()

    def breaker_state(self, service: str, method: str, path: str, endpoint: Optional[str] = None) -> str:
        """The circuit breaker state for (service, endpoint, method): ``closed``, ``open`` or ``half_open``.

        ``endpoint`` defaults to the template of ``path`` (IDs collapsed to ``{id}``).
        """
        return self._native.breaker_state(service, method, path, endpoint)

    def bulkhead_limit(self, service: str) -> int:
        """The bulkhead's current concurrency limit on ``service``: ``max_concurrency``, or
        for an adaptive bulkhead the limit it has settled on now. ``ConfigError`` for an
        unknown service."""
        return self._native.bulkhead_limit(service)

    def bulkhead_in_use(self, service: str) -> int:
        """Bulkhead permits currently held on ``service`` (0 at rest)."""
        return self._native.bulkhead_in_use(service)

    def close(self) -> None:
        """Refuses new requests (requests in flight finish), stops watching the config file,
        and delivers this client's queued log records and events."""
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
        principal: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline and returns its ``Response``.

        ``params`` and ``headers`` are a mapping or a list of pairs; ``json`` is a
        JSON-serialisable value and ``content`` raw bytes (not both).
        ``timeout_ms`` overrides the service's total timeout. ``traceparent`` (or a
        ``traceparent`` header) continues a W3C trace; without one, the host's active
        OpenTelemetry span, if any, is the parent. ``principal`` names who the call is made
        for (a user or tenant id, 1 to 256 characters, no control characters): it goes into
        the audit record only, never downstream. Raises a ``HarnessError`` subclass on failure.
        """
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        return Response(
            *self._native.call(
                "request",
                None,
                None,
                service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent, principal
            )
        )

    def stream(
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
        principal: Optional[str] = None,
    ) -> "_StreamCall":
        """A streamed request, for a ``with`` block: ``with client.stream("svc", "GET", "/x") as r:``
        then ``r.iter_bytes()`` or ``r.iter_lines()``.

        Same arguments as ``request``. The request is sent on entering the block, which gets the
        ``StreamResponse`` once the head arrived (an error status raises ``HttpStatusError``
        there). ``timeouts.idle_ms`` bounds the wait for each chunk, the total timeout the whole
        body. Leaving the block frees the connection and the permit at once.
        """
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        args = (service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent, principal)
        native = self._native
        return _StreamCall(lambda: native.call("stream", None, None, *args))

    def chat(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Any = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatResponse:
        """One chat answer on an ``openai-compatible`` route: the route picks the provider, fails
        over, normalises the parameters per provider and prices the answer.

        ``messages`` is the chat-completions list (``[{"role": "user", "content": "..."}]``);
        any other keyword argument is a chat-completions parameter sent in the body
        (``temperature=0.2``, ``max_tokens=64``, ``tools=[...]``; ``model`` is set per provider).
        ``extra_body`` holds parameters that cannot be keywords (a name such as ``timeout_ms``);
        ``extra_headers`` (a mapping or pairs) are HTTP headers, ``timeout_ms`` bounds the whole
        call, ``traceparent`` continues a trace (else the active OpenTelemetry span is the
        parent), ``principal`` names who the call is made for (in the audit record only).
        Raises a ``HarnessError`` subclass on failure (``NoHealthyProviderError``
        lists each provider's last error in ``provider_errors``).
        """
        if traceparent is None:
            traceparent, extra_headers = _otel.parent(extra_headers)
        args = (route, messages, _chat_params(extra_body, params), extra_headers, timeout_ms, traceparent, principal)
        return ChatResponse._from(self._native.chat("chat", None, None, *args))

    def chat_stream(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Any = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatStream:
        """A streamed chat answer: returns once a provider answered (errors before that raise
        here); iterate the ``ChatStream`` for ``ChatChunk`` objects. Same arguments as ``chat``.

        ``for chunk in client.chat_stream("chat", messages): ...``, or in a ``with`` block.
        Leaving the loop early cancels the answer.
        """
        if traceparent is None:
            traceparent, extra_headers = _otel.parent(extra_headers)
        args = (route, messages, _chat_params(extra_body, params), extra_headers, timeout_ms, traceparent, principal)
        return ChatStream(self._native.chat("chat_stream", None, None, *args))

    def embed(
        self,
        route: str,
        inputs: Union[List[str], Tuple[str, ...]],
        dimensions: Optional[int] = None,
        *,
        headers: Any = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> EmbedResponse:
        """The embedding vectors of ``inputs`` (a list of strings) on a route of
        ``kind: embeddings``: one ``array('f')`` per input, in input order, in ``vectors``.

        The inputs are split into batches no larger than every provider of the route takes
        (``providers[].max_batch``, else its format's limit); each batch is one routed call
        (failover, breakers, cost), and a batch that fails fails the call (no partial result).
        ``dimensions`` asks for shorter vectors, for models that can give them. ``headers`` (a
        mapping or pairs) are HTTP headers, ``timeout_ms`` bounds each batch, ``traceparent``
        continues a trace (else the active OpenTelemetry span is the parent), ``principal``
        names who the call is made for (in the audit record only).

        ``ConfigError`` naming the field for bad input (``inputs: expected a list of strings``,
        an empty list or an empty text) or a route not of ``kind: embeddings``; otherwise a
        ``HarnessError`` subclass as for ``chat``.
        """
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        args = (route, inputs, dimensions, headers, timeout_ms, traceparent, principal)
        return EmbedResponse._from(self._native.embed(None, None, *args))

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
        principal: Optional[str] = None,
    ) -> Response:
        """Sends one request through the Harness pipeline and returns its ``Response``.

        Same arguments as ``Client.request``. Raises a ``HarnessError`` subclass on failure.
        """
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        loop = asyncio.get_running_loop()
        bridge = _BRIDGES.get(loop) or _bridge(loop)
        future = loop.create_future()
        pending = self._native.call(
            "request", bridge, future, service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent, principal
        )
        try:
            reply = await future
        except BaseException:
            pending.cancel()  # asyncio cancel (or any interruption) drops the Rust future
            raise
        return Response(*reply)

    def stream(
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
        principal: Optional[str] = None,
    ) -> "_AsyncStreamCall":
        """A streamed request, for an ``async with`` block: ``async with aclient.stream("svc",
        "GET", "/x") as r:`` then ``r.aiter_bytes()`` or ``r.aiter_lines()``.

        Same arguments as ``request``. Leaving the block or cancelling the task frees the
        connection and the permit at once.
        """
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        args = (service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent, principal)
        return _AsyncStreamCall(self._native, args)

    async def chat(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Any = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> ChatResponse:
        """One chat answer on an ``openai-compatible`` route; same arguments as ``Client.chat``.
        Cancelling the task cancels the call in Rust and frees its permits."""
        if traceparent is None:
            traceparent, extra_headers = _otel.parent(extra_headers)
        args = (route, messages, _chat_params(extra_body, params), extra_headers, timeout_ms, traceparent, principal)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._native.chat("chat", _bridge(loop), future, *args)
        try:
            reply = await future
        except BaseException:
            pending.cancel()  # asyncio cancel (or any interruption) drops the Rust future
            raise
        return ChatResponse._from(reply)

    def chat_stream(
        self,
        route: str,
        messages: Messages,
        /,
        *,
        extra_headers: Any = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
        **params: Any,
    ) -> AsyncChatStream:
        """A streamed chat answer: ``async for chunk in aclient.chat_stream("chat", messages):``
        (or ``async with``, or ``stream = await aclient.chat_stream(...)`` to open it first).
        Same arguments as ``Client.chat``. The call is sent when the stream is first awaited,
        entered or iterated, and its errors (bad arguments included) raise there. Leaving the
        loop early or cancelling the task cancels the answer."""
        if traceparent is None:
            traceparent, extra_headers = _otel.parent(extra_headers)
        args = (route, messages, _chat_params(extra_body, params), extra_headers, timeout_ms, traceparent, principal)
        return AsyncChatStream(self._native, args)

    async def embed(
        self,
        route: str,
        inputs: Union[List[str], Tuple[str, ...]],
        dimensions: Optional[int] = None,
        *,
        headers: Any = None,
        timeout_ms: Optional[float] = None,
        traceparent: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> EmbedResponse:
        """The embedding vectors of ``inputs`` on a route of ``kind: embeddings``; same
        arguments and answer as ``Client.embed``. Cancelling the task cancels the call in Rust
        (every batch) and frees its permits."""
        if traceparent is None:
            traceparent, headers = _otel.parent(headers)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._native.embed(_bridge(loop), future, route, inputs, dimensions, headers, timeout_ms, traceparent, principal)
        try:
            reply = await future
        except BaseException:
            pending.cancel()  # asyncio cancel (or any interruption) drops the Rust future
            raise
        return EmbedResponse._from(reply)

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


# The idempotent receiver (imported last: its async calls use this module's `_bridge`).
from ._idempotency import AsyncIdempotency as AsyncIdempotency, Claim as Claim, Idempotency as Idempotency  # noqa: E402

for _cls in (Idempotency, AsyncIdempotency, Claim):
    _cls.__module__ = __name__  # public as harness.Idempotency, ...
del _cls
