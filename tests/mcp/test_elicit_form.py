"""The form of a server's question (runtime_core/agent/elicit_form.py, offered to the room and
the CLI as runtime_core.control): fields from the MCP spec's restricted schema, an answer checked
field by field, typed text turned into the field's type; and how a link ties a question to the
call in flight and keeps a call timeout from running while the operator is asked."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from runtime_core.agent.mcp.asks import CALL_KEY_META, CallInFlight, ServerAsks
from runtime_core.agent.mcp.tools import IDEMPOTENCY_META
from runtime_core.control import FormError, check_content, form_fields, parse_value

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20},
        "email": {"type": "string", "format": "email"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        "price": {"type": "number", "maximum": 99.5},
        "window": {"type": "boolean", "default": False},
        "meal": {"type": "string", "enum": ["none", "veg"], "enumNames": ["None", "Veggie"]},
        "class": {"type": "string", "oneOf": [{"const": "y", "title": "Economy"},
                                              {"const": "j", "title": "Business"}]},
        "extras": {"type": "array", "items": {"enum": ["bag", "lounge"]}, "maxItems": 2},
        "day": {"type": "string", "format": "date"},
    },
    "required": ["name", "seats"],
}


def test_fields_come_in_the_servers_order_with_their_kinds() -> None:
    fields = form_fields(SCHEMA)
    assert [(f.name, f.kind, f.required) for f in fields] == [
        ("name", "string", True), ("email", "string", False), ("seats", "integer", True),
        ("price", "number", False), ("window", "boolean", False), ("meal", "enum", False),
        ("class", "enum", False), ("extras", "multi", False), ("day", "string", False)]
    by_name = {f.name: f for f in fields}
    assert by_name["meal"].choices == (("none", "None"), ("veg", "Veggie"))
    assert by_name["class"].choices == (("y", "Economy"), ("j", "Business"))
    assert by_name["seats"].hint() == "integer, 1..9"
    assert by_name["name"].label == "Name" and by_name["email"].label == "email"


@pytest.mark.parametrize("schema", [
    {"type": "array"},
    {"type": "object", "properties": {"nested": {"type": "object"}}},
    {"type": "object", "properties": {"x": "not a schema"}},
])
def test_a_schema_no_form_can_show_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(FormError):
        form_fields(schema)


def test_a_good_answer_passes_and_integers_stay_integers() -> None:
    answer = {"name": "Ann", "seats": 2.0, "window": True, "meal": "veg", "class": "j",
              "extras": ["bag"], "email": "ann@example.com", "day": "2026-01-31",
              "price": 10}
    checked = check_content(SCHEMA, answer)
    assert checked["seats"] == 2 and isinstance(checked["seats"], int)
    assert checked["extras"] == ["bag"]


def test_every_bad_field_is_named() -> None:
    with pytest.raises(FormError) as caught:
        check_content(SCHEMA, {"name": "A", "seats": 1.5, "window": "yes", "meal": "fish",
                               "email": "nope", "extras": ["bag", "spa"], "day": "31/01",
                               "price": 100, "colour": "red"})
    problems = caught.value.problems
    assert problems == {
        "colour": problems["colour"], "name": "at least 2 characters",
        "seats": "expected a whole number", "window": "expected true or false",
        "meal": "one of none, veg", "email": "not an email address",
        "extras": "a list of bag, lounge", "day": problems["day"], "price": "at most 99.5"}
    assert "no such field" in problems["colour"] and "ISO 8601" in problems["day"]
    with pytest.raises(FormError, match="seats: required"):
        check_content(SCHEMA, {"name": "Ann"})
    with pytest.raises(FormError, match="an object"):
        check_content(SCHEMA, ["Ann"])


def test_typed_text_becomes_the_fields_type() -> None:
    by_name = {f.name: f for f in form_fields(SCHEMA)}
    assert parse_value(by_name["seats"], " 3 ") == 3
    assert parse_value(by_name["price"], "2.5") == 2.5
    assert parse_value(by_name["window"], "Yes") is True
    assert parse_value(by_name["window"], "off") is False
    assert parse_value(by_name["class"], "Business") == "j"  # a label picks its value
    assert parse_value(by_name["extras"], "bag, lounge") == ["bag", "lounge"]
    assert parse_value(by_name["name"], "  ") is None
    for field, text in (("seats", "two"), ("seats", "2.5"), ("window", "maybe")):
        with pytest.raises(ValueError):
            parse_value(by_name[field], text)


# -- a link's side -------------------------------------------------------------------------------
def test_the_call_key_is_the_one_mcp_tools_sends() -> None:
    assert CALL_KEY_META == IDEMPOTENCY_META


async def test_a_question_belongs_to_the_call_in_flight() -> None:
    asks = ServerAsks("srv")
    assert asks.current_call() is None
    with asks.calling("book", {CALL_KEY_META: "run1:4"}):
        assert asks.current_call() == CallInFlight("srv", "book", "run1", 4)

        async def elsewhere() -> CallInFlight | None:  # another task: the oldest call in flight
            return asks.current_call()

        with asks.calling("other", {CALL_KEY_META: "run2:1"}):
            assert asks.current_call() == CallInFlight("srv", "other", "run2", 1)
            seen = await asyncio.get_running_loop().create_task(
                elsewhere(), context=contextvars.Context())
            assert seen == CallInFlight("srv", "book", "run1", 4)
    assert asks.calls == []


def test_turned_off_callbacks_are_not_given() -> None:
    assert set(ServerAsks("s").callbacks()) == {"elicitation_callback", "sampling_callback",
                                                "sampling_capabilities"}
    assert ServerAsks("s", elicitation=False, sampling=False).callbacks() == {}


async def test_a_call_timeout_does_not_run_while_the_operator_is_asked() -> None:
    asks = ServerAsks("srv")
    async with asks.timeout(0.3):
        asks._asked(+1)  # a question waits for the operator, longer than the timeout
        await asyncio.sleep(0.5)
        asks._asked(-1)
        await asyncio.sleep(0.1)  # what was left of the timeout runs again from here
    with pytest.raises(TimeoutError):
        async with asks.timeout(0.3):
            asks._asked(+1)
            asks._asked(-1)
            await asyncio.sleep(1.0)
