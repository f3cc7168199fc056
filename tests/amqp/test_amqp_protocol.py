"""The wire protocol without a broker: decoding, replies, and the schema file."""

from __future__ import annotations

import json

import pytest

import actorsched.amqp
from actorsched import InvalidRequest, NoValidHost, RequestSpec, SchedulerError, Selection
from actorsched.amqp.protocol import (
    MAX_BATCH_ITEMS,
    OPERATIONS,
    SCHEMA_PATH,
    BadMessage,
    BatchRequest,
    ReleaseRequest,
    ReleaseResult,
    decode_batch_item,
    decode_batch_reply,
    decode_reply,
    decode_request,
    encode_batch_ok,
    encode_error,
    encode_ok,
    json_schema,
    render_schema,
)

SPEC = b'{"instance_uuids": ["vm-1"], "memory_mb": 512, "vcpus": 1, "disk_gb": 1}'


def test_exported_names_are_exactly_these() -> None:
    assert sorted(actorsched.amqp.__all__) == sorted(
        [
            "DEFAULT_QUEUE",
            "DEFAULT_URL",
            "OPERATIONS",
            "BadMessage",
            "MetricsServer",
            "SchedulerClient",
            "SchedulerService",
            "ServiceMetrics",
        ]
    )


def test_a_valid_select_destinations_decodes_to_a_request_spec() -> None:
    op, request = decode_request("select_destinations", SPEC, content_type="application/json")
    assert op.name == "select_destinations"
    assert request == RequestSpec(instance_uuids=["vm-1"], memory_mb=512, vcpus=1, disk_gb=1)


@pytest.mark.parametrize(
    ("op_name", "body", "content_type", "reason"),
    [
        ("select_destinations", b"x" * 101, None, "too-large"),
        ("reserve_everything", SPEC, None, "unknown-type"),
        (None, SPEC, None, "unknown-type"),
        ("select_destinations", SPEC, "text/plain", "content-type"),
        ("select_destinations", b"{not json", None, "not-json"),
        ("select_destinations", b"\xff\xfe\xfa", None, "not-utf8"),
        # valid JSON in UTF-16, which json.loads alone would take: the protocol is UTF-8
        ("release", '{"instance_uuid": "vm-1"}'.encode("utf-16"), None, "not-utf8"),
        ("release", b'{"instance_uuid": NaN}', None, "not-json"),
        ("release", b'{"instance_uuid": "a", "instance_uuid": "b"}', None, "duplicate-keys"),
        ("select_destinations", b'{"instance_uuids": []}', None, "schema"),
        ("select_destinations", b'{"memory_mb": "512"}', None, "schema"),
        ("host_states", b'{"extra": 1}', None, "schema"),
        ("host_states", b"[]", None, "schema"),
    ],
)
def test_each_kind_of_bad_input_has_its_reason(
    op_name: str | None, body: bytes, content_type: str | None, reason: str
) -> None:
    with pytest.raises(BadMessage) as caught:
        decode_request(op_name, body, content_type=content_type, max_body_bytes=100)
    assert caught.value.reason == reason
    assert str(caught.value)  # a message a person can act on


def test_the_size_cap_is_checked_before_parsing() -> None:
    # a body over the cap is refused as too large even though it is not JSON either
    with pytest.raises(BadMessage) as caught:
        decode_request("nope", b"\x00" * 2_000_000)
    assert caught.value.reason == "too-large"
    assert "2000000 bytes" in str(caught.value)


def test_a_bad_message_reply_reads_back_as_invalid_request() -> None:
    bad = BadMessage("schema", "select_destinations body does not match RequestSpec")
    with pytest.raises(InvalidRequest, match="does not match RequestSpec"):
        decode_reply(OPERATIONS["select_destinations"], encode_error(bad))


def test_no_valid_host_stays_no_valid_host_with_its_filter_counts() -> None:
    error = NoValidHost(
        "0/3 hosts are available", instance_uuid="vm-9", total_hosts=3, filter_counts={"Ram": 3}
    )
    with pytest.raises(NoValidHost) as caught:
        decode_reply(OPERATIONS["select_destinations"], encode_error(error))
    assert str(caught.value) == "0/3 hosts are available"
    assert caught.value.instance_uuid == "vm-9"
    assert caught.value.total_hosts == 3
    assert caught.value.filter_counts == {"Ram": 3}


