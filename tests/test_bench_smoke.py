"""Smoke run of ``actorsched bench`` at tiny sizes, so the benchmark code cannot rot.

It checks the shape and sanity of the results, never a timing: the figures
of a shared CI machine mean nothing at these sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from benchmarks import integrations, run
from benchmarks.workload import make_reports, make_specs

AMQP_URL = os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    return parser.parse_args(
        [
            "--quick",
            "--no-amqp",
            "--nova-python",
            str(tmp_path / "no-nova" / "python"),  # the bench must run on without real Nova
            "--out",
            str(tmp_path / "latest.json"),
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp_path = tmp_path_factory.mktemp("bench")
    stderr = io.StringIO()
    # with the progress bar on (no --no-progress): it draws on stderr
    with contextlib.redirect_stderr(stderr):
        assert run.main(_args(tmp_path, "--profile")) == 0
    loaded: dict[str, object] = json.loads((tmp_path / "latest.json").read_text())
    loaded["_dir"] = str(tmp_path)
    loaded["_stderr"] = stderr.getvalue()
    return loaded


def test_results_have_every_section(results: dict[str, object]) -> None:
    for key in ("meta", "placements", "core_placements", "ratios", "host_reports", "memory"):
        assert key in results, key
    assert "targets" in results
    assert "profile" in results


def test_every_placement_run_placed_something(results: dict[str, object]) -> None:
    placements = results["placements"]
    assert isinstance(placements, list)
    ours = [p for p in placements if p["scheduler"] == "actorsched"]
    assert {(p["hosts"], p["concurrency"]) for p in ours} == {
        (h, c) for h in (50, 300) for c in (1, 16)
    }
    for p in placements:
        assert p["placed"] > 0, p
        assert p["errors"] == 0, p
        assert p["placements_per_s"] > 0, p
        assert 0 <= p["p50_ms"] <= p["p99_ms"] <= p["max_ms"], p
    for p in ours:
        assert p["over_capacity_hosts"] == 0, p


def test_baselines_ran_with_ratios(results: dict[str, object]) -> None:
    names = {p["scheduler"] for p in results["placements"]}  # type: ignore[attr-defined]
    assert {"locked", "unsynchronized", "nova-chain"} <= names
    ratios = results["ratios"]
    assert isinstance(ratios, list)
    assert {r["baseline"] for r in ratios} == {"locked", "unsynchronized", "nova-chain"}
    assert all(r["ratio"] > 0 for r in ratios)


def test_host_reports_and_memory_are_sane(results: dict[str, object]) -> None:
    reports = results["host_reports"]
    assert isinstance(reports, dict)
    assert reports["core_per_s"] > 0
    assert reports["scheduler_64_callers_per_s"] > 0
    memory = results["memory"]
    assert isinstance(memory, dict)
    assert memory["hosts"] == 2_000
    assert memory["rss_after_mib"] > memory["rss_before_mib"] > 0


def test_targets_have_a_verdict_each(results: dict[str, object]) -> None:
    targets = results["targets"]
    assert isinstance(targets, list)
    # the core and journal issues', fail-over, stall, two floods, the realistic mix's two,
    # the waiting requests' wake-up, the preempting placements' p99, the authorization's cost
    assert len(targets) == 17
    assert {t["status"] for t in targets} <= {"PASS", "FAIL", "n/a"}


def test_the_authorization_cost_is_measured(results: dict[str, object]) -> None:
    cost = results["auth_cost"]
    assert isinstance(cost, dict), cost
    assert cost["checked_us_per_message"] > cost["plain_us_per_message"] > 0
    assert cost["added_us_per_message"] > 0
    targets = results["targets"]
    assert isinstance(targets, list)
    (target,) = [t for t in targets if t["target"].startswith("authorization")]
    assert target["status"] in ("PASS", "FAIL", "n/a")


def test_waiting_bench_ran(results: dict[str, object]) -> None:
    waiting = results["waiting"]
    assert isinstance(waiting, dict), waiting
    assert waiting["hosts"] == 100
    assert waiting["requests"] == 1_000
    assert waiting["waiting_requests"] > 0
    assert waiting["placements_per_s"] > 0
    assert waiting["plain_placements_per_s"] > 0
    assert waiting["wake_p50_ms"] is not None
    assert waiting["wake_p99_ms"] >= waiting["wake_p50_ms"]


def test_journal_bench_ran(results: dict[str, object]) -> None:
    journal = results["journal"]
    assert isinstance(journal, dict), journal
    assert journal["placements_per_s_off"] > 0, journal
    assert journal["placements_per_s_on"] > 0, journal
    assert journal["ratio"] > 0, journal
    assert len(journal["ratios"]) == 1, journal  # --quick: one off/on pair
    assert journal["transactions"] >= 1, journal


def test_progress_bar_was_drawn(results: dict[str, object]) -> None:
    stderr = results["_stderr"]
    assert isinstance(stderr, str)
    assert "\r[" in stderr, stderr[:500]
    assert "journal on vs off" in stderr
    assert "plots" in stderr
    assert "#" * 24 in stderr, "the bar never reached the end"


@pytest.mark.amqp
async def test_amqp_bench_places_through_the_broker() -> None:
    notes: list[str] = []
    concurrency = 8
    result = await integrations.amqp(
        make_reports(20), make_specs(200), concurrency, 1.0, notes, url=AMQP_URL
    )
    assert result is not None, notes
    for key in (
        "hosts",
        "concurrency",
        "calls",
        "placed",
        "no_valid_host",
        "errors",
        "placements_per_s",
        "messages_per_call",
        "p50_ms",
        "p99_ms",
        "max_ms",
        f"placements_per_s_{concurrency}_clients",
        f"p99_ms_{concurrency}_clients",
    ):
        assert key in result, (key, sorted(result))
    assert result["hosts"] == 20
    assert result["concurrency"] == concurrency
    assert result["placed"] > 0, result
    assert result["errors"] == 0, result
    assert result["placements_per_s"] > 0, result
    assert result[f"placements_per_s_{concurrency}_clients"] > 0, result
    assert result["messages_per_call"] > 0, result
    assert 0 <= result["p50_ms"] <= result["p99_ms"] <= result["max_ms"], result


def test_plots_and_profile_are_written(results: dict[str, object]) -> None:
    folder = Path(str(results["_dir"]))
    assert (folder / "throughput.png").stat().st_size > 0
    assert (folder / "latency.png").stat().st_size > 0
    profile = results["profile"]
    assert isinstance(profile, dict)
    assert Path(profile["path"]).read_text().startswith("pyinstrument")


def test_the_failover_run_killed_the_active_each_round(results: dict[str, object]) -> None:
    failover = results["failover"]
    assert isinstance(failover, dict)
    assert failover["actorsched"]["rounds"] == 2
    assert failover["broker"]["rounds"] == 2
    ours = failover["actorsched"]["failover"]
    assert 0 < ours["p50_s"] <= ours["p99_s"]


def test_the_stall_probe_timed_the_owner_step(results: dict[str, object]) -> None:
    stall = results["host_states_stall"]
    assert isinstance(stall, dict)
    assert stall["hosts"] == 5_000
    assert 0 < stall["owner_step_ms"] <= stall["owner_step_max_ms"]


def test_the_trait_flood_was_refused_past_the_vocabulary(results: dict[str, object]) -> None:
    flood = results["trait_flood"]
    assert isinstance(flood, dict)
    assert flood["reports"] == 200
    assert flood["refused"] == 199
    assert flood["vocabulary"] == 1_000


@pytest.mark.amqp
async def test_the_body_flood_is_cut_to_heads_and_the_baseline_reads_it_whole() -> None:
    from benchmarks.hostile import body_flood

    flood = await body_flood(AMQP_URL, bodies=2, body_mib=24)
    # a measurement, not a timing: cut, two 24 MiB bodies add next to nothing;
    # read whole (the baseline), at least one of them is resident at once
    assert flood["peak_rss_growth_mib"] < 16
    assert flood["uncapped_peak_rss_growth_mib"] > 24


def test_the_realistic_mix_filled_each_cluster_beside_the_plain_figure(
    results: dict[str, object],
) -> None:
    realistic = results["realistic"]
    assert isinstance(realistic, dict), results.get("notes")
    rows = realistic["rows"]
    assert {(r["hosts"], r["concurrency"]) for r in rows} == {
        (h, c) for h in (50, 300) for c in (1, 16)
    }
    for r in rows:
        assert r["reached_fill"], r
        assert 0.9 <= r["fill"] < 0.95, r
        assert r["placed"] > 0, r
        assert r["reports"] > 0, r
        assert r["requests"] == r["placed"] + r["no_valid_host"], r
        assert r["requests_per_s"] > 0, r
        assert r["plain_placements_per_s"] > 0, r
        assert r["realistic_over_plain"] > 0, r
    assert realistic["nova"] == []
    notes = results["notes"]
    assert isinstance(notes, list)
    assert sum("real Nova not measured" in n for n in notes) == 1, notes


def test_the_summary_shows_the_realistic_rows(results: dict[str, object]) -> None:
    from benchmarks.report import format_summary

    summary = format_summary(results)
    assert "realistic mix, filled from empty to 90% of RAM" in summary
    assert "note: real Nova not measured: no Nova venv at" in summary
    assert "x real Nova, realistic mix, 1,000 hosts" in summary


def test_preemption_bench_ran(results: dict[str, object]) -> None:
    preemption = results["preemption"]
    assert isinstance(preemption, dict), preemption
    assert preemption["hosts"] == 100
    assert preemption["requests"] == 20
    assert preemption["victims_per_preemption"] == 2.0  # two of the four 2,048 MB claims
    assert preemption["preempting_p99_ms"] >= preemption["preempting_p50_ms"] > 0
    assert preemption["plain_p50_ms"] > 0


def test_nova_manager_is_a_section_of_a_full_run_only(results: dict[str, object]) -> None:
    assert "nova_manager" not in results  # --quick (and --no-amqp) leave it out
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    assert not run._skip_nova_manager(parser.parse_args([]))
    for flag in ("--quick", "--no-amqp", "--no-nova", "--no-nova-manager"):
        assert run._skip_nova_manager(parser.parse_args([flag])), flag


def test_the_summary_shows_nova_managers_three_servers() -> None:
    from benchmarks.report import format_nova_manager

    def part(rate: float, p99: float) -> dict[str, object]:
        return {
            "calls_per_s": rate,
            "p50_ms": p99 / 2,
            "p99_ms": p99,
            "server_cpu_ms_per_call": 1.5,
        }

    lines = format_nova_manager(
        {
            "hosts": 1_000,
            "callers": 2,
            "actorsched": part(220.0, 30.0),
            "actorsched_native": part(330.0, 15.0),
            "nova": part(2.1, 1278.8),
        }
    )
    assert "select_destinations at 1,000 hosts, 2 caller processes" in lines[1]
    (nova,) = [line for line in lines if line.startswith("Nova 34 nova-scheduler")]
    assert nova.split()[-4:] == ["2.10", "639", "1,279", "1.50"]
    assert sum(line.startswith("actorsched,") for line in lines) == 2
