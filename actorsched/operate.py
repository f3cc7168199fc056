"""``actorsched host``, ``claim`` and ``aggregate``: an operator's changes to a running
``serve``, each an AMQP operation, as tables for people or ``--json`` for scripts.

* ``host show NAME``: capacity after ratios, reserved, used and free per
  resource, claims, aggregates and the last report's age (as Placement's usage
  view or ``kubectl describe node``).
* ``host remove NAME``: forget the host and its claims.
* ``host drain NAME``: move every claim on the host elsewhere (a move, then its
  confirm, one claim at a time) and list what could not move and why. New
  placements may still choose the host while it drains: report it disabled
  (its compute service) first when none may.
* ``claim release UUID``: free a claim (a leaked one, say).
* ``aggregate list | create | set | unset | add-host | remove-host | delete``.

Exit codes, as every command's: 0 done, 1 refused or the scheduler could not be
asked (one line says which), 2 bad usage or settings. The broker user of
``--amqp-url`` must have the role each change needs (``admin``, see the
security page).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from .amqp.client import SchedulerClient
from .errors import SchedulerError
from .inspect import ask, ask_flags, render_table
from .models import Aggregate, HostState

__all__ = [
    "aggregate_arguments",
    "aggregate_main",
    "claim_arguments",
    "claim_main",
    "host_arguments",
    "host_main",
]


# -- host ---------------------------------------------------------------------


def host_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched host ACTION NAME``."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (
        ("show", "capacity, reserved, used and free per resource, claims, aggregates"),
        ("remove", "forget the host and its claims"),
        ("drain", "move every claim on the host elsewhere, confirming each"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        ask_flags(sub)
        sub.add_argument("name", metavar="NAME", help="the host")


def _usage(state: HostState) -> list[dict[str, Any]]:
    """Per resource: total, ratio, capacity after it, reserved, used and free."""
    rows = []
    for resource, total, ratio, reserved, free in (
        (
            "MEMORY_MB",
            state.memory_mb,
            state.ram_allocation_ratio,
            state.memory_mb_reserved,
            state.free_ram_mb,
        ),
        (
            "VCPU",
            state.vcpus_total,
            state.cpu_allocation_ratio,
            state.vcpus_reserved,
            state.vcpus_total - state.vcpus_reserved - state.vcpus_used,
        ),
        (
            "DISK_GB",
            state.local_gb,
            state.disk_allocation_ratio,
            state.local_gb_reserved,
            state.free_disk_gb,
        ),
    ):
        used = total - reserved - free
        capacity = int((total - reserved) * ratio)
        rows.append(
            {
                "resource": resource,
                "total": total,
                "allocation_ratio": ratio,
                "reserved": reserved,
                "capacity": capacity,
                "used": used,
                "free_after_ratio": capacity - used,
            }
        )
    return rows


def _show(state: HostState, claims: list[Any], as_json: bool) -> None:
    age = max(0.0, time.time() - state.reported_at)
    usage = _usage(state)
    if as_json:
        out = {
            "host": state.model_dump(mode="json"),
            "usage": usage,
            "claims": [c.model_dump(mode="json") for c in claims],
            "report_age_s": round(age, 1),
        }
        print(json.dumps(out))
        return
    print(f"host:       {state.host} (node {state.node})")
    print(f"zone:       {state.availability_zone or '-'}")
    print(f"aggregates: {', '.join(state.aggregates) or '-'}")
    print(f"traits:     {', '.join(state.traits) or '-'}")
    print(f"enabled:    {'yes' if state.enabled else 'no'}")
    print(f"report:     generation {state.generation}, {age:.1f} s ago")
    print(
        f"instances:  {state.num_instances} listed, {state.assumed_claims} claims not reported yet"
    )
    print()
    keys = ("resource", "total", "allocation_ratio", "capacity", "reserved", "used")
    headers = ("RESOURCE", "TOTAL", "RATIO", "CAPACITY", "RESERVED", "USED", "FREE")
    rows = [[row[k] for k in keys] + [row["free_after_ratio"]] for row in usage]
    print(render_table(headers, rows))
    if claims:
        print()
        rows = [
            [c.instance_uuid, c.memory_mb, c.vcpus, c.disk_gb,
             "confirmed" if c.confirmed else "assumed", c.owner]
            for c in claims
        ]  # fmt: skip
        print(render_table(("CLAIM", "MB", "VCPU", "GB", "STATE", "OWNER"), rows))


async def _drain(client: SchedulerClient, host: str) -> dict[str, Any]:
    moved: list[dict[str, str]] = []
    stuck: list[dict[str, str]] = []
    for claim in await client.claims(host):
        if claim.host != host:
            continue
        migration = f"drain-{uuid.uuid4()}"
        try:
            selection = await client.move(claim.instance_uuid, migration)
            await client.confirm_move(migration)
        except SchedulerError as exc:
            stuck.append({"instance_uuid": claim.instance_uuid, "why": str(exc)})
            continue
        moved.append({"instance_uuid": claim.instance_uuid, "to": selection.host})
    return {"host": host, "moved": moved, "not_moved": stuck}


def host_main(args: argparse.Namespace) -> int:
    """``actorsched host show|remove|drain NAME``."""
    name = args.name
    if args.action == "show":

        async def fetch(client: SchedulerClient) -> tuple[HostState | None, list[Any]]:
            state = await client.host_state(name)  # that host's figures only
            return state, (await client.claims(name) if state is not None else [])

        found = ask(args, fetch)
        if found is None:
            return 1
        state, claims = found
        if state is None:
            print(
                f"actorsched host show: no host {name!r} (actorsched hosts lists them)",
                file=sys.stderr,
            )
            return 1
        _show(state, claims, args.json)
        return 0
    if args.action == "remove":

        async def remove(client: SchedulerClient) -> bool:
            return await client.remove_host(name)

        removed = ask(args, remove)
        if removed is None:
            return 1
        _say(args, {"host": name, "removed": removed}, f"{name}: removed" if removed else "")
        if not removed:
            print(f"actorsched host remove: no host {name!r}", file=sys.stderr)
        return 0 if removed else 1

    async def drain(client: SchedulerClient) -> dict[str, Any]:
        return await _drain(client, name)

    result = ask(args, drain)
    if result is None:
        return 1
    lines = [f"{m['instance_uuid']} -> {m['to']}" for m in result["moved"]]
    lines += [f"{s['instance_uuid']}: not moved: {s['why']}" for s in result["not_moved"]]
    lines.append(f"{name}: {len(result['moved'])} moved, {len(result['not_moved'])} not moved")
    _say(args, result, "\n".join(lines))
    return 0 if not result["not_moved"] else 1


def _say(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(data))
    elif text:
        print(text)


# -- claim --------------------------------------------------------------------


def claim_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched claim release UUID``."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub = actions.add_parser("release", help="free an instance's claim", description="free a claim")
    ask_flags(sub)
    sub.add_argument("instance_uuid", metavar="UUID")


def claim_main(args: argparse.Namespace) -> int:
    """``actorsched claim release UUID``: exit 1 when it held no claim."""

    async def release(client: SchedulerClient) -> bool:
        return await client.release(args.instance_uuid)

    released = ask(args, release)
    if released is None:
        return 1
    uuid_ = args.instance_uuid
    _say(
        args,
        {"instance_uuid": uuid_, "released": released},
        f"{uuid_}: released" if released else "",
    )
    if not released:
        print(f"actorsched claim release: {uuid_} holds no claim", file=sys.stderr)
    return 0 if released else 1


# -- aggregate ----------------------------------------------------------------


def _metadata(pairs: list[str], action: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"actorsched aggregate {action}: {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


def aggregate_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched aggregate ACTION ...``."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every aggregate, its hosts and metadata")
    ask_flags(listing)
    create = actions.add_parser("create", help="a new aggregate")
    ask_flags(create)
    create.add_argument("name", metavar="NAME")
    create.add_argument("--zone", default=None, help="its availability_zone metadata")
    create.add_argument("--host", dest="hosts", action="append", default=[], help="a member")
    create.add_argument("metadata", nargs="*", metavar="KEY=VALUE")
    set_ = actions.add_parser("set", help="set metadata keys (KEY=VALUE ...)")
    ask_flags(set_)
    set_.add_argument("name", metavar="NAME")
    set_.add_argument("metadata", nargs="+", metavar="KEY=VALUE")
    unset = actions.add_parser("unset", help="delete metadata keys (KEY ...)")
    ask_flags(unset)
    unset.add_argument("name", metavar="NAME")
    unset.add_argument("keys", nargs="+", metavar="KEY")
    for action, text in (("add-host", "add a member"), ("remove-host", "remove a member")):
        sub = actions.add_parser(action, help=text)
        ask_flags(sub)
        sub.add_argument("name", metavar="NAME")
        sub.add_argument("host", metavar="HOST")
    delete = actions.add_parser("delete", help="delete an aggregate with no hosts")
    ask_flags(delete)
    delete.add_argument("name", metavar="NAME")


def _aggregate_rows(aggregates: list[Aggregate]) -> str:
    rows = [
        [a.name, a.hosts, ",".join(f"{k}={v}" for k, v in sorted(a.metadata.items())) or "-"]
        for a in aggregates
    ]
    return render_table(("AGGREGATE", "HOSTS", "METADATA"), rows)


def aggregate_main(args: argparse.Namespace) -> int:
    """``actorsched aggregate ...``: exit 1 when the scheduler refuses the change."""
    action = args.action
    if action == "list":

        async def listing(client: SchedulerClient) -> list[Aggregate]:
            return await client.aggregates()

        found = ask(args, listing)
        if found is None:
            return 1
        if args.json:
            print(json.dumps([a.model_dump(mode="json") for a in found]))
        else:
            print(_aggregate_rows(found))
        return 0
    if action == "delete":

        async def delete(client: SchedulerClient) -> bool:
            return await client.delete_aggregate(args.name)

        deleted = ask(args, delete)
        if deleted is None:
            return 1
        _say(
            args,
            {"name": args.name, "deleted": deleted},
            f"{args.name}: deleted" if deleted else "",
        )
        if not deleted:
            print(f"actorsched aggregate delete: no aggregate {args.name!r}", file=sys.stderr)
        return 0 if deleted else 1
    if action == "create":
        metadata: dict[str, str | None] = dict(_metadata(args.metadata, action))
        if args.zone is not None:
            metadata["availability_zone"] = args.zone
    elif action == "set":
        metadata = dict(_metadata(args.metadata, action))
    elif action == "unset":
        metadata = dict.fromkeys(args.keys)  # None deletes a key

    async def change(client: SchedulerClient) -> Aggregate:
        if action == "create":
            return await client.create_aggregate(
                args.name, {k: v for k, v in metadata.items() if v is not None}, args.hosts
            )
        if action in ("set", "unset"):
            return await client.update_aggregate(args.name, metadata)
        if action == "add-host":
            return await client.add_host_to_aggregate(args.name, args.host)
        return await client.remove_host_from_aggregate(args.name, args.host)

    changed = ask(args, change)
    if changed is None:
        return 1
    if args.json:
        print(changed.model_dump_json())
    else:
        print(_aggregate_rows([changed]))
    return 0
