"""The clients `harness codegen` generated from examples/openapi (checked in under
examples/openapi/python) against the test upstream: what goes on the wire for each parameter
kind, typed answers and errors, a drifted answer, the endpoint label per operation, retries (an
idempotent call and a keyed POST are resent, a POST without a key is not), and the same clients
with the documents in the config (`services.<name>.openapi`: the core checks each answer,
enforced or warned, and keys the POSTs that declare a key)."""

import asyncio
import datetime
import re
import sys
import urllib.parse
import uuid

import harness
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "examples" / "openapi" / "python"))

import orders  # noqa: E402
import payments  # noqa: E402
import users  # noqa: E402

ORDER_ID = uuid.UUID("5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10")
ORDER = {
    "id": str(ORDER_ID),
    "status": "open",
    "customer_id": "0f0e0d0c-0b0a-4909-8807-060504030201",
    "items": [{"sku": "tea", "quantity": 2, "unit_price": {"amount_minor": 450, "currency": "EUR"}}],
    "total": {"amount_minor": 900, "currency": "EUR"},
    "note": None,
    "created_at": "2026-12-03T10:00:00.1234567Z",
}
PROBLEM = {"code": "order_not_found", "title": "No such order", "status": 404}


@pytest.fixture
def services(upstream):
    """Each example service on its own upstream script (`/s/<name>`)."""
    return {"log": {"enabled": False}, "services": {s: {"base_url": f"{upstream.url}/s/{s}"} for s in ("orders", "users", "payments")}}


def query_of(logged):
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(logged["path"]).query)


def test_every_parameter_kind_goes_on_the_wire_as_the_document_says(upstream, services):
    upstream.script("orders", [{"json": {"items": [ORDER], "next_cursor": "c2"}}])
    after = datetime.datetime(2026, 12, 1, 8, 30, tzinfo=datetime.timezone.utc)
    with harness.Client(services) as c:
        page = orders.OrdersClient(c).list_orders(x_tenant="acme", status=["open", "paid"], tags=["a b", "c"], created_after=after, limit=5)
    assert page.next_cursor == "c2" and page.items[0].id == ORDER_ID
    assert page.items[0].created_at == datetime.datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc)
    assert page.items[0].items[0].unit_price == orders.Money(amount_minor=450, currency="EUR")
    (logged,) = upstream.log("orders")
    assert urllib.parse.urlsplit(logged["path"]).path == "/s/orders/orders"
    # status explodes (form), tags joins with commas (explode: false), a date-time is ISO 8601.
    assert query_of(logged) == [("status", "open"), ("status", "paid"), ("tags", "a b,c"), ("created_after", "2026-12-01T08:30:00+00:00"), ("limit", "5")]
    assert logged["headers"]["x-tenant"] == "acme"


def test_a_path_parameter_is_percent_encoded_and_users_pipes_join(upstream, services):
    upstream.script("users", [{"json": {"page": 1, "per_page": 10, "total": 0, "users": []}}, {"status": 204}])
    with harness.Client(services) as c:
        client = users.UsersClient(c)
        page = client.list_users(role=["admin", "staff"], page=1)
        assert page.total == 0 and page.users == []
        assert client.delete_user(user_id=7) is None
    listed, deleted = upstream.log("users")
    assert query_of(listed) == [("role", "admin|staff"), ("page", "1")]
    assert deleted["method"] == "DELETE" and deleted["path"] == "/s/users/users/7"


def test_a_declared_error_is_raised_as_its_typed_error(upstream, services):
    upstream.script("orders", [{"status": 404, "json": PROBLEM}])
    with harness.Client(services) as c:
        with pytest.raises(orders.NotFoundError) as caught:
            orders.OrdersClient(c).get_order(order_id=ORDER_ID)
    e = caught.value
    assert isinstance(e, harness.HttpStatusError) and e.kind == "HttpStatusError"
    assert e.model == orders.Problem(code="order_not_found", title="No such order", status=404)
    assert (e.status, e.service, e.endpoint, e.code) == (404, "orders", "getOrder", "order_not_found")


