"""The names ``actorsched`` exports: exactly these, and each one importable."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import actorsched

# Issue 2's required names ...
REQUIRED = {
    "Scheduler",
    "SchedulerConfig",
    "HostReport",
    "RequestSpec",
    "ServerGroup",
    "Selection",
    "HostState",
    "SchedulerError",
    "NoValidHost",
    "InvalidRequest",
    "SchedulerStopped",
}
# ... plus the documented plug-in protocol for custom filters and weighers.
PLUGIN_PROTOCOL = {"HostFilter", "HostWeigher", "PerHostFilter", "PlacementContext"}
# ... and what a caller that cannot wait gets from a full mailbox (issue 12).
BOUNDS = {"MailboxFull"}
# ... and the host aggregate the admin operations answer, and where a request
# must go (Nova's requested_destination), issue 14.
AGGREGATES = {"Aggregate"}
DESTINATION = {"Destination"}
# ... and what a reschedule with no alternate left raises (issue 16).
RESCHEDULE = {"MaxRetriesExceeded"}
EXPECTED = REQUIRED | PLUGIN_PROTOCOL | BOUNDS | AGGREGATES | DESTINATION | RESCHEDULE


def test_all_is_exactly_the_public_api() -> None:
    assert set(actorsched.__all__) == EXPECTED
    assert len(actorsched.__all__) == len(set(actorsched.__all__)), "duplicates in __all__"


def test_required_names_are_exported() -> None:
    assert set(actorsched.__all__) >= REQUIRED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_name_is_importable(name: str) -> None:
    module = importlib.import_module("actorsched")
    obj = getattr(module, name)
    assert obj is not None
    # defined in the package (not a stray re-export from a third-party library)
    assert getattr(obj, "__module__", "").startswith("actorsched")


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from actorsched import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == EXPECTED


def test_errors_share_one_base() -> None:
    for cls in (
        actorsched.NoValidHost,
        actorsched.InvalidRequest,
        actorsched.MailboxFull,
        actorsched.SchedulerStopped,
    ):
        assert issubclass(cls, actorsched.SchedulerError)
    assert issubclass(actorsched.SchedulerError, Exception)
    assert issubclass(actorsched.MaxRetriesExceeded, actorsched.NoValidHost)


def test_package_is_typed() -> None:
    assert actorsched.__file__ is not None
    assert (Path(actorsched.__file__).parent / "py.typed").is_file()
