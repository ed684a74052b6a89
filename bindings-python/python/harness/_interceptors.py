"""Interceptors (``client.add_interceptor(before, after)``): how Python functions are called.

The native module calls a ``HostInterceptor`` on a thread of its own for each ``before`` and
``after`` (never an asyncio loop's thread, never a runtime worker); the core decides when,
bounds each call by ``interceptors.timeout_ms`` and the call's deadline, and checks every
change as it checks a caller's input. This module only translates: JSON text in, a request
or response object to the function, JSON text of its changes (or of a ``Reject``) out.
"""

import asyncio
import base64
import inspect
import json as _json
import re
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Tuple, Union, cast

from ._types import InterceptedRequest as _RequestView
from ._types import InterceptedResponse as _ResponseView
from ._types import Level, Rejection, RequestChanges

PHASES = ("before", "after")


class Reject(Exception):
    """Raised by an interceptor's ``after`` to fail the answer it sees (e.g. a partner's ``200``
    carrying an error code): the call raises ``InterceptorError`` with ``code`` (default
    ``rejected``) and the answer's ``status``. ``retryable=True`` puts it through the retry
    rules as a 503 would be (an attempt interceptor's rejected attempt is retried or fails
    over; a POST that was answered is still not resent unless idempotent or keyed)."""

    message: str
    retryable: bool
    code: Optional[str]

    def __init__(self, message: str, *, retryable: bool = False, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = str(message)
        self.retryable = bool(retryable)
        self.code = code

    def __repr__(self) -> str:
        return f"Reject({self.message!r}, retryable={self.retryable!r}, code={self.code!r})"


class _Body:
    """Body bytes decoded from the wire's base64 on first use (most interceptors never look)."""

    __slots__ = ("_b64", "_bytes")

    def __init__(self, b64: Optional[str]) -> None:
        self._b64 = b64
        self._bytes: Optional[bytes] = None

    def get(self) -> Optional[bytes]:
        if self._bytes is None and self._b64 is not None:
            self._bytes = base64.b64decode(self._b64)
        return self._bytes


def _header(pairs: List[Tuple[str, str]], name: str) -> Optional[str]:
    name = name.lower()
    for k, v in pairs:
        if k.lower() == name:
            return v
    return None


class InterceptedRequest:
    """What ``before(request)`` sees: the request about to go out (credentials are added
    after, so they are not among the headers). An ``attempt`` interceptor sees each attempt's
    request, with its ``attempt`` number and, on a route, the ``provider`` being tried."""

    __slots__ = {
        "name": "The interceptor's name.",
        "level": "``application`` or ``attempt``.",
        "method": "The HTTP method.",
        "service": "The called service or route.",
        "endpoint": "The endpoint label (template).",
        "path": "The path, without the service's base path or the query.",
        "query": "Query parameters as ``(name, value)`` pairs, in order.",
        "headers": "Headers as ``(name, value)`` pairs, in order.",
        "json": "The body parsed, when it is JSON; else ``None``.",
        "attempt": "The attempt number (1 for the first) for an attempt interceptor; else ``None``.",
        "provider": "The route's provider of this attempt; else ``None``.",
        "trace_id": "The W3C trace id of the call.",
        "_body": "",
    }

    name: str
    level: Level
    method: str
    service: str
    endpoint: str
    path: str
    query: List[Tuple[str, str]]
    headers: List[Tuple[str, str]]
    json: Any
    attempt: Optional[int]
    provider: Optional[str]
    trace_id: str

    def __init__(self, v: _RequestView) -> None:
        self.name, self.level, self.method = v["name"], v["level"], v["method"]
        self.service, self.endpoint, self.path = v["service"], v["endpoint"], v["path"]
        self.query = [(k, x) for k, x in v["query"]]
        self.headers = [(k, x) for k, x in v["headers"]]
        self.json = v.get("json")
        self.attempt, self.provider, self.trace_id = v.get("attempt"), v.get("provider"), v["trace_id"]
        self._body = _Body(v.get("body_base64"))

    @property
    def body(self) -> Optional[bytes]:
        """The body as bytes (``None`` when there is none)."""
        return self._body.get()

    def header(self, name: str) -> Optional[str]:
        """The first value of a header, by case-insensitive name."""
        return _header(self.headers, name)

    def __repr__(self) -> str:
        # Header values may be secrets: names only.
        return (f"<InterceptedRequest {self.method} {self.service} {self.path} attempt={self.attempt} "
                f"headers={[k for k, _ in self.headers]!r} trace_id={self.trace_id}>")


class InterceptedResponse:
    """What ``after(response)`` sees: an answer's head, and its body only for an interceptor
    added with ``want_body=True`` (buffered calls; a stream shows its head only). An
    ``attempt`` interceptor sees each answer an attempt accepted (error statuses are errors,
    not answers); an ``application`` one the answer the caller gets."""

    __slots__ = {
        "name": "The interceptor's name.",
        "level": "``application`` or ``attempt``.",
        "method": "The HTTP method.",
        "service": "The called service or route.",
        "endpoint": "The endpoint label (template).",
        "status": "The HTTP status.",
        "headers": "Headers as ``(name, value)`` pairs, names in lower case.",
        "elapsed_ms": "Since the attempt was sent (an attempt interceptor) or the call started.",
        "json": "The body parsed, when it is JSON (with ``want_body``); else ``None``.",
        "attempt": "The attempt number for an attempt interceptor; else ``None``.",
        "provider": "The route's provider of this attempt; else ``None``.",
        "trace_id": "The W3C trace id of the call.",
        "_body": "",
    }

    name: str
    level: Level
    method: str
    service: str
    endpoint: str
    status: int
    headers: List[Tuple[str, str]]
    elapsed_ms: float
    json: Any
    attempt: Optional[int]
    provider: Optional[str]
    trace_id: str

    def __init__(self, v: _ResponseView) -> None:
        self.name, self.level, self.method = v["name"], v["level"], v["method"]
        self.service, self.endpoint, self.status = v["service"], v["endpoint"], v["status"]
        self.headers = [(k, x) for k, x in v["headers"]]
        self.elapsed_ms = v["elapsed_ms"]
        self.json = v.get("json")
        self.attempt, self.provider, self.trace_id = v.get("attempt"), v.get("provider"), v["trace_id"]
        self._body = _Body(v.get("body_base64"))

    @property
    def body(self) -> Optional[bytes]:
        """The body as bytes: only with ``want_body``, and only for a buffered answer."""
        return self._body.get()

    def header(self, name: str) -> Optional[str]:
        """The first value of a header, by case-insensitive name."""
        return _header(self.headers, name)

    def __repr__(self) -> str:
        return f"<InterceptedResponse [{self.status}] {self.service} attempt={self.attempt} trace_id={self.trace_id}>"


Changes = Mapping[str, Any]
"""What ``before`` may return besides ``None``: ``{"headers": {name: value or None}, "query":
{name: value or None}, "path": str, "json": value, "body": bytes, "secret": [header names]}``,
every key optional (``None`` as a value removes a header or parameter)."""

Before = Callable[[InterceptedRequest], Union[Optional[Changes], Awaitable[Optional[Changes]]]]
After = Callable[[InterceptedResponse], Union[None, Awaitable[None]]]


def default_name(fn: Any) -> str:
    """An interceptor's name from its function: ``__name__`` (else its type's), with anything
    but letters, digits, ``-``, ``_`` and ``.`` replaced by ``_`` (``<lambda>`` is ``lambda``)."""
    raw = getattr(fn, "__name__", None) or type(fn).__name__
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(raw)).strip("_")[:64] or "interceptor"


