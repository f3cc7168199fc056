"""PostgreSQL drivers for the journal's group commit: psycopg 3 against asyncpg.

A journal on PostgreSQL commits each group of records with ONE statement in
autocommit mode: a CTE that moves the shard's fence (``last_seq``, checked
against the writer's ``epoch`` and the previous ``last_seq``) and inserts the
group through ``unnest`` of one array per column only when the fence moved.
This measures commits/s and records/s of that statement for groups of 1, 16
and 256 records (bodies of ~300 bytes of JSON), with

* psycopg 3, sync connection, driven from a thread (as the journal's writer
  thread would);
* psycopg 3, ``AsyncConnection``;
* asyncpg;
* psycopg 3, sync, pipeline mode, sending ``BEGIN``; ``UPDATE``; ``INSERT``;
  ``COMMIT`` as four statements in one pipeline (one round trip), to compare
  with the single CTE statement. A pipeline cannot branch on the UPDATE's row
  count, so the INSERT re-checks the fence (the shard's new ``last_seq``).

psycopg sends parameters in text (``%s``) by default; for arrays of JSON that
means quoting every element on the client and parsing the array literal on the
server, so the psycopg variants send them in binary (``%b``), as asyncpg
always does, and the sync one is also run with ``%s`` to show what the default
costs.

Every variant runs on the same writer thread (the async ones in an event loop
of their own there), with a connection of its own opened and warmed up
(statements prepared) before it is timed. The variants take turns, round
after round, so they all see the same spells of a noisy machine, and the
medians are printed. The tables are emptied between runs and dropped at the
end.

Run: ``python -m benchmarks.pg_drivers [rounds] [seconds-per-run]`` (default
7 rounds of 0.5 s) against ``postgresql://postgres@127.0.0.1:5432/test``
(``make postgresql`` starts one); ``PG_DSN`` overrides the DSN.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psycopg

try:
    import asyncpg  # type: ignore[import-untyped, import-not-found, unused-ignore]
except ImportError:  # not a dependency of the project: only this benchmark uses it
    asyncpg = None

__all__ = ["main"]

DSN = os.environ.get("PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
GROUP_SIZES = (1, 16, 256)
WARMUP_COMMITS = 10
EPOCH = 1

CREATE = (
    "DROP TABLE IF EXISTS bench_records, bench_shards",
    "CREATE TABLE bench_records (shard text, seq bigint, epoch bigint, kind text,"
    " now float8, body text, crc bigint, PRIMARY KEY (shard, seq))",
    "CREATE TABLE bench_shards (shard text PRIMARY KEY, epoch bigint, last_seq bigint)",
)
DROP = "DROP TABLE IF EXISTS bench_records, bench_shards"

_UNNEST = (
    "FROM unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(nows)s::float8[],"
    " %(bodies)s::text[], %(crcs)s::bigint[]) AS r(seq, kind, now, body, crc)"
)
_INSERT_SELECT = (
    "INSERT INTO bench_records (shard, seq, epoch, kind, now, body, crc)"
    " SELECT %(shard)s::text, r.seq, %(epoch)s::bigint, r.kind, r.now, r.body, r.crc "
)

# the journal's commit: one statement, fence and records together
COMMIT_CTE = (
    "WITH fence AS (UPDATE bench_shards SET last_seq = %(last)s::bigint"
    " WHERE shard = %(shard)s::text AND epoch = %(epoch)s::bigint"
    " AND last_seq = %(prev)s::bigint RETURNING 1) "
    + _INSERT_SELECT
    + _UNNEST
    + " WHERE EXISTS (SELECT 1 FROM fence)"
)

# the same commit as separate statements, for the pipeline
FENCE_UPDATE = (
    "UPDATE bench_shards SET last_seq = %(last)s::bigint"
    " WHERE shard = %(shard)s::text AND epoch = %(epoch)s::bigint"
    " AND last_seq = %(prev)s::bigint"
)
FENCED_INSERT = (
    _INSERT_SELECT
    + _UNNEST
    + " WHERE EXISTS (SELECT 1 FROM bench_shards WHERE shard = %(shard)s::text"
    " AND epoch = %(epoch)s::bigint AND last_seq = %(last)s::bigint)"
)

# asyncpg takes $n placeholders, in this order
ASYNCPG_ORDER = ("shard", "epoch", "prev", "last", "seqs", "kinds", "nows", "bodies", "crcs")


def _dollars(query: str) -> str:
    return re.sub(r"%\((\w+)\)s", lambda m: f"${ASYNCPG_ORDER.index(m[1]) + 1}", query)


def _binary(query: str) -> str:
    """``query`` with every parameter sent in binary (``%(name)b``)."""
    return re.sub(r"%\((\w+)\)s", r"%(\1)b", query)


COMMIT_CTE_ASYNCPG = _dollars(COMMIT_CTE)
COMMIT_CTE_BINARY = _binary(COMMIT_CTE)


class FenceLost(RuntimeError):
    """The commit did not move the fence (or inserted fewer records than sent)."""


@dataclass(frozen=True, slots=True)
class Group:
    """The records of one commit, less their sequence numbers."""

    kinds: list[str]
    nows: list[float]
    bodies: list[str]
    crcs: list[int]

    @property
    def size(self) -> int:
        return len(self.bodies)

    def params(self, shard: str, prev: int) -> dict[str, Any]:
        last = prev + self.size
        return {
            "shard": shard,
            "epoch": EPOCH,
            "prev": prev,
            "last": last,
            "seqs": list(range(prev + 1, last + 1)),
            "kinds": self.kinds,
            "nows": self.nows,
            "bodies": self.bodies,
            "crcs": self.crcs,
        }


def make_group(size: int) -> Group:
    """``size`` placement-like records, each with ~300 bytes of JSON and its CRC."""
    bodies = []
    for i in range(size):
        body = json.dumps(
            {
                "request_id": f"req-{i:08d}-{'0' * 23}",
                "instance_uuid": f"{i:08x}-5e1f-4c3b-9a2d-0123456789ab",
                "host": f"compute-{i % 997:04d}.rack-{i % 31:02d}.example.net",
                "node": f"node-{i % 997:04d}",
                "resources": {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
                "aggregates": ["az-1", "ssd"],
                "generation": 1000 + i,
            },
            separators=(",", ":"),
        )
        bodies.append(body)
    return Group(
        kinds=["placement"] * size,
        nows=[time.time()] * size,
        bodies=bodies,
        crcs=[zlib.crc32(b.encode()) for b in bodies],
    )


@dataclass(frozen=True, slots=True)
class Run:
    commits: int
    seconds: float
    cpu_seconds: float  # the writer thread's own CPU time (thread_time) over the run


Measure = Callable[[Group, str, float], Run]
MeasureAsync = Callable[[Group, str, float], Coroutine[Any, Any, Run]]


def _timed(commit: Callable[[], None], seconds: float) -> Run:
    for _ in range(WARMUP_COMMITS):
        commit()
    commits = 0
    cpu = time.thread_time()
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        commit()
        commits += 1
        now = time.perf_counter()
        if now >= deadline:
            return Run(commits, now - started, time.thread_time() - cpu)


async def _timed_async(commit: Callable[[], Awaitable[None]], seconds: float) -> Run:
    for _ in range(WARMUP_COMMITS):
        await commit()
    commits = 0
    cpu = time.thread_time()
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        await commit()
        commits += 1
        now = time.perf_counter()
        if now >= deadline:
            return Run(commits, now - started, time.thread_time() - cpu)


def _check(inserted: int, group: Group) -> None:
    if inserted != group.size:
        raise FenceLost(f"inserted {inserted} records of {group.size}")


def psycopg_sync(query: str) -> Measure:
    def measure(group: Group, shard: str, seconds: float) -> Run:
        with psycopg.connect(DSN, autocommit=True) as conn:
            prev = 0

            def commit() -> None:
                nonlocal prev
                params = group.params(shard, prev)
                _check(conn.execute(query, params).rowcount, group)
                prev = params["last"]

            return _timed(commit, seconds)

    return measure


def psycopg_pipeline(group: Group, shard: str, seconds: float) -> Run:
    update_query, insert_query = _binary(FENCE_UPDATE), _binary(FENCED_INSERT)
    with psycopg.connect(DSN, autocommit=True) as conn, conn.pipeline() as pipeline:
        prev = 0

        def commit() -> None:
            nonlocal prev
            params = group.params(shard, prev)
            conn.execute("BEGIN")
            update = conn.execute(update_query, params)
            insert = conn.execute(insert_query, params)
            conn.execute("COMMIT")
            pipeline.sync()  # one round trip for the four
            if update.rowcount != 1:
                raise FenceLost("the fence did not move")
            _check(insert.rowcount, group)
            prev = params["last"]

        return _timed(commit, seconds)


async def psycopg_async(group: Group, shard: str, seconds: float) -> Run:
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        prev = 0

        async def commit() -> None:
            nonlocal prev
            params = group.params(shard, prev)
            cursor = await conn.execute(COMMIT_CTE_BINARY, params)
            _check(cursor.rowcount, group)
            prev = params["last"]

        return await _timed_async(commit, seconds)


async def asyncpg_conn(group: Group, shard: str, seconds: float) -> Run:
    conn = await asyncpg.connect(DSN)  # autocommit outside a transaction block
    try:
        prev = 0

        async def commit() -> None:
            nonlocal prev
            params = group.params(shard, prev)
            status: str = await conn.execute(
                COMMIT_CTE_ASYNCPG, *(params[name] for name in ASYNCPG_ORDER)
            )
            _check(int(status.rsplit(" ", 1)[1]), group)  # "INSERT 0 <rows>"
            prev = params["last"]

        return await _timed_async(commit, seconds)
    finally:
        await conn.close()


def _in_loop(measure: MeasureAsync) -> Measure:
    def run(group: Group, shard: str, seconds: float) -> Run:
        return asyncio.run(measure(group, shard, seconds))

    return run


def variants() -> dict[str, Measure]:
    found: dict[str, Measure] = {
        "psycopg sync %b, thread": psycopg_sync(COMMIT_CTE_BINARY),
        "psycopg async %b": _in_loop(psycopg_async),
    }
    if asyncpg is not None:
        found["asyncpg"] = _in_loop(asyncpg_conn)
    found["psycopg pipeline %b, 4 stmts"] = psycopg_pipeline
    found["psycopg sync %s, thread"] = psycopg_sync(COMMIT_CTE)
    return found


def _reset(admin: psycopg.Connection[Any], shard: str) -> None:
    admin.execute("TRUNCATE bench_records, bench_shards")
    admin.execute(
        "INSERT INTO bench_shards (shard, epoch, last_seq) VALUES (%s, %s, 0)", (shard, EPOCH)
    )
    admin.execute("CHECKPOINT")  # each run starts with the WAL flushed, not mid-checkpoint


def _server(admin: psycopg.Connection[Any]) -> str:
    settings = dict(
        admin.execute(
            "SELECT name, setting FROM pg_settings"
            " WHERE name IN ('server_version', 'fsync', 'synchronous_commit')"
        ).fetchall()
    )
    return (
        f"PostgreSQL {settings.get('server_version', '?')}, "
        f"fsync={settings.get('fsync', '?')}, "
        f"synchronous_commit={settings.get('synchronous_commit', '?')}"
    )


def main(rounds: int = 7, seconds: float = 0.5) -> None:
    rounds = max(5, rounds)
    measures = variants()
    groups = {size: make_group(size) for size in GROUP_SIZES}
    rates: dict[tuple[str, int], list[float]] = {
        (name, size): [] for name in measures for size in GROUP_SIZES
    }
    cpu_us: dict[tuple[str, int], list[float]] = {key: [] for key in rates}
    started = time.perf_counter()
    with (
        psycopg.connect(DSN, autocommit=True) as admin,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal-writer") as writer,
    ):
        server = _server(admin)
        for statement in CREATE:
            admin.execute(statement)
        try:
            for r in range(rounds):
                for size, group in groups.items():
                    for name, measure in measures.items():  # A, B, C, D, A, B, C, D, ...
                        shard = f"r{r}-g{size}-{name}"
                        _reset(admin, shard)
                        run = writer.submit(measure, group, shard, seconds).result()
                        rates[name, size].append(run.commits / run.seconds)
                        cpu_us[name, size].append(run.cpu_seconds / run.commits * 1e6)
                print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
        finally:
            admin.execute(DROP)
    elapsed = time.perf_counter() - started

    print(f"{server}; {DSN}")
    print(
        f"median of {rounds} rounds x {seconds:g} s per run, variants in turns;"
        " CPU = the writer thread's own, per commit"
        f" ({elapsed:.0f} s in all)"
    )
    if asyncpg is None:
        print("asyncpg is not installed: skipped")
    print(
        f"{'variant':<29} {'group':>5} {'commits/s':>10} {'records/s':>10} {'vs 1st':>7}"
        f" {'commits/s min-max':>18} {'CPU us/commit':>14}"
    )
    for size in GROUP_SIZES:
        base = statistics.median(rates[next(iter(measures)), size])
        for name in measures:
            seen = rates[name, size]
            median = statistics.median(seen)
            spread = f"{min(seen):,.0f}-{max(seen):,.0f}"
            cpu = statistics.median(cpu_us[name, size])
            print(
                f"{name:<29} {size:>5} {median:>10,.0f} {median * size:>10,.0f}"
                f" {median / base:>7.2f} {spread:>18} {cpu:>14,.0f}"
            )


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 7,
        float(sys.argv[2]) if len(sys.argv) > 2 else 0.5,
    )
