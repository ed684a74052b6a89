"""A program written against harness's types, checked with ``mypy --strict`` by test_types.py:
the config is the generated TypedDict, the views and the chat answer are generated types."""

from typing import List, Optional

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