def _changes(out: Any) -> str:
    """The JSON text of what ``before`` returned: ``body`` bytes become ``body_base64``; any
    other shape crosses as it is, for the core to check and name."""
    if out is None:
        return "null"
    if isinstance(out, Mapping):
        wire: Dict[str, Any] = dict(out)
        if "body" in wire:
            body = wire.pop("body")
            if isinstance(body, str):
                body = body.encode("utf-8")
            if isinstance(body, (bytes, bytearray, memoryview)):
                body = base64.b64encode(bytes(body)).decode("ascii")
            if body is not None:  # None: no new body
                wire["body_base64"] = body
        # The wire form (the core checks it key by key and names what is wrong).
        return _json.dumps(cast(RequestChanges, wire), allow_nan=False)
    return _json.dumps(out, allow_nan=False)


def _rejection(r: Reject) -> str:
    fail: Rejection = {"message": r.message, "retryable": r.retryable, "code": r.code}
    return _json.dumps({"fail": fail})


def _answer(phase: str, out: Any) -> str:
    if phase == "before":
        return _changes(out)
    if isinstance(out, Reject):
        return _rejection(out)
    # `after` returns nothing; anything else crosses for the core to refuse (code `invalid`).
    return "null" if out is None else _json.dumps(out, allow_nan=False)


async def _await(awaitable: Any) -> Any:
    return await awaitable


class HostInterceptor:
    """Calls ``before(InterceptedRequest)`` or ``after(InterceptedResponse)`` for the core's
    JSON text and hands the JSON text of the answer to ``deliver(ok, value)`` (a ``Reject``
    raised by ``after`` is an answer; any other exception is ``deliver(False, exception)``).

    An awaitable answer runs on the loop that was running at ``add_interceptor`` (the calling
    thread does not wait for it), or, with no such loop (or one no longer running), under
    ``asyncio.run`` on the calling thread.
    """

    __slots__ = ("_before", "_after", "_loop")

    def __init__(self, before: Optional[Before], after: Optional[After], loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self._before = before
        self._after = after
        self._loop = loop

    def __call__(self, phase: str, text: str, deliver: Callable[[bool, Any], None]) -> None:
        try:
            if phase == "before" and self._before is not None:
                result: Any = self._before(InterceptedRequest(_json.loads(text)))
            elif phase == "after" and self._after is not None:
                result = self._after(InterceptedResponse(_json.loads(text)))
            else:
                raise ValueError(f"no {phase} function")
            if inspect.isawaitable(result):
                loop = self._loop
                if loop is None or loop.is_closed() or not loop.is_running():
                    result = asyncio.run(_await(result))
                else:
                    future = asyncio.run_coroutine_threadsafe(_await(result), loop)
                    future.add_done_callback(lambda f: _settle(phase, f, deliver))
                    return
            out = _answer(phase, result)
        except Reject as r:
            if phase != "after":
                deliver(False, r)  # `before` refuses the call by raising; a Reject is one way
                return
            out = _rejection(r)
        except Exception as e:  # noqa: BLE001 - the core reports it, naming the interceptor and the phase
            deliver(False, e)
            return
        deliver(True, out)

    def __repr__(self) -> str:
        fns = [getattr(f, "__name__", type(f).__name__) for f in (self._before, self._after) if f is not None]
        return f"<harness HostInterceptor {', '.join(fns)}>"


def _settle(phase: str, future: Any, deliver: Callable[[bool, Any], None]) -> None:
    if future.cancelled():
        deliver(False, asyncio.CancelledError("the interceptor's coroutine was cancelled"))
        return
    e = future.exception()
    if isinstance(e, Reject) and phase == "after":
        deliver(True, _rejection(e))
        return
    if e is not None:
        deliver(False, e)
        return
    try:
        out = _answer(phase, future.result())
    except Exception as e:  # noqa: BLE001 - as above
        deliver(False, e)
        return
    deliver(True, out)
