"""The clients `harness codegen` generated from examples/openapi (checked in under
examples/openapi/python) against the test upstream: what goes on the wire for each parameter
kind, typed answers and errors, a drifted answer, and the endpoint label per operation."""

import asyncio
import datetime
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
    assert made.method == payments.Card(last4="4242") and made.failure is None
    assert error.model.decline_code == "expired"
    first, second = upstream.log("payments")
    assert first["headers"]["idempotency-key"] == "k-1" and "idempotency-key" not in second["headers"]
    assert first["body"] == '{"order_id":"5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10","amount":{"amount_minor":900,"currency":"EUR"},"method":{"token":"tok_1","type":"card"},"capture":true}'
    # Metrics (and breakers) are per operation: the endpoint label is the operationId.
    assert 'endpoint="createPayment"' in metrics


def test_models_read_and_write_their_json():
    order = orders.Order.from_json(ORDER)
    assert orders.Order.from_json(order.to_json()) == order
    assert "note" not in order.to_json() and order.to_json()["created_at"] == "2026-12-03T10:00:00.123456+00:00"
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
