"""The PostgreSQL journal over TLS, against the test run's private cluster (tests/servers.py).

That cluster has ``ssl = on`` with a certificate for 127.0.0.1 and localhost signed
by a CA made for the run; a journal's URL asks for TLS with libpq's own parameters
(``sslmode``, ``sslrootcert``): the journal passes its URL to libpq as it is.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_workload import report
from servers import PrivatePostgres, private_postgres_fixture  # noqa: F401 (a fixture)

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.journal import JournalUnavailable, PostgresJournal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "amqp"))
from amqp_support import AMQP_URL, delete_topology, unique_queue
from conftest import code_under_test_env

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)


@pytest.fixture
def pg(private_postgres: PrivatePostgres) -> PrivatePostgres:
    if private_postgres.ca_cert is None:
        pytest.skip(f"the private cluster has no TLS: {private_postgres.no_tls}")
    return private_postgres


@pytest.fixture
def shard(pg: PrivatePostgres) -> Iterator[str]:
    name = f"test-tls-{uuid.uuid4().hex[:12]}"
    yield name
    if pg.execute("SELECT to_regclass('actorsched_shards') IS NOT NULL") == [(True,)]:
        for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
            pg.execute(f"DELETE FROM {table} WHERE shard = %s", (name,))


def _spec(uuid_: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid_], memory_mb=64, vcpus=1, disk_gb=1)


def _journal_backends(pg: PrivatePostgres, shard: str) -> list[tuple[Any, ...]]:
    """(ssl, TLS version) of each database connection the shard's journals hold now."""
    return pg.execute(
        "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)"
        " WHERE a.application_name = %s",
        (f"actorsched {shard}",),
    )


def _assert_all_encrypted(rows: list[tuple[Any, ...]]) -> None:
    assert rows, "the journal holds no connection"
    assert all(ssl and str(version).startswith("TLSv") for ssl, version in rows), rows


@pytest.mark.parametrize("sslmode", ["require", "verify-ca", "verify-full"])
async def test_a_journal_over_tls_journals_and_recovers_on_encrypted_connections(
    pg: PrivatePostgres, shard: str, sslmode: str
) -> None:
    url = pg.tls_url(sslmode)  # sslrootcert: the run's CA
    journal = PostgresJournal(url, shard=shard)
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_hosts([report(f"h{i}", 1) for i in range(4)])
        for i in range(10):
            await s.select_destinations(_spec(f"vm-{i}"))
        _assert_all_encrypted(_journal_backends(pg, shard))
        before = s.core.digest()
        journal._since_snapshot = 0  # no closing snapshot: recovery replays the records
    [(records,)] = pg.execute("SELECT count(*) FROM actorsched_records WHERE shard = %s", (shard,))
    assert records >= 14, "every report and claim went over TLS into the journal"
    async with Scheduler(CONFIG, journal=PostgresJournal(url, shard=shard)) as again:
        assert again.core.digest() == before
        assert len(again.core.ledger) == 10
        _assert_all_encrypted(_journal_backends(pg, shard))


async def test_pg_stat_ssl_tells_a_connection_without_tls(pg: PrivatePostgres, shard: str) -> None:
    # the check above means something: the same server, asked for no TLS, shows none
    journal = PostgresJournal(f"{pg.url}?sslmode=disable", shard=shard)
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_host(report("h1", 1))
        rows = _journal_backends(pg, shard)
        assert rows
        assert all(not ssl for ssl, _ in rows), rows


async def test_verify_full_with_the_wrong_ca_fails_at_start_saying_why(
    pg: PrivatePostgres, shard: str
) -> None:
    assert pg.wrong_ca_cert is not None
    journal = PostgresJournal(pg.tls_url("verify-full", pg.wrong_ca_cert), shard=shard)
    with pytest.raises(JournalUnavailable) as failed:
        async with Scheduler(CONFIG, journal=journal):
            pytest.fail("started against a server whose certificate it cannot verify")
    said = str(failed.value)
    assert "cannot connect to journal" in said, said
    assert "certificate verify failed" in said, said
    assert f"shard '{shard}'" in said, said
    assert _journal_backends(pg, shard) == [], "no connection got through"


async def test_verify_full_checks_the_name_the_url_gives(pg: PrivatePostgres, shard: str) -> None:
    # connect to 127.0.0.1 but name the server other.invalid: the CA is right, the name
    # is not in the certificate (127.0.0.1 and localhost are); verify-ca does not look
    named = (
        pg.url.replace("127.0.0.1", "other.invalid")
        + f"?hostaddr=127.0.0.1&sslrootcert={pg.ca_cert}"
    )
    with pytest.raises(JournalUnavailable, match=r'does not match host name "other\.invalid"'):
        async with Scheduler(CONFIG, journal=PostgresJournal(f"{named}&sslmode=verify-full")):
            pytest.fail("verify-full accepted a certificate for another name")
    journal = PostgresJournal(f"{named}&sslmode=verify-ca", shard=shard)
    async with Scheduler(CONFIG, journal=journal) as s:
        assert await s.update_host(report("h1", 1))
        _assert_all_encrypted(_journal_backends(pg, shard))


@pytest.mark.amqp
async def test_serve_with_the_wrong_ca_exits_at_start_with_one_line_saying_why(
    pg: PrivatePostgres, shard: str
) -> None:
    assert pg.wrong_ca_cert is not None
    queue = unique_queue()
    url = pg.tls_url("verify-full", pg.wrong_ca_cert)
    try:
        serve = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "actorsched.cli", "serve", "--amqp-url", AMQP_URL),
            *("--queue", queue, "--journal", url, "--shard", shard, "--create-journal"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=code_under_test_env(),
        )
        _, err = await asyncio.wait_for(serve.communicate(), 60)
    finally:
        await delete_topology(AMQP_URL, queue)
    said = err.decode(errors="replace").strip()
    assert serve.returncode == 1, said
    assert "failed to start" in said, said
    assert "certificate verify failed" in said, said
    assert _journal_backends(pg, shard) == []
