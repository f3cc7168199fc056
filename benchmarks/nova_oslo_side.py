"""The oslo.messaging server of :mod:`benchmarks.nova_oslo`: what an ``actorsched[nova]``
extra built on oslo.messaging and oslo.versionedobjects would be, run in Nova's venv.

``.venv-nova/bin/python -m benchmarks.nova_oslo_side CONF HOSTS TOPIC SITE`` appends SITE
(actorsched's venv's site-packages: pydantic, aio-pika and the rest, which Nova's venv
lacks; every package both venvs hold is the same version there, and Nova's copy comes
first) to ``sys.path``, so that one process holds oslo.messaging, Nova's objects and
actorsched's embedded :class:`~actorsched.Scheduler`, which holds HOSTS hosts (those of
:func:`benchmarks.nova_caller.figures`) on an asyncio loop of its own thread. It serves
``oslo_messaging.get_rpc_server`` on CONF's rabbit transport (topic TOPIC, CONF's
``control_exchange``), oslo's default threading executor, Nova's
``NovaObjectSerializer``, prints ``READY`` and serves until SIGTERM.

Its endpoint's ``select_destinations`` (API 4.5, the signature of Nova 34's
``SchedulerManager``) gets the ``RequestSpec`` that oslo.versionedobjects made,
reads it into actorsched's request as :func:`actorsched.nova.objects.request_from_primitive`
reads a primitive (its helpers, on the object's fields), places it on the owner's loop
and answers Nova ``Selection`` objects (host first, then alternates up to
``max_attempts``) or Nova's ``NoValidHost``. Unlike the Nova endpoint it has no
Placement, no rebuild plan and no service-host mapping (the benchmark uses none),
and oslo.messaging acks each request before dispatching it.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
import threading
import time
from typing import Any


def _fields(obj: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The fields of a versioned object that are set (all of them, or ``names``)."""
    if obj is None:
        return {}
    return {n: getattr(obj, n) for n in (names or tuple(obj.fields)) if obj.obj_attr_is_set(n)}


