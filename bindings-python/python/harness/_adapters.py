"""Host adapters (``client.register_adapter(name, adapter)``): how a Python object is called.

The native module calls a ``HostAdapter`` on a thread of its own for each step of a provider's
call (never an asyncio loop's thread, never a runtime worker); the core decides when, within
the call's deadline, and checks what comes back.
"""

import asyncio
import inspect
import json as _json
from typing import Any, Awaitable, Callable, Dict, Optional, Protocol, Union

STEPS = ("build_request", "parse_response", "parse_stream_event")
"""The methods a host adapter has, in the order a call uses them."""


class Adapter(Protocol):
    """What ``register_adapter`` takes: an object with these three methods, each a plain
    method or an ``async def``. Each gets a dict and returns a dict (JSON values only).

    ``build_request(request)``: ``request`` is ``{"request": <the chat-completions body, model
    set>, "provider": {"id", "model"}, "stream": bool}``; returns ``{"path": "/...", "body":
    <JSON>, "headers": {"name": "value"}}`` (``headers`` optional), posted to the provider's
    service (its base URL, auth and resilience apply).

    ``parse_response(response)``: ``response`` is ``{"status", "headers": {...}, "body": <text>}``;
    returns ``{"content", "tool_calls": [{"id", "name", "arguments"}], "finish_reason", "usage":
    {"prompt_tokens", "completion_tokens", "cached_tokens"}, "model"}`` (all but ``content``
    optional) or ``{"error": {"code", "message"}}`` with a common code (``overloaded``,
    ``rate_limited``, ``invalid_request``...), which is also how an error status gets its code.

    ``parse_stream_event(event)``: ``event`` is ``{"event", "data"}``, one server-sent event;
    returns ``None`` (nothing for the caller), ``{"content", "tool_calls": [{"index", "id",
    "name", "arguments"}], "finish_reason", "usage", "done": bool}`` (all optional) or
    ``{"error": {"code", "message"}}``.
    """

    def build_request(self, request: Dict[str, Any], /) -> Union[Dict[str, Any], Awaitable[Dict[str, Any]]]:
        """The provider's request: ``{"path", "body", "headers"?}`` for ``{"request", "provider", "stream"}``."""
        ...

    def parse_response(self, response: Dict[str, Any], /) -> Union[Dict[str, Any], Awaitable[Dict[str, Any]]]:
        """The answer (``{"content", ...}``) or ``{"error": {"code", "message"}}`` for ``{"status", "headers", "body"}``."""
        ...

    def parse_stream_event(
        self, event: Dict[str, Any], /
    ) -> Union[Optional[Dict[str, Any]], Awaitable[Optional[Dict[str, Any]]]]:
        """What one server-sent event ``{"event", "data"}`` says: ``None``, a piece, ``{"done": True, ...}`` or an error."""
        ...


def methods(adapter: Any) -> None:
    """Raises ``ConfigError`` naming the first of the three methods ``adapter`` lacks."""
    from ._errors import ConfigError

    for step in STEPS:
        if not callable(getattr(adapter, step, None)):
            raise ConfigError(
                f"adapter.{step}: missing; a host adapter has the methods {', '.join(STEPS)} "
                f"(got {type(adapter).__name__})"
            )


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _text(value: Any) -> str:
    # allow_nan=False: NaN is not JSON, and the error then names the step that returned it.
    return _json.dumps(value, allow_nan=False)


class HostAdapter:
    """Calls ``adapter.<step>(json.loads(input))`` and hands ``json.dumps`` of its answer to
    ``deliver(ok, value)`` (or ``deliver(False, exception)``).

    An awaitable answer runs on the loop that was running at ``register_adapter`` (the
    calling thread does not wait for it), or, with no such loop (or one no longer running),
    under ``asyncio.run`` on the calling thread.
    """

    __slots__ = ("_adapter", "_loop")

    def __init__(self, adapter: Any, loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self._adapter = adapter
        self._loop = loop

    def __call__(self, step: str, text: str, deliver: Callable[[bool, Any], None]) -> None:
        try:
            if step not in STEPS:
                raise ValueError(f"unknown step {step!r}")
            result = getattr(self._adapter, step)(_json.loads(text))
            if inspect.isawaitable(result):
                loop = self._loop
                if loop is None or loop.is_closed() or not loop.is_running():
                    result = asyncio.run(_await(result))
                else:
                    future = asyncio.run_coroutine_threadsafe(_await(result), loop)
                    future.add_done_callback(lambda f: _settle(f, deliver))
                    return
            out = _text(result)
        except Exception as e:  # noqa: BLE001 - the core reports it, naming the adapter and the step
            deliver(False, e)
            return
        deliver(True, out)

    def __repr__(self) -> str:
        return f"<harness HostAdapter {type(self._adapter).__name__}>"


def _settle(future: Any, deliver: Callable[[bool, Any], None]) -> None:
    if future.cancelled():
        deliver(False, asyncio.CancelledError("the adapter's coroutine was cancelled"))
        return
    e = future.exception()
    if e is not None:
        deliver(False, e)
        return
    try:
        out = _text(future.result())
    except Exception as e:  # noqa: BLE001 - as above
        deliver(False, e)
        return
    deliver(True, out)
