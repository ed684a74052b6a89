"""Events as Python objects, coroutine listeners, and the ``logging`` sink.

The native module calls these on the client's event thread (never an asyncio loop's
thread, never a runtime worker), holding the GIL only for the call.
"""

import asyncio
import logging
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["Event"]


class Event:
    """Something the engine did: ``type`` names it, every other field is an attribute.

    Types and their fields (the same in every Harness language):

    - ``request_finished``: every field of the request log record (``service``,
      ``endpoint``, ``method``, ``status``, ``duration_ms``, ``attempts``,
      ``retry_count``, ``breaker``, ``streamed``, ``error_kind``, ``error_code``,
      ``error_message``, ``trace_id``, ``span_id``, ``client``, ``ts_ms``; and for a
      request that named a route, ``route``, ``provider``, ``model``, ``cost`` and
      ``fallback``, each present only when known);
    - ``retry_scheduled``: ``service``, ``endpoint``, ``method``, ``trace_id``,
      ``attempt``, ``delay_ms``, ``reason``, ``status``;
    - ``breaker_state_changed``: ``service``, ``endpoint``, ``method``, ``from``, ``to``
      (``from`` is a keyword: read it as ``event.to_dict()["from"]`` or ``getattr``);
    - ``bulkhead_rejected``: ``service``, ``endpoint``, ``method``, ``max_concurrency``;
    - ``config_reloaded``: ``version``, ``source``;
    - ``config_rejected``: ``version`` (the one still in force), ``source``, ``error``;
    - ``shared_state_unavailable``: ``service``, ``what``, ``error``;
    - ``provider_failover``: ``route``, ``from``, ``to``, ``trace_id``, ``reason`` (the
      error kind that made it move), ``status``, ``code``;
    - ``stream_restarted``: ``route``, ``from``, ``to``, ``trace_id``, ``reason``, ``mode``
      (``hidden``, ``restart`` or ``continue``);
    - ``stream_chunk_skipped``: ``route``, ``provider``, ``trace_id``, ``reason``;
    - ``fallback_served``: ``route``, ``kind`` (``cache`` or ``static``), ``trace_id``;
    - ``schema_violation``: ``service``, ``endpoint``, ``method``, ``trace_id``,
      ``violation``, ``mode`` (``enforce`` or ``warn``);
    - ``audit_record`` (with ``audit: {sink: {listener: true}}``): ``ts_ms``, ``client``,
      ``principal`` (when the call named one), ``service`` (or the route), ``provider``
      (routes), ``endpoint``, ``method``, ``status``, ``outcome`` (``ok`` or the error
      name), ``attempts``, ``duration_ms``, ``cost`` (when priced), ``trace_id``, and with
      ``include_bodies: true`` ``request_body`` and ``response_body`` (masked, as plain
      JSON values: dicts, lists, strings...).
    """

    # A dict of slots documents each attribute (help(), inspect.getdoc).
    __slots__ = {"type": "The event's name (``request_finished``, ``retry_scheduled``, ...).", "_fields": ""}

    type: str

    def __init__(self, fields: Dict[str, Any]) -> None:
        self._fields = fields
        self.type = fields["type"]

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not slots or methods; private names are never fields
        # (pickle and copy probe for them before `_fields` exists).
        if not name.startswith("_"):
            try:
                return self._fields[name]
            except KeyError:
                pass
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __reduce__(self) -> Any:
        return (Event, (self._fields,))

    def to_dict(self) -> Dict[str, Any]:
        """The event as a plain dict, ``type`` included (what ``json.dumps`` takes)."""
        return dict(self._fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and other._fields == self._fields

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._fields.items() if k != "type")
        return f"<Event {self.type} {fields}>"


class _AsyncListener:
    """An ``async def`` listener: each call schedules the coroutine on the loop that was
    running at ``add_listener`` and returns at once (the event thread never waits on a loop).

    A coroutine that fails is re-raised at the next event, so the core reports it (once).
    """

    __slots__ = ("_fn", "_loop", "_failure")

    def __init__(self, fn: Callable[[Event], Any], loop: asyncio.AbstractEventLoop) -> None:
        self._fn = fn
        self._loop = loop
        self._failure: Optional[BaseException] = None

    def __call__(self, event: Event) -> None:
        failure, self._failure = self._failure, None
        coro = self._fn(event)
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except BaseException:
            coro.close()  # the loop is closed: never awaited, and no warning about it
            raise
        future.add_done_callback(self._done)
        if failure is not None:
            raise failure.with_traceback(None)

    def _done(self, future: "Any") -> None:
        if not future.cancelled() and future.exception() is not None and self._failure is None:
            self._failure = future.exception()


_LOGGER = logging.getLogger("harness")


def _log_record(event: Event) -> None:
    """The ``log: {sink: python}`` sink: one ``harness`` logger record per request, INFO on
    success and WARNING on error, with every field in ``extra`` as ``harness_<field>``."""
    r = event._fields
    level = logging.WARNING if r.get("error_kind") else logging.INFO
    if not _LOGGER.isEnabledFor(level):
        return
    attempts = r.get("attempts")
    outcome = r.get("error_kind") or r.get("status")
    if r.get("error_kind") and r.get("status") is not None:
        outcome = f"{outcome} (status {r['status']})"
    via = f", provider={r['provider']}" if r.get("provider") is not None else ""
    msg = "%s %s %s -> %s in %.1f ms (%s attempt%s%s, trace_id=%s)"
    args: Tuple[Any, ...] = (r.get("method"), r.get("service"), r.get("endpoint"), outcome, r.get("duration_ms") or 0.0, attempts, "" if attempts == 1 else "s", via, r.get("trace_id"))
    if r.get("error_message"):
        msg += ": %s"
        args += (r["error_message"],)
    extra = {f"harness_{k}": v for k, v in r.items() if k != "type"}
    _LOGGER.log(level, msg, *args, extra=extra)