def test_an_undeclared_error_status_stays_harness_own(upstream, services):
    upstream.script("orders", [{"status": 418, "json": PROBLEM}])
    with harness.Client(services) as c:
        with pytest.raises(harness.HttpStatusError) as caught:
            orders.OrdersClient(c).get_order(order_id=ORDER_ID)
    assert type(caught.value) is harness.HttpStatusError and caught.value.status == 418


def test_an_answer_that_drifted_from_the_document_names_its_pointer(upstream, services):
    drifted = {**ORDER, "items": [{"sku": "tea", "quantity": 2, "unit_price": {"amount_minor": 4.5, "currency": "EUR"}}]}
    upstream.script("orders", [{"json": drifted}])
    with harness.Client(services) as c:
        with pytest.raises(harness.SchemaError) as caught:
            orders.OrdersClient(c).get_order(order_id=ORDER_ID)
    assert str(caught.value).startswith("getOrder: the 200 response does not match the document: /items/0/unit_price/amount_minor: expected an integer, got a number")
    assert caught.value.endpoint == "getOrder" and caught.value.status == 200


def test_async_payment_with_a_key_reads_the_tagged_method_and_a_typed_422(upstream, services):
    payment = {
        "id": "pay_1",
        "created_at": "2026-12-03T10:00:00Z",
        "order_id": str(ORDER_ID),
        "status": "pending",
        "amount": {"amount_minor": 900, "currency": "EUR"},
        "method": {"type": "card", "last4": "4242"},
    }
    declined = {"code": "declined", "title": "Declined", "status": 422, "decline_code": "expired"}
    upstream.script("payments", [{"status": 201, "json": payment}, {"status": 422, "json": declined}])
    request = payments.PaymentRequestInput(order_id=ORDER_ID, amount=payments.Money(900, "EUR"), method=payments.CardInput(token="tok_1"))

    async def go():
        async with harness.AsyncClient(services) as c:
            client = payments.AsyncPaymentsClient(c)
            made = await client.create_payment(body=request, idempotency_key="k-1")
            with pytest.raises(payments.UnprocessableEntityError) as caught:
                await client.create_payment(body=request)
            return made, caught.value, c.metrics()

    made, error, metrics = asyncio.run(go())
    # `failure` may be null, so its absence reads as UNSET (not as None, which is a null).
    assert made.method == payments.Card(last4="4242") and made.failure is payments.UNSET
    assert error.model.decline_code == "expired"
    first, second = upstream.log("payments")
    assert first["headers"]["idempotency-key"] == "k-1" and "idempotency-key" not in second["headers"]
    assert first["body"] == '{"order_id":"5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10","amount":{"amount_minor":900,"currency":"EUR"},"method":{"token":"tok_1","type":"card"},"capture":true}'
    # Metrics (and breakers) are per operation: the endpoint label is the operationId.
    assert 'endpoint="createPayment"' in metrics


def test_a_patch_sends_null_for_none_and_leaves_out_what_is_unset(upstream, services):
    user = {"id": 7, "email": "a@example.com", "role": "staff", "display_name": None}
    upstream.script("users", [{"json": user}, {"json": {**user, "display_name": "Al"}}])
    with harness.Client(services) as c:
        client = users.UsersClient(c)
        cleared = client.update_user(user_id=7, body=users.UserPatch(display_name=None))
        kept = client.update_user(user_id=7, body=users.UserPatch(role="admin"))
    first, second = upstream.log("users")
    assert (first["method"], first["body"]) == ("PATCH", '{"display_name":null}')
    assert (second["method"], second["body"]) == ("PATCH", '{"role":"admin"}')
    assert cleared.display_name is None and kept.display_name == "Al"
    assert users.UserPatch().to_json() == {} and repr(users.UNSET) == "UNSET"
    absent = users.User.from_json({k: v for k, v in user.items() if k != "display_name"})
    assert absent.display_name is users.UNSET and "display_name" not in absent.to_json()


ODD_IDS = """
openapi: 3.1.0
info: {title: Odd, version: "1"}
paths:
  /things/{id}:
    get:
      operationId: "get thing (by id)/v2"
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object, properties: {n: {type: integer}}}}}}
        "404": {description: none, content: {application/json: {schema: {type: object, properties: {code: {type: string}}}}}}
    delete:
      operationId: import
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      responses: {"204": {description: deleted}}
"""


