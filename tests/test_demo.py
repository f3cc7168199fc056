"""``actorsched demo`` runs both scenarios and shows over-commit only where it happens."""

from __future__ import annotations

import re

import pytest

from actorsched.cli import main
from actorsched.demo import cluster, single_host

Row = dict[str, int]


def parse_tables(out: str) -> list[dict[str, Row]]:
    """Each printed table as scheduler name -> figures by column name."""
    tables: list[dict[str, Row]] = []
    header: list[str] = []
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == "scheduler":
            header = cells[1:]
            tables.append({})
        elif header and len(cells) == len(header) + 1 and not line.startswith("-"):
            figures = [int(c.replace(",", "")) for c in cells[1:]]
            tables[-1][cells[0]] = dict(zip(header, figures, strict=True))
    return tables


def test_demo_shows_overcommit_for_the_unsynchronized_manager_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["demo", "--hosts", "40", "--requests", "240", "--single-host-requests", "40"]
    code = main([*argv, "--concurrency", "16", "--reports", "60", "--seed", "1"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out
    # progress while it runs, one line per scheduler and scenario, on stderr
    progress = [line for line in captured.err.splitlines() if line.startswith("  Scenario")]
    assert len(progress) == 6, captured.err
    assert progress[0].startswith("  Scenario 1: unsynchronized (Nova 2015) ... ")
    assert progress[-1].endswith(" s")
    tables = parse_tables(out)
    assert len(tables) == 2, out
    names = ["unsynchronized (Nova 2015)", "locked (Nova 2016)", "actorsched"]
    for table, requests in zip(tables, (40, 240), strict=True):
        assert list(table) == names
        for row in table.values():
            assert row["placed"] + row["NoValidHost"] == requests
            assert row["placements/s"] > 0
        unsynchronized = table[names[0]]
        assert unsynchronized["hosts over capacity"] >= 1
        assert unsynchronized["lowest free RAM seen (MB)"] < 0
        for safe in names[1:]:
            assert table[safe]["hosts over capacity"] == 0
            assert table[safe]["lowest free RAM seen (MB)"] >= 0
    # one host of 32 GB less 512 MB reserved holds exactly 15 creates of 2 GB
    assert tables[0]["actorsched"]["placed"] == 15
    assert tables[0]["locked (Nova 2016)"]["placed"] == 15
    assert tables[0][names[0]]["placed"] == 16  # all 16 in flight chose the empty host
    assert "no host went over capacity" in out


def test_cluster_asks_for_more_ram_than_it_has() -> None:
    hosts, creates = cluster(hosts=100, requests=2000, seed=3)
    assert len(hosts) == 100
    assert len({h.host for h in hosts}) == 100
    assert len({c.instance_uuids[0] for c in creates}) == 2000
    capacity = sum(h.memory_mb - h.memory_mb_reserved for h in hosts)
    assert 1.1 < sum(c.memory_mb for c in creates) / capacity < 1.5
    assert cluster(hosts=100, requests=2000, seed=3) == (hosts, creates)


def test_single_host_holds_fifteen() -> None:
    [host], creates = single_host(200)
    usable = host.memory_mb - host.memory_mb_reserved
    assert len(creates) == 200
    assert usable // creates[0].memory_mb == 15


@pytest.mark.parametrize(
    ("option", "value"), [("--hosts", "0"), ("--concurrency", "0"), ("--yield-delay", "-1")]
)
def test_demo_rejects_nonsense_sizes(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", option, value])
    assert info.value.code == 2
    assert f"argument {option}: must be" in capsys.readouterr().err
