"""The idempotent receiver: a handler runs at most once per message id, across a fleet.

The core owns the state machine (claims, leases, fencing, TTLs, the Redis scripts, the
store-down policy, signatures); this module only composes its three calls, claim ->
handler -> complete (the handler returned) or fail (it raised), for ``with``/``run`` and
their asyncio forms. Results are stored as JSON text, written by the same walk as a
``json=`` body and read back with ``json.loads``.
"""

import asyncio
import inspect
import json as _json
from collections.abc import Mapping
from typing import Any, Awaitable, Callable, Optional, TypeVar, Union, cast

from . import _native
from ._errors import ConfigError, HarnessError

_T = TypeVar("_T")


class Claim:
    """One delivery's claim of a key, from ``with idem.claim(key) as c:`` (or ``async with``).

    - ``c.done`` is ``True`` when the message was processed before: ``c.result`` is the stored
      result, the handler must not run, and leaving the block changes nothing.
    - Otherwise this delivery holds the key (for ``lease_ms``): run the handler and set
      ``c.result = value``. Leaving the block normally stores ``c.result`` (as JSON; ``None``
      if never set) and then ``c.result`` is the value as stored; leaving it with an exception
      marks the key failed (a redelivery may run it again when ``retry_failed``) and the
      exception propagates.
    """

    __slots__ = {
        "key": "The claimed key.",
        "done": "Whether the message was processed before this delivery (``result`` is the stored result).",
        "result": "The stored result when ``done``; otherwise set it to the handler's result inside the block.",
        "deduplicated": "``False`` when the store was down and ``on_store_down: process`` let the handler run without dedup.",
        "_lease": "",
    }

    key: str
    done: bool
    result: Any
    deduplicated: bool

    def __init__(self, key: str, outcome: Any) -> None:
        self.key = key
        if isinstance(outcome, bytes):
            self.done, self.result, self.deduplicated, self._lease = True, _loads(outcome), True, None
        else:
            self.done, self.result, self.deduplicated, self._lease = False, None, outcome.deduplicated, outcome

    def __repr__(self) -> str:
        state = "done" if self.done else "claimed" if self.deduplicated else "claimed (not deduplicated)"
        return f"<harness.Claim {self.key!r} {state}>"


def _loads(text: bytes) -> Any:
    return _json.loads(text)


class _Receiver:
    __slots__ = ("_native",)

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        """Builds a receiver from its config dict (``None``: every default, in memory); bad
        config raises ``ConfigError`` naming the field.

        Keys: ``prefix`` (``harness:idem:``), ``ttl_ms`` (24 h: how long a result is kept),
        ``lease_ms`` (30 s: how long a claim holds before another delivery may take over),
        ``retry_failed`` (``True``), ``redis_url`` (a fleet; without it, this process's memory),
        ``on_store_down`` (``reject`` or ``process``), ``signature: {secret: {env|file|value},
        max_skew_ms}``.
        """
        self._native = _native.Idempotency(config)

    def key(self, tenant: str, event_type: str, msg_id: str) -> str:
        """``{prefix}{tenant}:{event_type}:{msg_id}``. Each part is printable text of 1 to 256
        characters, else ``ConfigError`` naming the part (``msg_id: ...``)."""
        return self._native.key(tenant, event_type, msg_id)

    def verify(self, timestamp: Union[str, int], body: Union[bytes, bytearray, memoryview, str], signature: str) -> None:
        """Checks a signed delivery before anything runs: ``signature`` is the hex HMAC-SHA256
        of ``{timestamp}.{body}`` (``sha256=`` prefix allowed), ``timestamp`` Unix seconds within
        ``signature.max_skew_ms`` of now. Raises ``AuthError`` with ``code`` ``bad_signature`` or
        ``stale_signature``; ``ConfigError`` when the receiver has no ``signature`` config."""
        self._native.verify(_timestamp(timestamp), body, signature)

    def sign(self, timestamp: Union[str, int], body: Union[bytes, bytearray, memoryview, str]) -> str:
        """The hex signature of ``{timestamp}.{body}`` that ``verify`` accepts (for senders and tests)."""
        return self._native.sign(_timestamp(timestamp), body)

    def metrics_text(self) -> str:
        """This receiver's counters, ``harness_idempotency_total{outcome}``, in the Prometheus text format."""
        return self._native.metrics()

    def __repr__(self) -> str:
        # The core's Debug: prefix, backend and whether a signature is set; never the secret or the URL.
        return f"<harness.{type(self).__name__} {self._native!r}>"


def _timestamp(timestamp: Any) -> Any:
    return str(timestamp) if isinstance(timestamp, int) and not isinstance(timestamp, bool) else timestamp


def _not_awaitable(value: Any) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "coroutine was never awaited" warning
        raise ConfigError("fn: returned an awaitable; use harness.AsyncIdempotency for async handlers")
    return value


