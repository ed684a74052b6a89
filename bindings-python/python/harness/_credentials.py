"""Host token providers (``auth: {type: callback}``): how a Python function is called.

The native module calls a ``TokenProvider`` on a thread of its own at each refresh (never
an asyncio loop's thread, never a runtime worker); the core decides when, how often and
for how long.
"""

import asyncio
import inspect
from typing import Any, Callable, Optional, Tuple


async def _await(awaitable: Any) -> Any:
    return await awaitable


class TokenProvider:
    """Calls ``fn()`` and hands its answer to ``deliver(ok, value)``.

    An awaitable answer runs on the loop that was running at ``set_token_provider`` (the
    calling thread does not wait for it), or, with no such loop, under ``asyncio.run`` on
    the calling thread.
    """

    __slots__ = ("_fn", "_loop")

    def __init__(self, fn: Callable[[], Any], loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self._fn = fn
        self._loop = loop

    def __call__(self, deliver: Callable[[bool, Any], None]) -> None:
        try:
            result = self._fn()
            if inspect.isawaitable(result):
                loop = self._loop
                if loop is None or loop.is_closed():
                    result = asyncio.run(_await(result))
                else:
                    future = asyncio.run_coroutine_threadsafe(_await(result), loop)
                    future.add_done_callback(lambda f: deliver(*_outcome(f)))
                    return
        except Exception as e:  # noqa: BLE001 - the core reports it as an AuthError
            deliver(False, e)
            return
        deliver(True, result)


def _outcome(future: Any) -> Tuple[bool, Any]:
    if future.cancelled():
        return False, asyncio.CancelledError("the token provider's coroutine was cancelled")
    e = future.exception()
    return (False, e) if e is not None else (True, future.result())
