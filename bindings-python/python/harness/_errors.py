"""The Harness exception tree: the same names in every Harness language.

The native module raises these; every error carries the context a caller needs
(service, endpoint, method, attempts, status, code, retry_after_ms, trace_id, and for
routed calls provider and provider_errors).
"""

from typing import List, Optional, Sequence, Tuple



class HarnessError(Exception):
    """Base class of every Harness error.

    ``str(error)`` is a readable message with its context; it never contains
    header values, tokens or query strings.
    """

    service: Optional[str]
    endpoint: Optional[str]
    method: Optional[str]
    attempts: int
    status: Optional[int]
    code: Optional[str]
    retry_after_ms: Optional[int]
    trace_id: Optional[str]
    provider: Optional[str]
    provider_errors: List[Tuple[str, str]]
    message: str

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
        provider: Optional[str] = None,
        provider_errors: Sequence[Tuple[str, str]] = (),
    ) -> None:
        super().__init__(text)
        self.message = text if message is None else message
        self.service = service
        self.endpoint = endpoint
        self.method = method
        self.attempts = attempts
        self.status = status
        self.code = code
        self.retry_after_ms = retry_after_ms
        self.trace_id = trace_id
        # Routed calls: the provider whose answer this error is, and for
        # NoHealthyProviderError each provider with its last error (or why it was not tried).
        self.provider = provider
        self.provider_errors = [(p[0], p[1]) for p in provider_errors]
        self._phase = phase
        self._body = body

    @property
    def kind(self) -> str:
        """The stable error kind name, the same in every Harness language (e.g. ``TimeoutError``)."""
        for cls in type(self).__mro__:
            if cls.__name__ in _NAMES and cls.__module__ == "harness":
                return cls.__name__
        return "HarnessError"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class TimeoutError(HarnessError):
    """A timeout expired; ``phase`` says which: ``connect``, ``response``, ``idle`` (no body bytes for ``timeouts.idle_ms`` while streaming), ``ttft`` (no first chunk of a streamed chat answer within the route's ``ttft_ms``) or ``total``."""

    @property
    def phase(self) -> Optional[str]:
        """Which timeout expired: ``connect``, ``response``, ``idle``, ``ttft`` or ``total``."""
        return self._phase


class CircuitOpenError(HarnessError):
    """The circuit breaker for this service, endpoint and method is open: the call was not sent."""


class BulkheadFullError(HarnessError):
    """The service's bulkhead has no free permit: the call was not sent."""


class RateLimitedError(HarnessError):
    """Rate limited; ``retry_after_ms`` says when to try again, if known. Either the client's own
    limit (``rate_limit:`` in the config; ``code == "client_rate_limited"``, ``status`` is ``None``,
    nothing was sent) or the downstream's 429 (``status == 429``)."""


class HttpStatusError(HarnessError):
    """The upstream answered with an error status; ``status``, ``code`` and ``body`` describe it."""

    @property
    def body(self) -> Optional[bytes]:
        """The raw response body the upstream sent (never part of ``str()``)."""
        return self._body


class AuthError(HarnessError):
    """Credentials were refused or could not be obtained."""


class SchemaError(HarnessError):
    """The response did not match its JSON Schema; the message says what did not match."""


class ConnectError(HarnessError):
    """The connection could not be made (refused, reset or DNS failure)."""


class CancelledError(HarnessError):
    """The request was cancelled before it finished."""


class NoHealthyProviderError(HarnessError):
    """No provider of a route could answer; ``provider_errors`` lists each provider, in
    config order, with its last error or why it was not tried (``(provider, error)`` pairs)."""


class ConfigError(HarnessError):
    """Bad config or bad input; the message starts with the field path (e.g. ``services.orders.retry.max_retries``)."""


class ProtocolError(HarnessError):
    """The server answered, but not with valid HTTP (bad status line, conflicting lengths, too many headers, a final 1xx); not retried."""


class ResponseTooLargeError(HarnessError):
    """The response body is larger than the service's ``limits.max_response_bytes`` (64 MiB by default)."""


class DuplicateInFlightError(HarnessError):
    """Another delivery of this message is being processed now (the idempotent receiver): the
    handler did not run. ``retry_after_ms`` is what is left of that delivery's lease; redeliver
    after it (the sender's retry usually does)."""


# Every class above: the core's error kinds (`ERROR_NAMES` of the native module; a test checks
# they match), listed once.
def _kinds() -> List[str]:
    return [name for name, obj in list(globals().items()) if isinstance(obj, type) and issubclass(obj, HarnessError)]


__all__: List[str] = _kinds()

_NAMES = frozenset(__all__)

# Shown as ``harness.TimeoutError`` in tracebacks, where users import them from.
for _name in __all__:
    globals()[_name].__module__ = "harness"
del _name

