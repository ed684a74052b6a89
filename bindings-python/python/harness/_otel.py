"""The host's active OpenTelemetry span as the parent of Harness's span.

A call that names no trace itself (no ``traceparent=`` argument, no ``traceparent`` header)
made while the host has an active, valid OpenTelemetry span carries that span's W3C
``traceparent`` to the core, which makes its own span a child of it. The ``opentelemetry``
package is optional: without it, or without an active span, calls are unchanged. The context
is read when the call is made (for asyncio, the calling task's ``contextvars`` context).
"""

from collections.abc import Mapping
from typing import Any, Callable, Optional, Tuple

# `opentelemetry.trace.get_current_span` once looked up, `None` when the package is not
# installed; the import is tried on the first call only, so without it a call costs two checks.
_get_current_span: Optional[Callable[[], Any]]


def _unresolved() -> Any:
    global _get_current_span
    try:
        from opentelemetry.trace import get_current_span
    except ImportError:
        _get_current_span = None
        return None
    _get_current_span = get_current_span
    return get_current_span()


_get_current_span = _unresolved

# The last span context seen and its traceparent, `None` when invalid (span contexts are immutable).
_last: Tuple[Any, Optional[str]] = (None, None)


def parent(headers: Any) -> Tuple[Optional[str], Any]:
    """``(traceparent, headers)`` for a call with no ``traceparent=`` argument: the active
    span's ``traceparent`` (``None`` without one, or when ``headers`` name a trace), and the
    headers to send (a one-shot iterable of pairs comes back as a list, read twice)."""
    get = _get_current_span
    if get is None:
        return None, headers
    span = get()
    if span is None:
        return None, headers
    ctx = span.get_span_context()
    global _last
    last = _last  # one read: another thread may replace it
    if ctx is last[0]:  # the calls of one span (or of none: the invalid context) share it
        value = last[1]
    else:
        value = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{'01' if ctx.trace_flags.sampled else '00'}" if ctx.is_valid else None
        _last = (ctx, value)
    if value is None or headers is None:
        return value, headers
    headers = _replayable(headers)
    return (None if _names_trace(headers) else value), headers


def _replayable(headers: Any) -> Any:
    if type(headers) in (dict, list, tuple) or isinstance(headers, (Mapping, str, bytes)) or hasattr(headers, "items"):
        return headers
    try:
        return list(headers)
    except TypeError:
        return headers  # not iterable: the core says so, naming the field


def _names_trace(headers: Any) -> bool:
    """Whether the caller's headers carry a ``traceparent`` (which the core then continues)."""
    if type(headers) is dict:
        return any(type(k) is str and len(k) == 11 and k.lower() == "traceparent" for k in headers)
    if isinstance(headers, (str, bytes)):
        return False
    try:
        pairs = headers.items() if hasattr(headers, "items") else headers
        return any(isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and p[0].lower() == "traceparent" for p in pairs)
    except Exception:  # noqa: BLE001 - malformed headers: the core raises the ConfigError
        return False
