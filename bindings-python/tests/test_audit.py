"""Audit records (README "Audit log"): the caller's `principal=`, the listener and file sinks,
masked bodies, and no secret anywhere. Real loopback upstream, as everywhere."""

import asyncio
import json

import pytest

import harness

SECRET = "tok-python-audit-secret"
HELLO = [{"role": "user", "content": "hi"}]
BODY = {"user": "ann", "password": "hunter2"}


def audit_config(upstream, sink):
    """`svc` (holding a secret header) and a `chat` route on a simulated provider, audited to `sink`."""
    return {
        "client": {"name": "pytest-audit"},
        "log": {"enabled": False},
        "audit": {"enabled": True, "include_bodies": True, "sink": sink},
        "services": {
            "svc": {"base_url": upstream.url, "headers": {"authorization": f"Bearer {SECRET}"}},
            "sim-svc": {"base_url": f"{upstream.url}/llm/audit-sim"},
        },
        "routes": {"chat": {"adapter": "openai-compatible", "providers": [{"id": "sim", "service": "sim-svc", "model": "m", "weight": 1}]}},
    }


def audit_records(events):
    return [e for e in events if e.type == "audit_record"]


def test_audit_record_reaches_a_listener_with_the_principal_and_no_secret(upstream):
    # The answer echoes the credential, in a masked field (`token`) and in a plain one.
    upstream.script("audit_listener", [{"json": {"ok": True, "token": SECRET, "echo": f"Bearer {SECRET}"}}])
    events = []
    with harness.Client(audit_config(upstream, {"listener": True})) as c:
        c.add_listener(events.append)
        r = c.post("svc", "/s/audit_listener/charge", json=BODY, principal="user-py-42")
        c.flush()
    [rec] = audit_records(events)
    assert (rec.principal, rec.client, rec.service, rec.method, rec.status, rec.outcome) == ("user-py-42", "pytest-audit", "svc", "POST", 200, "ok")
    assert (rec.attempts, rec.trace_id, rec.endpoint) == (1, r.trace_id, "/s/audit_listener/charge")
    assert rec.request_body == {"user": "ann", "password": "***"}
    assert rec.response_body["token"] == "***" and rec.response_body["ok"] is True
    text = json.dumps(rec.to_dict()) + repr(rec)
    assert SECRET not in text and "hunter2" not in text, text
    # The principal is for the audit record only: never sent downstream.
    assert "user-py-42" not in json.dumps(upstream.log("audit_listener"))


def test_audit_file_holds_the_record_after_flush(upstream, tmp_path):
    upstream.script("audit_file", [{"json": {"ok": True, "token": SECRET}}])
    path = tmp_path / "audit.jsonl"
    events = []

    async def go():
        async with harness.AsyncClient(audit_config(upstream, {"file": str(path), "listener": True})) as a:
            a.add_listener(events.append)
            await a.post("svc", "/s/audit_file/charge", json=BODY, principal="tenant-7")
            a.flush()
            return path.read_text()

    text = asyncio.run(go())
    [line] = text.splitlines()
    rec = json.loads(line)
    assert (rec["principal"], rec["service"], rec["outcome"], rec["status"]) == ("tenant-7", "svc", "ok", 200)
    assert rec["response_body"]["token"] == "***" and rec["request_body"]["password"] == "***"
    assert SECRET not in text and "hunter2" not in text, text
    # Both sinks got the same record.
    [event] = audit_records(events)
    assert {k: v for k, v in event.to_dict().items() if k != "type"} == rec


def test_every_call_passes_its_principal(upstream):
    """request, stream, chat and chat_stream, sync and async: each call's principal is in its record."""
    upstream.script("audit_calls", [{"body": "a\nb\n"}])
    upstream.provider("audit-sim", {"content": "one two", "reset": True})
    events = []
    cfg = audit_config(upstream, {"listener": True})
    with harness.Client(cfg) as c:
        c.add_listener(events.append)
        c.get("svc", "/s/audit_calls/1", principal="p-request")
        with c.stream("svc", "GET", "/s/audit_calls/2", principal="p-stream") as r:
            assert r.read() == b"a\nb\n"
        c.chat("chat", HELLO, principal="p-chat")
        with c.chat_stream("chat", HELLO, principal="p-chat-stream") as s:
            assert [ch.kind for ch in s][-1] == "done"
        c.flush()

    async def go():
        async with harness.AsyncClient(cfg) as a:
            a.add_listener(events.append)
            await a.get("svc", "/s/audit_calls/3", principal="p-async-request")
            async with a.stream("svc", "GET", "/s/audit_calls/4", principal="p-async-stream") as r:
                assert await r.aread() == b"a\nb\n"
            await a.chat("chat", HELLO, principal="p-async-chat")
            async for _ in a.chat_stream("chat", HELLO, principal="p-async-chat-stream"):
                pass
            a.flush()

    asyncio.run(go())
    got = {(e.principal, e.service) for e in audit_records(events)}
    kinds = ["request", "stream", "chat", "chat-stream"]
    want = {(f"p-{k}", "chat" if k.startswith("chat") else "svc") for k in kinds}
    want |= {(f"p-async-{k}", "chat" if k.startswith("chat") else "svc") for k in kinds}
    assert got == want
    # Never downstream: not a header, not a chat-completions parameter.
    sent = json.dumps(upstream.log("audit_calls")) + json.dumps(upstream.provider_log("audit-sim"))
    assert not [p for p, _ in want if p in sent], sent


@pytest.mark.parametrize("bad", ["ann\nforged-line", "", "x" * 257])
def test_a_bad_principal_is_a_config_error_and_nothing_is_sent(upstream, bad):
    upstream.script("audit_bad", [{"status": 200}])
    upstream.provider("audit-sim", {"reset": True})
    cfg = audit_config(upstream, {"listener": True})

    def check(e):
        assert isinstance(e, harness.ConfigError), repr(e)
        assert "request.principal" in e.message, e.message

    with harness.Client(cfg) as c:
        for call in (
            lambda: c.get("svc", "/s/audit_bad/1", principal=bad),
            lambda: c.chat("chat", HELLO, principal=bad),
            lambda: c.chat_stream("chat", HELLO, principal=bad),
        ):
            with pytest.raises(harness.HarnessError) as info:
                call()
            check(info.value)
        with pytest.raises(harness.ConfigError, match=r"^principal: expected a string, got int"):
            c.get("svc", "/s/audit_bad/1", principal=42)

    async def go():
        async with harness.AsyncClient(cfg) as a:
            with pytest.raises(harness.HarnessError) as info:
                await a.get("svc", "/s/audit_bad/1", principal=bad)
            check(info.value)
            with pytest.raises(harness.HarnessError) as info:
                await a.chat("chat", HELLO, principal=bad)
            check(info.value)

    asyncio.run(go())
    # Nothing reached the upstream.
    assert upstream.log("audit_bad") == []
    assert upstream.provider_log("audit-sim")["count"] == 0