def _harness_bin():
    for triple in ("x86_64-unknown-linux-gnu/", ""):
        p = REPO / "target" / f"{triple}debug" / "harness"
        if p.exists():
            return str(p)
    raise RuntimeError("harness is not built: run `cargo build -p harness-cli` (bindings-python/test.sh does)")


def test_an_odd_operation_id_is_a_valid_method_and_the_endpoint_label_as_written(upstream, tmp_path):
    import importlib
    import subprocess

    (tmp_path / "odd.yaml").write_text(ODD_IDS)
    gen = subprocess.run([_harness_bin(), "codegen", "--spec", str(tmp_path / "odd.yaml"), "--lang", "python", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    sys.path.insert(0, str(tmp_path / "out"))
    try:
        odd = importlib.import_module("odd")
    finally:
        sys.path.remove(str(tmp_path / "out"))
    upstream.script("odd", [{"json": {"n": 1}}, {"status": 404, "json": {"code": "gone"}}, {"status": 204}])
    config = {"log": {"enabled": False}, "services": {"odd": {"base_url": f"{upstream.url}/s/odd"}}}
    with harness.Client(config) as c:
        client = odd.OddClient(c)
        assert client.get_thing_by_id_v2(id=1).n == 1
        with pytest.raises(harness.HttpStatusError) as caught:
            client.get_thing_by_id_v2(id=2)
        assert client.import_(id=3) is None
        metrics = c.metrics()
    assert caught.value.endpoint == "get thing (by id)/v2" and caught.value.model.code == "gone"
    assert 'endpoint="get thing (by id)/v2"' in metrics and 'endpoint="import"' in metrics
    assert [r["method"] + " " + r["path"] for r in upstream.log("odd")] == ["GET /s/odd/things/1", "GET /s/odd/things/2", "DELETE /s/odd/things/3"]


def test_a_package_is_refused_at_import_by_a_harness_without_its_runtime_contract(tmp_path):
    import subprocess

    from harness import _openapi

    with pytest.raises(ImportError, match=r"^orders was generated by `harness codegen` for typed-client contract 2, but harness-sdk \S+ provides contract 1: regenerate it"):
        _openapi.require(2, "orders")
    _openapi.require(_openapi.CONTRACT, "orders")
    # A harness from before the typed clients: no harness._openapi at all.
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("__version__ = '0.0.1'\n")
    examples = REPO / "examples" / "openapi" / "python"
    run = subprocess.run([sys.executable, "-c", "import orders"], cwd=examples, env={"PYTHONPATH": f"{tmp_path}:{examples}"}, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "ImportError: orders needs harness._openapi, the runtime of the clients `harness codegen` writes, and the installed harness-sdk has none: upgrade harness-sdk"
    ), run.stderr


def test_models_read_and_write_their_json():
    order = orders.Order.from_json(ORDER)
    assert orders.Order.from_json(order.to_json()) == order
    assert order.note is None and order.to_json()["note"] is None and order.to_json()["created_at"] == "2026-12-03T10:00:00.123456+00:00"
    without_note = orders.Order.from_json({k: v for k, v in ORDER.items() if k != "note"})
    assert without_note.note is orders.UNSET and "note" not in without_note.to_json() and not without_note.note
    with pytest.raises(harness.SchemaError, match=r"^/status: expected one of 'open', 'paid', 'shipped', 'cancelled', got 'lost'$"):
        orders.Order.from_json({**ORDER, "status": "lost"})
    with pytest.raises(harness.SchemaError, match="the required key 'items' is missing"):
        orders.Order.from_json({k: v for k, v in ORDER.items() if k != "items"})
    user = users.UserInput(email="a@example.com", role="staff", password="correct horse battery", avatar=b"\x89PNG")
    assert user.to_json() == {"email": "a@example.com", "role": "staff", "password": "correct horse battery", "avatar": "iVBORw=="}


def _mypy(tmp_path, program):
    (tmp_path / "prog.py").write_text(program)
    import subprocess

    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "prog.py")],
        cwd=REPO / "examples" / "openapi" / "python",
        capture_output=True,
        text=True,
    )
    return run.returncode, run.stdout


