"""What every generated client shares: reading JSON into typed values (a value that does not
match raises ``harness.SchemaError`` naming its JSON pointer), writing values as JSON and as
parameters, and one request path over ``harness.Client`` and ``harness.AsyncClient`` that
turns a declared error response into its typed error. Depends on ``harness`` alone."""

import base64
import datetime as _dt
import re
import uuid as _uuid
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar

from harness import AsyncClient, Client, HarnessError, Response, SchemaError

T = TypeVar("T")
Parse = Callable[[Any, str], T]
"""Reads a JSON value at a pointer (for messages) into a typed value."""
Errors = Mapping[str, Callable[[HarnessError], HarnessError]]
"""An operation's typed errors by status key (``"404"``, ``"4XX"``, ``"default"``)."""

_MISSING = object()


def _shown(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def drift(at: str, expected: str, got: Any) -> SchemaError:
    """The error for a value that is not what the document declares."""
    return SchemaError(f"{at or '/'}: expected {expected}, got {_shown(got)}")


def child(at: str, key: str) -> str:
    """The pointer of ``key`` below ``at``."""
    return at + "/" + key.replace("~", "~0").replace("/", "~1")


def obj(data: Any, at: str) -> Dict[str, Any]:
    if not isinstance(data, dict):
        raise drift(at, "an object", data)
    return data


def required(d: Dict[str, Any], key: str, at: str, parse: Parse[T]) -> T:
    if key not in d:
        raise SchemaError(f"{at or '/'}: the required key {key!r} is missing")
    return parse(d[key], child(at, key))


def optional(d: Dict[str, Any], key: str, at: str, parse: Parse[T]) -> Optional[T]:
    v = d.get(key)
    return None if v is None else parse(v, child(at, key))


def optional_nullable(d: Dict[str, Any], key: str, at: str, parse: Parse[Optional[T]]) -> Optional[T]:
    """``optional`` for a type that is nullable itself (an alias of ``Optional[...]``)."""
    v = d.get(key)
    return None if v is None else parse(v, child(at, key))


def defaulted(d: Dict[str, Any], key: str, at: str, parse: Parse[T], default: T) -> T:
    v = d.get(key, _MISSING)
    return default if v is _MISSING or v is None else parse(v, child(at, key))


def rest(d: Dict[str, Any], known: Any, at: str, parse: Parse[T]) -> Dict[str, T]:
    """The keys an object has beside its declared properties (``additionalProperties``)."""
    return {k: parse(v, child(at, k)) for k, v in d.items() if k not in known}


def string(v: Any, at: str) -> str:
    if not isinstance(v, str):
        raise drift(at, "a string", v)
    return v


def integer(v: Any, at: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise drift(at, "an integer", v)
    if isinstance(v, float):
        if not v.is_integer():
            raise drift(at, "an integer", v)
        return int(v)
    return v


def number(v: Any, at: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise drift(at, "a number", v)
    return v


def boolean(v: Any, at: str) -> bool:
    if not isinstance(v, bool):
        raise drift(at, "a boolean", v)
    return v


def any_(v: Any, at: str) -> Any:
    return v


_FRACTION = re.compile(r"\.(\d+)")


def date_time(v: Any, at: str) -> _dt.datetime:
    """An RFC 3339 date-time (``Z`` and any number of fraction digits accepted on every Python)."""
    s = string(v, at).strip()
    text = s[:-1] + "+00:00" if s[-1:] in ("Z", "z") else s
    if len(text) > 10 and text[10] in "t ":
        text = text[:10] + "T" + text[11:]
    m = _FRACTION.search(text)
    if m:
        text = text[: m.start()] + "." + (m.group(1) + "000000")[:6] + text[m.end():]
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        raise drift(at, "an RFC 3339 date-time", v) from None


def date(v: Any, at: str) -> _dt.date:
    try:
        return _dt.date.fromisoformat(string(v, at))
    except ValueError:
        raise drift(at, "a date (YYYY-MM-DD)", v) from None


def uuid(v: Any, at: str) -> _uuid.UUID:
    try:
        return _uuid.UUID(string(v, at))
    except ValueError:
        raise drift(at, "a UUID", v) from None


def byte(v: Any, at: str) -> bytes:
    try:
        return base64.b64decode(string(v, at), validate=True)
    except ValueError:
        raise drift(at, "base64 text", v) from None


def literal(values: Tuple[Any, ...]) -> Parse[Any]:
    """One of ``values`` (``1`` is not ``True``)."""

    def parse(v: Any, at: str) -> Any:
        for x in values:
            if v == x and type(v) is type(x):
                return v
        got = repr(v)[:40] if isinstance(v, (str, int)) else _shown(v)
        raise SchemaError(f"{at or '/'}: expected one of {', '.join(repr(x) for x in values)}, got {got}")

    return parse


def list_of(item: Parse[T]) -> Parse[List[T]]:
    def parse(v: Any, at: str) -> List[T]:
        if not isinstance(v, list):
            raise drift(at, "an array", v)
        return [item(x, f"{at}/{i}") for i, x in enumerate(v)]

    return parse


def dict_of(value: Parse[T]) -> Parse[Dict[str, T]]:
    def parse(v: Any, at: str) -> Dict[str, T]:
        return {k: value(x, child(at, k)) for k, x in obj(v, at).items()}

    return parse


def nullable(p: Parse[T]) -> Parse[Optional[T]]:
    def parse(v: Any, at: str) -> Optional[T]:
        return None if v is None else p(v, at)

    return parse


def tag(data: Any, key: str) -> Any:
    """A union's tag property, if ``data`` is an object that has it."""
    return data.get(key) if isinstance(data, dict) else None


def best_of(data: Any, at: str, parsers: Sequence[Parse[Any]], expected: str) -> Any:
    """An untagged union: of the members that read ``data``, the one that knows most of its
    keys (the first on a tie)."""
    best: Any = _MISSING
    best_score = -1
    errors: List[str] = []
    for parse in parsers:
        try:
            v = parse(data, at)
        except SchemaError as e:
            errors.append(e.message)
            continue
        keys = getattr(type(v), "_KEYS", None)
        score = len(keys.intersection(data)) if keys is not None and isinstance(data, dict) else 0
        if score > best_score:
            best, best_score = v, score
    if best is _MISSING:
        raise SchemaError(f"{at or '/'}: expected {expected}, and it is none of them ({'; '.join(errors[:3])})")
    return best


def one_of(parsers: Sequence[Parse[Any]], expected: str) -> Parse[Any]:
    def parse(v: Any, at: str) -> Any:
        return best_of(v, at, parsers, expected)

    return parse


def dump(v: Any) -> Any:
    """A value as JSON: models by their ``to_json``, dates as ISO 8601, bytes as base64."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    to_json = getattr(v, "to_json", None)
    if to_json is not None:
        return to_json()
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, _uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, Mapping):
        return {str(k): dump(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [dump(x) for x in v]
    raise TypeError(f"{type(v).__name__} is not a JSON value")


def text(v: Any) -> str:
    """A parameter value as text (``true``/``false``, ISO 8601, base64)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    return str(v)


def path(v: Any) -> str:
    """A path parameter, percent-encoded (an array is comma-separated: ``simple`` style)."""
    from urllib.parse import quote

    if isinstance(v, (list, tuple)):
        return ",".join(quote(text(x), safe="") for x in v)
    return quote(text(v), safe="")


def query(out: List[Tuple[str, str]], name: str, v: Any, sep: Optional[str]) -> None:
    """A query parameter; an array repeats the name (``sep`` None: ``explode``) or joins with ``sep``."""
    if v is None:
        return
    if isinstance(v, (list, tuple)):
        if sep is None:
            out.extend((name, text(x)) for x in v)
        else:
            out.append((name, sep.join(text(x) for x in v)))
    else:
        out.append((name, text(v)))


def header(out: List[Tuple[str, str]], name: str, v: Any) -> None:
    if v is None:
        return
    out.append((name, ",".join(text(x) for x in v) if isinstance(v, (list, tuple)) else text(v)))


def json_body(resp: Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        raise SchemaError("the body is not JSON") from None


def error_body(error: HarnessError) -> Any:
    """The JSON body of an error response (``ValueError`` when there is none)."""
    import json

    body: Optional[bytes] = getattr(error, "_body", None)
    if body is None:
        raise ValueError("no body")
    return json.loads(body)


def typed(error: HarnessError, errors: Errors) -> HarnessError:
    """The typed error for an error response the operation declares, else ``error`` itself
    (also when the body does not read as the declared model: the status matters more)."""
    status = error.status
    if status is None or status < 400:
        return error
    make = errors.get(str(status)) or errors.get(f"{status // 100}XX") or errors.get("default")
    if make is None:
        return error
    try:
        return make(error)
    except (SchemaError, ValueError):
        return error


def copy(error: HarnessError, into: Any) -> None:
    """Gives a typed error the context of the error Harness raised."""
    into.__dict__.update(error.__dict__)


class Call(Generic[T]):
    """One operation's request, how its answer is read, and its typed errors."""

    __slots__ = ("method", "path", "endpoint", "decode", "errors", "params", "headers", "json", "idempotency_key")

    def __init__(
        self,
        method: str,
        path: str,
        endpoint: str,
        decode: Callable[[Response], T],
        errors: Errors,
        *,
        params: Optional[List[Tuple[str, str]]] = None,
        headers: Optional[List[Tuple[str, str]]] = None,
        json: Any = None,
        idempotency_key: Optional[str] = None,
    ) -> None:
        self.method = method
        self.path = path
        self.endpoint = endpoint
        self.decode = decode
        self.errors = errors
        self.params = params or None
        self.headers = headers or None
        self.json = json
        self.idempotency_key = idempotency_key


def _decoded(call: "Call[T]", resp: Response, service: str) -> T:
    try:
        return call.decode(resp)
    except SchemaError as e:
        raise SchemaError(
            f"{call.endpoint}: the {resp.status} response does not match the document: {e.message}",
            service=service,
            endpoint=call.endpoint,
            method=call.method,
            attempts=resp.attempts,
            status=resp.status,
            trace_id=resp.trace_id,
        ) from None


class SyncService:
    """Calls one service's operations through a ``harness.Client``."""

    __slots__ = ("_client", "_service")

    def __init__(self, client: Client, service: str) -> None:
        self._client = client
        self._service = service

    def _call(self, call: Call[T], timeout_ms: Optional[float]) -> T:
        try:
            resp = self._client.request(
                self._service,
                call.method,
                call.path,
                endpoint=call.endpoint,
                params=call.params,
                headers=call.headers,
                json=call.json,
                idempotency_key=call.idempotency_key,
                timeout_ms=timeout_ms,
            )
        except HarnessError as e:
            raise typed(e, call.errors) from None
        return _decoded(call, resp, self._service)


class AsyncService:
    """Calls one service's operations through a ``harness.AsyncClient``."""

    __slots__ = ("_client", "_service")

    def __init__(self, client: AsyncClient, service: str) -> None:
        self._client = client
        self._service = service

    async def _call(self, call: Call[T], timeout_ms: Optional[float]) -> T:
        try:
            resp = await self._client.request(
                self._service,
                call.method,
                call.path,
                endpoint=call.endpoint,
                params=call.params,
                headers=call.headers,
                json=call.json,
                idempotency_key=call.idempotency_key,
                timeout_ms=timeout_ms,
            )
        except HarnessError as e:
            raise typed(e, call.errors) from None
        return _decoded(call, resp, self._service)