def test_an_ok_reply_round_trips_and_has_the_documented_shape() -> None:
    op = OPERATIONS["select_destinations"]
    selections = [Selection(instance_uuid="vm-1", host="h1", alternates=["h2"])]
    body = encode_ok(op, selections)
    assert json.loads(body) == {
        "ok": True,
        "result": [{"instance_uuid": "vm-1", "host": "h1", "alternates": ["h2"]}],
    }
    assert decode_reply(op, body) == selections


def test_schema_file_matches_the_models() -> None:
    # regenerate with: python -m actorsched.amqp --write-schema
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema(), (
        "docs/schema.json drifted from the models; run `python -m actorsched.amqp --write-schema`"
    )


def test_schema_covers_every_operation() -> None:
    schema = json_schema()
    assert set(schema["operations"]) == set(OPERATIONS)
    for name, op in OPERATIONS.items():
        ref = schema["operations"][name]["request"]["$ref"]
        assert ref == f"#/$defs/{op.request.__name__}"
        assert op.request.__name__ in schema["$defs"]


def test_a_batch_envelope_decodes_and_each_item_is_checked_on_its_own() -> None:
    body = (
        b'{"requests": [{"type": "release", "body": {"instance_uuid": "vm-1"}},'
        b' {"type": "nope", "body": {}}, {"type": "release", "body": {"instance_uuid": 1}}]}'
    )
    op, request = decode_request("batch", body)
    assert op.name == "batch"
    assert isinstance(request, BatchRequest)
    good, unknown, schema = request.requests
    item_op, release = decode_batch_item(good)
    assert (item_op.name, release) == ("release", ReleaseRequest(instance_uuid="vm-1"))
    with pytest.raises(BadMessage) as caught:
        decode_batch_item(unknown)
    assert caught.value.reason == "unknown-type"
    with pytest.raises(BadMessage) as caught:
        decode_batch_item(schema)
    assert caught.value.reason == "schema"


def test_a_batch_reply_splits_into_each_callers_result_or_error() -> None:
    ops = [OPERATIONS["release"], OPERATIONS["select_destinations"]]
    no_host = NoValidHost("0/1 hosts", instance_uuid="vm-2", total_hosts=1, filter_counts={"R": 1})
    body = encode_batch_ok([encode_ok(ops[0], ReleaseResult(released=True)), encode_error(no_host)])
    assert json.loads(body) == {
        "ok": True,
        "result": [
            {"ok": True, "result": {"released": True}},
            {
                "ok": False,
                "error": {"type": "NoValidHost", "message": "0/1 hosts", "instance_uuid": "vm-2",
                          "total_hosts": 1, "filter_counts": {"R": 1}},
            },
        ],
    }  # fmt: skip
    released, error = decode_batch_reply(ops, body)
    assert released == ReleaseResult(released=True)
    assert isinstance(error, NoValidHost)
    assert (error.instance_uuid, error.filter_counts) == ("vm-2", {"R": 1})
    # refused as a whole: every caller gets its own copy of the error
    whole = decode_batch_reply(ops, encode_error(BadMessage("schema", "not a batch")))
    assert [type(e) for e in whole] == [InvalidRequest, InvalidRequest]
    assert whole[0] is not whole[1]
    # a reply with the wrong number of items is an error for everyone, not a wrong answer
    short = encode_batch_ok([encode_ok(ops[0], ReleaseResult(released=True))])
    assert all(type(e) is SchedulerError for e in decode_batch_reply(ops, short))


def test_a_batch_may_not_exceed_its_item_cap() -> None:
    item = b'{"type": "host_states", "body": {}}'
    body = b'{"requests": [' + b",".join([item] * (MAX_BATCH_ITEMS + 1)) + b"]}"
    with pytest.raises(BadMessage) as caught:
        decode_request("batch", body)
    assert caught.value.reason == "schema"