def serve(conf_path: str, hosts: int, topic: str) -> None:
    cfg = importlib.import_module("oslo_config.cfg")  # Nova's venv only
    import oslo_messaging
    from nova import exception
    from nova import objects as nova_objects
    from nova.objects import base as nova_base

    from actorsched import HostReport, NoValidHost, RequestSpec, Scheduler, SchedulerConfig
    from actorsched.core import GetHostStates
    from actorsched.models import Destination
    from actorsched.nova import objects
    from actorsched.nova.conf import read

    from .nova_caller import figures, host_name

    nova_objects.register_all()
    nova = read(conf_path)
    config = SchedulerConfig(**{n: v for n, (v, _) in nova.scheduler.items()}, seed=1)
    cell = "5b0c9e04-4d7a-4c55-8d3c-0d6f1d0a7c11"  # benchmarks.nova_endpoint.CELL
    every_property = nova.weighs_images or "AggregateImagePropertiesIsolation" in (
        nova.nova_filters
    )
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="owner", daemon=True).start()
    held: dict[str, Any] = {}

    async def own() -> None:
        scheduler = Scheduler(config)
        await scheduler.start()
        reports = [
            HostReport.model_validate({"host": host_name(i), "generation": 1, **figures(i)})
            for i in range(hosts)
        ]
        await scheduler.update_hosts(reports)
        held["scheduler"] = scheduler

    asyncio.run_coroutine_threadsafe(own(), loop).result()
    scheduler: Scheduler = held["scheduler"]
    facts: dict[str, tuple[str, str | None]] = {}
    facts_at = [-2.0]

    async def place(spec: RequestSpec) -> tuple[list[Any], dict[str, tuple[str, str | None]]]:
        chosen = await scheduler.select_destinations(spec)
        # each host's node and zone from a copy of the host table at most 2 s old,
        # as the Nova endpoint reads them
        names = [s.host for s in chosen] + [h for s in chosen for h in s.alternates]
        now = time.monotonic()
        if now - facts_at[0] > 2.0 or any(h not in facts for h in names):
            image = await (await scheduler.submit_when_room(GetHostStates()))
            zone_names: list[str | None] = [*image.zone_names, None]
            zones = image.zone.tolist()
            facts.clear()
            for offset, name in enumerate(image.names):
                if name is not None:
                    facts[name] = (
                        image.nodes.get(image.start + offset, name),
                        zone_names[zones[offset]],
                    )
            facts_at[0] = now
        return chosen, {h: facts.get(h, (h, None)) for h in names}

    def request_of(spec: Any, uuids: list[str] | None) -> RequestSpec:
        flavor = spec.flavor
        extra = {str(k): str(v) for k, v in (flavor.extra_specs or {}).items()}
        objects._check_supported(extra)
        image = spec.image if spec.obj_attr_is_set("image") else None
        props = _fields(image.properties if image and image.obj_attr_is_set("properties") else None)
        level = _fields(
            spec.request_level_params if spec.obj_attr_is_set("request_level_params") else None
        )
        level = {k: sorted(v) for k, v in level.items() if k.startswith("root_")}
        required, forbidden = objects._traits(extra, props, level)
        figures = {"vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb}
        disk = (flavor.ephemeral_gb or 0) + -(-(flavor.swap or 0) // 1024)
        if not (spec.obj_attr_is_set("is_bfv") and spec.is_bfv):
            disk += flavor.root_gb or 0
        figures["disk_gb"] = disk
        for key, field in objects._RESOURCE_OVERRIDES.items():
            if key in extra:
                figures[field] = objects._extra_int(extra[key], key)
        spec_fields = _fields(spec)
        if not uuids:
            uuids = [spec.instance_uuid]
        group_data = _fields(spec_fields.get("instance_group"))
        group, _ = objects._group(group_data or None)
        hints = spec_fields.get("scheduler_hints") or {}
        requested = None
        destination = _fields(spec_fields.get("requested_destination"))
        if destination.get("aggregates") or destination.get("forbidden_aggregates"):
            raise objects.Unsupported("requested_destination.aggregates are not read")
        if destination.get("host") is not None or destination.get("node") is not None:
            requested = Destination(host=destination.get("host"), node=destination.get("node"))
        image_id = _fields(image, ("id",)).get("id")
        return RequestSpec(
            instance_uuids=list(uuids),
            **figures,
            availability_zone=spec_fields.get("availability_zone"),
            required_traits=required,
            forbidden_traits=forbidden,
            group=group,
            same_host=objects._strings(hints.get("same_host"), "same_host"),
            different_host=objects._strings(hints.get("different_host"), "different_host"),
            ignore_hosts=objects._strings(spec_fields.get("ignore_hosts"), "ignore_hosts"),
            flavor_name=flavor.name,
            extra_specs=extra,
            project_id=spec_fields.get("project_id"),
            image_properties=objects._image_properties(props, every_property),
            image_id=str(image_id) if image_id is not None else None,
            query=objects._query(hints) if "JsonFilter" in nova.nova_filters else None,
            force_hosts=objects._strings(spec_fields.get("force_hosts"), "force_hosts"),
            force_nodes=objects._strings(spec_fields.get("force_nodes"), "force_nodes"),
            requested_destination=requested,
        )

    class Endpoint:
        target = oslo_messaging.Target(version="4.5")

        def select_destinations(
            self,
            ctxt: Any,
            request_spec: Any = None,
            filter_properties: Any = None,
            spec_obj: Any = None,
            instance_uuids: list[str] | None = None,
            return_objects: bool = False,
            return_alternates: bool = False,
        ) -> list[Any]:
            try:
                spec = request_of(spec_obj, instance_uuids)
            except objects.Unsupported as exc:
                raise exception.NoValidHost(reason=f"actorsched cannot place this: {exc}") from None
            work = asyncio.run_coroutine_threadsafe(place(spec), loop)
            try:
                chosen, where = work.result()
            except NoValidHost as exc:
                raise exception.NoValidHost(reason=str(exc)) from None
            answer: list[Any] = []
            for selection in chosen:
                names = [selection.host]
                if return_alternates and return_objects:
                    names += selection.alternates[: config.max_attempts - 1]
                if not return_objects:
                    answer.append({"host": names[0], "nodename": where[names[0]][0], "limits": {}})
                    continue
                answer.append(
                    [
                        nova_objects.Selection(
                            service_host=name,
                            nodename=where[name][0],
                            compute_node_uuid=objects.compute_node_uuid(where[name][0]),
                            cell_uuid=cell,
                            limits=nova_objects.SchedulerLimits(
                                numa_topology=None, vcpu=None, disk_gb=None, memory_mb=None
                            ),
                            allocation_request=None,
                            allocation_request_version=None,
                            availability_zone=where[name][1],
                        )
                        for name in names
                    ]
                )
            return answer

        # as Nova's manager: NoValidHost is an answer, logged without a traceback
        select_destinations = oslo_messaging.expected_exceptions(exception.NoValidHost)(
            select_destinations
        )

    cfg.CONF(["--config-file", conf_path], project="bench")
    transport = oslo_messaging.get_rpc_transport(cfg.CONF)
    target = oslo_messaging.Target(topic=topic, server=nova.host)
    server = oslo_messaging.get_rpc_server(
        transport, target, [Endpoint()], serializer=nova_base.NovaObjectSerializer()
    )
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("READY", flush=True)
    done.wait()
    server.stop()
    server.wait()
    transport.cleanup()

    asyncio.run_coroutine_threadsafe(scheduler.stop(), loop).result(30)


def main() -> int:
    conf, hosts, topic, site = sys.argv[1:5]
    sys.path.append(site)
    serve(conf, int(hosts), topic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