def _pyright(tmp_path, program):
    """pyright in strict mode, for Python 3.9, on `program` beside the examples' packages."""
    import json
    import subprocess

    (tmp_path / "prog.py").write_text(program)
    examples = REPO / "examples" / "openapi" / "python"
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.9", "extraPaths": [str(examples)]}))
    run = subprocess.run(
        [sys.executable, "-m", "pyright", "-p", str(tmp_path / "pyrightconfig.json"), "--pythonpath", sys.executable, str(tmp_path / "prog.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    return run.returncode, run.stdout


def test_pyright_strict_accepts_right_calls_and_rejects_wrong_ones(tmp_path):
    head = "import harness\nimport orders\n\nc = orders.OrdersClient(harness.Client({'services': {'orders': {'base_url': 'http://127.0.0.1:1'}}}))\n"
    good = "import uuid\n" + head + (
        "o: orders.Order = c.get_order(order_id=uuid.uuid4())\n"
        "item = orders.LineItem(sku='a', quantity=1, unit_price=orders.Money(amount_minor=1, currency='EUR'))\n"
        "page: orders.OrderPage = c.list_orders(x_tenant='t', status=['open'])\n"
        "import users\n"
        "patch = users.UserPatch(display_name=None) if page.items else users.UserPatch(display_name=users.UNSET)\n"
        "shown: str = patch.display_name if patch.display_name else ''\n"  # UNSET is falsy: the check narrows
    )
    code, out = _pyright(tmp_path, good)
    assert (code, out.strip().splitlines()[-1:]) == (0, ["0 errors, 0 warnings, 0 informations"]), out
    bad = head + (
        "c.get_order(order_id='not-a-uuid')\n"  # line 5: a wrong argument type
        "orders.LineItem(sku='a', quantity=1)\n"  # line 6: a missing required field
        "c.list_orders(status=['open'])\n"  # line 7: a missing header parameter
        "c.list_orders(x_tenant='t', status=['lost'])\n"  # line 8: a value the enum lacks
    )
    code, out = _pyright(tmp_path, bad)
    assert code == 1, out
    assert re.search(r'prog\.py:5:\d+ - error: Argument of type "Literal\[\'not-a-uuid\'\]" cannot be assigned to parameter "order_id" of type "UUID"', out), out
    assert re.search(r'prog\.py:6:\d+ - error: Argument missing for parameter "unit_price"', out), out
    assert re.search(r'prog\.py:7:\d+ - error: Argument missing for parameter "x_tenant"', out), out
    assert re.search(r'prog\.py:8:\d+ - error: Argument of type "list\[str\]" cannot be assigned to parameter "status"', out), out
    assert out.strip().splitlines()[-1] == "4 errors, 0 warnings, 0 informations", out


def test_mypy_strict_accepts_right_calls_and_rejects_wrong_ones(tmp_path):
    head = "import uuid\nimport harness\nimport orders\n\nc = orders.OrdersClient(harness.Client({'services': {'orders': {'base_url': 'http://127.0.0.1:1'}}}))\n"
    good = head + (
        "o: orders.Order = c.get_order(order_id=uuid.uuid4())\n"
        "item = orders.LineItem(sku='a', quantity=1, unit_price=orders.Money(amount_minor=1, currency='EUR'))\n"
        "page: orders.OrderPage = c.list_orders(x_tenant='t', status=['open'])\n"
    )
    assert _mypy(tmp_path, good) == (0, "Success: no issues found in 1 source file\n")
    bad = head + (
        "c.get_order(order_id='not-a-uuid')\n"  # line 6: a wrong argument type
        "orders.LineItem(sku='a', quantity=1)\n"  # line 7: a missing required field
        "c.list_orders(status=['lost'])\n"  # line 8: a missing header parameter, a value the enum lacks
    )
    code, out = _mypy(tmp_path, bad)
    assert code == 1, out
    assert 'prog.py:6: error: Argument "order_id" to "get_order" of "OrdersClient" has incompatible type "str"; expected "UUID"' in out, out
    assert 'prog.py:7: error: Missing positional argument "unit_price" in call to "LineItem"' in out, out
    assert 'prog.py:8: error: Missing named argument "x_tenant" for "list_orders" of "OrdersClient"' in out, out
    assert "prog.py:8: error: List item 0 has incompatible type \"Literal['lost']\"" in out, out


def fast_retries(services):
    for s in services["services"].values():
        s["retry"] = {"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": False}
    return services


def test_an_idempotent_call_is_retried_and_a_post_without_a_key_is_not(upstream, services):
    services = fast_retries(services)
    upstream.script("orders", [{"status": 503}, {"json": ORDER}, {"status": 503}, {"status": 201, "json": ORDER}, {"status": 503}, {"status": 201, "json": ORDER}])
    new = orders.OrderInput(customer_id=uuid.UUID(ORDER["customer_id"]), items=[orders.LineItem(sku="tea", quantity=2, unit_price=orders.Money(450, "EUR"))])
    with harness.Client(services) as c:
        client = orders.OrdersClient(c)
        assert client.get_order(order_id=ORDER_ID).id == ORDER_ID
        assert client.create_order(body=new, idempotency_key="k-7").id == ORDER_ID
        with pytest.raises(harness.HttpStatusError) as caught:
            client.create_order(body=new)
    assert (caught.value.status, caught.value.attempts, caught.value.endpoint) == (503, 1, "createOrder")
    log = upstream.log("orders")
    assert [e["method"] for e in log] == ["GET", "GET", "POST", "POST", "POST"]
    assert [e["headers"].get("idempotency-key") for e in log[2:]] == ["k-7", "k-7", None]


def with_document(services, **openapi):
    """The services with their documents in the config: the core knows every operation."""
    for name, s in services["services"].items():
        s["openapi"] = {"spec": str(REPO / "examples" / "openapi" / f"{name}.yaml"), **openapi}
    return fast_retries(services)


def test_with_the_document_in_the_config_the_core_checks_answers_and_keys_posts(upstream, services):
    # quantity has `minimum: 1`: a type the model reads, a value the document refuses.
    off = {**ORDER, "items": [{"sku": "tea", "quantity": 0, "unit_price": {"amount_minor": 450, "currency": "EUR"}}]}
    upstream.script("orders", [{"json": off}, {"status": 503}, {"status": 201, "json": ORDER}])
    new = orders.OrderInput(customer_id=uuid.UUID(ORDER["customer_id"]), items=[orders.LineItem(sku="tea", quantity=2, unit_price=orders.Money(450, "EUR"))])
    with harness.Client(with_document(services)) as c:
        client = orders.OrdersClient(c)
        with pytest.raises(harness.SchemaError) as caught:
            client.get_order(order_id=ORDER_ID)
        # No key given: the operation declares one, so Harness sends a fresh one and may retry.
        assert client.create_order(body=new).id == ORDER_ID
    assert (caught.value.endpoint, caught.value.status, caught.value.code) == ("getOrder", 200, "schema_mismatch")
    assert "at /items/0/quantity" in str(caught.value)
    posts = [e for e in upstream.log("orders") if e["method"] == "POST"]
    keys = [e["headers"].get("idempotency-key") for e in posts]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1], keys


def test_under_warn_a_drifted_answer_is_returned_and_reported(upstream, services):
    off = {**ORDER, "items": [{"sku": "tea", "quantity": 0, "unit_price": {"amount_minor": 450, "currency": "EUR"}}]}
    upstream.script("orders", [{"json": off}])
    events = []
    with harness.Client(with_document(services, validate="warn")) as c:
        c.add_listener(events.append)
        order = orders.OrdersClient(c).get_order(order_id=ORDER_ID)
        c.flush()
        metrics = c.metrics()
    assert order.items[0].quantity == 0
    warned = [e for e in events if e.type == "schema_violation"]
    assert len(warned) == 1 and warned[0].mode == "warn" and warned[0].endpoint == "getOrder", warned
    assert "at /items/0/quantity" in warned[0].violation
    assert 'harness_schema_violations_total{service="orders",endpoint="getOrder"} 1' in metrics
