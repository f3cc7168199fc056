"""The acceptance test of the whole project: Nova 34's own functional environment, end to end.

``scenario.py`` (run in Nova's venv, ``.venv-nova``) builds Nova's functional
test environment (its API, conductor and 20 fake-driver computes of mixed sizes)
on the real RabbitMQ (a vhost of its own, deleted after) with Placement over
real HTTP, boots 50 servers at once until NoValidHost, resizes, migrates
(confirm, revert), evacuates a forced-down host and deletes everything,
checking servers, Placement usages, capacity and server groups after each
step. It prints one JSON document (``RESULT {...}``).

* ``--scheduler nova``: Nova's own scheduler service. Proves the harness: every
  check must pass.
* ``--scheduler external``: Nova's scheduler is not started; ``actorsched serve
  --nova-config --placement-url`` answers on the bus, follows the run's
  Placement for host state and writes each claim to it before it answers.
  Placement does not hold the hypervisor facts (``supported_instances``, which
  ImagePropertiesFilter reads for the fake image's ``hw_architecture``): the
  scenario writes them to ``host_facts.json`` and serve reads that file
  (``[nova] placement_host_facts``). No host report is sent on actorsched's
  native queue: usage, instances and disabled services come from Placement,
  and the down source of the evacuation is in ``ignore_hosts``. Every check
  must pass.

Both run in ``make test``; the module skips only when Nova's venv (``make
nova-venv``) or rabbitmqctl is not there, and says which. The run through
Nova's own scheduler takes 2.5 minutes on this idle 2-vCPU machine (twice as
long loaded); the external one about 2 minutes (its 50 boots in 32 s; all of
Nova in one eventlet thread). ``benchmarks/nova_boots.py`` runs the scenario
(for ``make bench`` too); ``tests/nova_functional/NOTES.md`` says how the
harness works.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks.nova_boots import (  # noqa: E402
    STEPS,
    Run,
    explain,
    missing,
    run_with_actorsched,
    run_with_nova,
    side_by_side,
)
from benchmarks.report import format_nova_boots  # noqa: E402

pytestmark = [pytest.mark.amqp, pytest.mark.slow]

MISSING = missing()
if MISSING:
    pytest.skip(MISSING, allow_module_level=True)

# each test's run, for the figures side by side (the last test)
RUNS: dict[str, Run] = {}


@pytest.mark.timeout(570)  # 2.5 min idle, 6-7 at load average 5 (within 540 s)
async def test_nova_functional_scenario_passes_with_novas_own_scheduler(tmp_path: Path) -> None:
    run = RUNS["nova"] = await run_with_nova(tmp_path, echo=True)
    result = run.result
    assert result["ok"], explain(result)
    assert run.returncode == 0
    steps = run.steps
    assert list(steps) == list(STEPS)
    boot = steps["boot"]["detail"]
    assert boot["servers"] == 50
    assert boot["reached_no_valid_host"]  # the cloud was filled
    assert boot["active"] + boot["no_valid_host"] == 50
    assert steps["delete"]["check"]["servers"] == 0
    assert result["environment"]["transport_url"].startswith("rabbit://")
    assert result["environment"]["placement_url"].startswith("http://127.0.0.1:")
    timing = result["timing"]
    assert timing["boots_per_second"] > 0
    assert 0 < timing["scheduler_share_of_boot"] < 1
    assert timing["nova_scheduler_manager_seconds_total"] > 0  # Nova's own answered


@pytest.mark.timeout(600)  # 2-3 min idle, 8-10 at load average 6 (within 540 s)
async def test_nova_functional_scenario_with_actorsched_as_novas_scheduler(
    tmp_path: Path,
) -> None:
    from conftest import code_under_test_env

    run = RUNS["actorsched"] = await run_with_actorsched(
        tmp_path, env=code_under_test_env(), echo=True
    )
    result = run.result
    assert result.get("external", {}).get("consumers"), explain(result)
    # serve's own lines (not the client library's reconnects once the vhost is gone)
    said = [line for line in run.serve_log if line.split(" ")[2:3] and "aio" not in line[:60]]
    assert result["ok"], explain(result) + "\nserve:\n" + "".join(said)[-3000:]
    assert run.returncode == 0
    steps = run.steps
    assert all(s["ok"] for s in steps.values()), explain(result)
    assert list(steps) == list(STEPS)
    boot = steps["boot"]["detail"]
    assert boot["servers"] == 50
    assert boot["reached_no_valid_host"]  # the cloud was filled, through actorsched
    assert boot["active"] + boot["no_valid_host"] == 50
    assert steps["delete"]["check"]["servers"] == 0
    assert result["timing"]["select_destinations_calls"] >= 45
    assert result["timing"]["nova_scheduler_manager_seconds_total"] == 0  # not Nova's


def test_boot_figures_side_by_side_as_make_bench_shows_them() -> None:
    """The two runs above, as ``make bench`` reports its own two (benchmarks/nova_boots.py)."""
    if set(RUNS) != {"nova", "actorsched"}:
        pytest.skip("needs both runs above, in this session (run the whole module)")
    notes: list[str] = []
    figures = side_by_side(RUNS["nova"], RUNS["actorsched"], notes)
    assert notes == []  # both runs passed every check
    assert (figures["servers"], figures["computes"]) == (50, 20)
    for key in ("nova", "actorsched"):
        mine = figures[key]
        timing = RUNS[key].result["timing"]
        assert mine["ok"] is True
        assert mine["boots_per_second"] == timing["boots_per_second"] > 0
        assert mine["scheduler_share_of_boot"] == timing["scheduler_share_of_boot"]
        assert 0 < mine["scheduler_share_of_boot"] < 1
        assert mine["active"] + mine["no_valid_host"] == 50
    ratio = figures["actorsched"]["boots_per_second"] / figures["nova"]["boots_per_second"]
    assert figures["boots_per_second_ratio"] == pytest.approx(ratio)
    lines = format_nova_boots(figures)
    nova_line = next(line for line in lines if line.startswith("Nova's scheduler"))
    ours_line = next(line for line in lines if line.startswith("actorsched"))
    assert f"{figures['nova']['scheduler_share_of_boot']:.1%}" in nova_line
    assert f"{figures['actorsched']['boots_per_second']:.2f}" in ours_line
    assert nova_line.endswith("pass")
    assert ours_line.endswith("pass")
