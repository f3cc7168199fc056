"""The Nova endpoint's bounds where a decoder holds them (no broker): the body's size,
the JSON's nesting depth and the names a RequestSpec may force or ignore.

Each is bad input with a message naming the bound: ``wire.BadEnvelope`` (answered
when the message names its reply queue, dead-lettered either way) and
``objects.UnsupportedObject`` (a ValueError failure to the caller). The bounds the
endpoint holds on the wire (a body cut as it arrives, a cast's instances) are
tested through the broker in ``test_nova_rpc.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from actorsched.nova import objects, wire

MAX_DEPTH = 32  # wire's: the deepest JSON the endpoint reads
MAX_FORCED = 10_000  # objects': the names one RequestSpec list may hold


def _body(inner: dict[str, Any] | str) -> bytes:
    text = inner if isinstance(inner, str) else json.dumps(inner)
    return json.dumps({"oslo.version": "2.0", "oslo.message": text}).encode()


def _call(**args: Any) -> dict[str, Any]:
    return {
        "method": "select_destinations",
        "args": args,
        "version": "4.5",
        "_msg_id": "m1",
        "_reply_q": "reply_1",
    }


def test_a_nova_message_over_max_body_bytes_is_refused_naming_the_bound() -> None:
    body = _body(_call(spec_obj={"padding": "x" * 1000}))
    assert wire.decode(body, max_body_bytes=len(body)).method == "select_destinations"
    with pytest.raises(wire.BadEnvelope) as refused:
        wire.decode(body, max_body_bytes=len(body) - 1)
    assert refused.value.reason == "too_large"
    assert str(refused.value) == (
        f"message of {len(body):,} bytes is over max_body_bytes {len(body) - 1:,}"
    )
    # a body the channel cut to its head as it arrived: the size it declared counts
    with pytest.raises(wire.BadEnvelope, match=r"message of 5,000,000 bytes is over max_body"):
        wire.decode(body[:4096], max_body_bytes=1 << 20, body_size=5_000_000)


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_nova_message_nested_past_the_depth_limit_is_answered_naming_it() -> None:
    # the message is level 0 and its args level 1: n lists inside args reach level n + 1
    within = wire.decode(_body(_call(a=_nested(MAX_DEPTH - 1))), max_body_bytes=1 << 20)
    assert within.is_call
    with pytest.raises(wire.BadEnvelope) as refused:
        wire.decode(_body(_call(a=_nested(MAX_DEPTH))), max_body_bytes=1 << 20)
    assert refused.value.reason == "too_deep"
    assert str(refused.value) == f"message nests deeper than {MAX_DEPTH} levels"
    # the call named where to answer: the caller is told, not left to time out
    assert (refused.value.reply_q, refused.value.msg_id) == ("reply_1", "m1")


@pytest.mark.parametrize("where", ["body", "oslo.message"])
def test_regression_json_nested_past_pythons_recursion_limit_is_bad_input_not_a_crash(
    where: str,
) -> None:
    """A 200 KB body of nested arrays made ``json.loads`` raise RecursionError out of
    ``wire.decode`` (not a BadEnvelope): the endpoint's delivery task died with the
    message neither answered, dead-lettered nor acked."""
    deep = "[" * 100_000 + "]" * 100_000
    body = deep.encode() if where == "body" else _body(deep)
    with pytest.raises(wire.BadEnvelope) as refused:
        wire.decode(body, max_body_bytes=1 << 20)
    assert refused.value.reason == "too_deep"
    assert f"deeper than {MAX_DEPTH} levels" in str(refused.value)


def _spec(**data: Any) -> dict[str, Any]:
    flavor = {
        "nova_object.name": "Flavor",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.2",
        "nova_object.data": {"memory_mb": 512, "vcpus": 1, "root_gb": 1},
    }
    return {
        "nova_object.name": "RequestSpec",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.14",
        "nova_object.data": {"flavor": flavor, **data},
    }


@pytest.mark.parametrize("field", ["force_hosts", "force_nodes", "ignore_hosts"])
def test_a_request_spec_forcing_or_ignoring_over_10000_names_is_refused_naming_the_bound(
    field: str,
) -> None:
    names = [f"h{i}" for i in range(MAX_FORCED)]
    request = objects.request_from_primitive(_spec(**{field: names}), ["i-1"])
    assert getattr(request.spec, field) == names
    with pytest.raises(objects.UnsupportedObject) as refused:
        objects.request_from_primitive(_spec(**{field: [*names, "one-more"]}), ["i-1"])
    assert str(refused.value) == f"spec_obj.{field} lists 10,001 names, over 10,000"