class Idempotency(_Receiver):
    """The idempotent receiver (webhooks, event consumers): a handler runs at most once per key
    across every process sharing the store. Thread-safe: share one across threads.

    ``idem.run(key, fn)`` calls ``fn()`` unless the key was processed before, stores its result
    and returns it; or, for more control, ``with idem.claim(key) as c:`` (see ``Claim``).
    Per key: absent -> claimed (for ``lease_ms``) -> processed (the result is kept ``ttl_ms``)
    or failed. Waits on the store release the GIL, and Ctrl-C interrupts them.

    Raised on claiming, before ``fn`` runs: ``DuplicateInFlightError`` (another delivery holds
    the key; ``retry_after_ms`` is its lease left), ``HarnessError`` with ``code``
    ``failed_before`` (the message failed and ``retry_failed`` is off) or ``store_unavailable``
    (the store is down and ``on_store_down: reject``). After ``fn`` returned: ``HarnessError``
    with ``code`` ``lease_lost`` (``fn`` outlived its lease and another delivery took the key
    over: this result is not stored) or ``store_unavailable``.
    """

    __slots__ = ()

    def claim(self, key: str) -> "_ClaimBlock":
        """A ``with`` block holding ``key``: entering claims it and gives a ``Claim`` (or raises
        ``DuplicateInFlightError``, ...); leaving stores ``c.result`` or, on an exception, marks
        the key failed. ``with idem.claim(key) as c:`` then ``if not c.done: c.result = handle()``."""
        return _ClaimBlock(self._native, key)

    def run(self, key: str, fn: Callable[[], _T]) -> _T:
        """Calls ``fn()`` at most once for ``key`` across the fleet and returns its result as
        stored (JSON: tuples come back as lists, dict keys as strings), or, for a key processed
        before, the stored result without calling ``fn``; so every delivery gets an equal value.
        The result must be JSON-serialisable like a ``json=`` body (else ``ConfigError``, and the
        key is marked failed). An exception from ``fn`` marks the key failed and propagates."""
        with self.claim(key) as c:
            if not c.done:
                c.result = _not_awaitable(fn())
        return cast(_T, c.result)


class _ClaimBlock:
    __slots__ = ("_native", "_key", "_claim")

    def __init__(self, native: Any, key: str) -> None:
        self._native = native
        self._key = key
        self._claim: Optional[Claim] = None

    def __enter__(self) -> Claim:
        self._claim = Claim(self._key, self._native.claim(self._key))
        return self._claim

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        c = self._claim
        if c is None or c.done:
            return
        native, lease = self._native, c._lease
        if exc_type is None:
            try:
                text = native.encode(c.result)
            except BaseException:
                _fail_quietly(native, lease)
                raise
            native.complete(lease, text)
            c.result = _loads(text)
        else:
            _fail_quietly(native, lease)


def _fail_quietly(native: Any, lease: Any) -> None:
    # What the handler raised is the error worth seeing; a failure that cannot be recorded
    # (store down) ends with the lease anyway.
    try:
        native.fail(lease)
    except HarnessError:
        pass


class AsyncIdempotency(_Receiver):
    """The idempotent receiver for asyncio: ``Idempotency`` with awaitable calls.

    ``await idem.run(key, fn)`` awaits ``fn()`` (an ``async def``, or a function returning a
    value or an awaitable) at most once per key across the fleet; ``async with idem.claim(key)
    as c:`` is the block form. The store is reached on the Rust core's runtime, never blocking
    the loop. Cancelling the task while the handler runs marks the key failed (so a
    redelivery may run it) and the cancel propagates. Same semantics and errors as ``Idempotency``.
    """

    __slots__ = ()

    def claim(self, key: str) -> "_AsyncClaimBlock":
        """An ``async with`` block holding ``key``; see ``Idempotency.claim`` and ``Claim``."""
        return _AsyncClaimBlock(self._native, key)

    async def run(self, key: str, fn: Callable[[], Union[Awaitable[_T], _T]]) -> _T:
        """Awaits ``fn()`` at most once for ``key`` and returns its result as stored, or the stored
        result of a key processed before without calling ``fn``; see ``Idempotency.run``."""
        async with self.claim(key) as c:
            if not c.done:
                value = fn()
                c.result = (await value) if inspect.isawaitable(value) else value
        return cast(_T, c.result)


async def _call(start: Callable[..., Any], *args: Any) -> Any:
    """Runs one native call on the core's runtime; its outcome resolves a future on this loop."""
    from . import _bridge  # the loop's completion queue, shared with the clients

    loop = asyncio.get_running_loop()
    future = loop.create_future()
    pending = start(_bridge(loop), future, *args)
    try:
        return await future
    except BaseException:
        pending.cancel()  # an asyncio cancel drops the Rust future
        raise


class _AsyncClaimBlock:
    __slots__ = ("_native", "_key", "_claim")

    def __init__(self, native: Any, key: str) -> None:
        self._native = native
        self._key = key
        self._claim: Optional[Claim] = None

    async def __aenter__(self) -> Claim:
        self._claim = Claim(self._key, await _call(self._native.claim_async, self._key))
        return self._claim

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        c = self._claim
        if c is None or c.done:
            return
        native, lease = self._native, c._lease
        if exc_type is None:
            try:
                text = native.encode(c.result)
            except BaseException:
                await _afail_quietly(native, lease)
                raise
            await _call(native.complete_async, lease, text)
            c.result = _loads(text)
        else:
            await _afail_quietly(native, lease)


async def _afail_quietly(native: Any, lease: Any) -> None:
    try:
        await _call(native.fail_async, lease)
    except HarnessError:
        pass
