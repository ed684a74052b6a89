"""A program written against harness's types, checked with ``mypy --strict`` by test_types.py:
the config is the generated TypedDict, the views and the chat answer are generated types."""

from typing import Any, Dict, List, Optional

import harness
from harness._types import BreakerInfo, Config, CredentialState, RouteState


def config(url: str) -> Config:
    return {
        "services": {"orders": {"base_url": url, "retry": {"max_retries": 2}, "timeouts": {"request_ms": 2000}}},
        "routes": {"chat": {"providers": [{"id": "a", "service": "orders", "model": "m"}]}},
    }


def healthiest(client: harness.Client, route: str) -> Optional[str]:
    state: RouteState = client.routing_state(route)
    best = max(state["providers"], key=lambda p: p["health"], default=None)
    return None if best is None else best["id"]


def open_breakers(client: harness.Client) -> List[str]:
    infos: List[BreakerInfo] = client.breakers()
    return [f'{b["service"]} {b["method"]} {b["endpoint"]}' for b in infos if b["state"] == "open"]


def expiring(client: harness.Client) -> List[str]:
    states: List[CredentialState] = client.credentials_state()
    return [s["service"] for s in states if s["expires_at_ms"] is not None]


def answer(client: harness.Client) -> str:
    r: harness.ChatResponse = client.chat("chat", [{"role": "user", "content": "hi"}])
    usage = r.usage
    total = 0 if usage is None else usage.total_tokens
    return f"{r.content} ({total} tokens, stale={r.stale}, {len(r.raw)} raw bytes)"


def vectors(client: harness.Client) -> List[float]:
    r: harness.EmbedResponse = client.embed("embed", ["a", "bb"], 3, timeout_ms=2000)
    first = r.vectors[0]
    usage = r.usage
    tokens = 0 if usage is None else usage.prompt_tokens
    return [x * tokens for x in first] + [float(r.count * r.dimensions), r.cost or 0.0]


async def vectors_async(client: harness.AsyncClient) -> int:
    r = await client.embed("embed", ("a",), dimensions=8, principal="u1")
    return len(r.data) // 4 + r.batches + r.attempts


class InHouse:
    """A host adapter with plain methods."""

    def build_request(self, request: Dict[str, Any]) -> Dict[str, Any]:
        return {"path": "/inhouse/generate", "body": {"prompt": str(request["request"])}}

    def parse_response(self, response: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": str(response["body"])}

    def parse_stream_event(self, event: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None if event["data"] == "" else {"content": event["data"]}


class AsyncInHouse:
    """A host adapter with `async def` methods."""

    async def build_request(self, request: Dict[str, Any]) -> Dict[str, Any]:
        return {"path": "/inhouse/generate", "body": request}

    async def parse_response(self, response: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": response["body"]}

    async def parse_stream_event(self, event: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None


def adapters(client: harness.Client, aclient: harness.AsyncClient) -> None:
    client.register_adapter("inhouse", InHouse())
    aclient.register_adapter("inhouse", AsyncInHouse())
    adapter: harness.Adapter = InHouse()
    client.register_adapter("other", adapter)


def tenant(request: harness.InterceptedRequest) -> Optional[Dict[str, Any]]:
    """A `before` interceptor: changes, or None."""
    if request.attempt is not None and request.attempt > 1:
        return None
    body = request.body or b""
    return {"headers": {"x-tenant": request.header("x-user") or "none"}, "body": body + b"\n"}


def partner(response: harness.InterceptedResponse) -> None:
    """An `after` interceptor: a Reject fails the answer."""
    if response.status == 200 and response.json is not None and response.elapsed_ms > 0:
        raise harness.Reject("busy", retryable=True, code="BUSY")


async def atenant(request: harness.InterceptedRequest) -> Optional[Dict[str, Any]]:
    return {"query": {"trace": request.trace_id}}


def interceptors(client: harness.Client, aclient: harness.AsyncClient) -> bool:
    name: str = client.add_interceptor(tenant, partner, level="attempt", services=["orders"], want_body=True)
    aclient.add_interceptor(atenant, name="tenant.async", services="orders")
    aclient.add_interceptor(after=partner)
    try:
        client.get("orders", "/x")
    except harness.InterceptorError as e:
        return e.code == "BUSY"
    return client.remove_interceptor(name)
