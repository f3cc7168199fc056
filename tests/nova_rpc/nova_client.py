"""Nova's own scheduler client, driven from Nova 34's venv (never imported by actorsched).

Run as ``.venv-nova/bin/python tests/nova_rpc/nova_client.py CONF SCRIPT.json [TOPIC]``: it
configures Nova's CONF from the nova.conf at CONF, then runs each step of the
script through ``nova.scheduler.rpcapi.SchedulerAPI`` over the real broker and
prints one JSON line per step: what Nova's client returned, or the exception
it raised (its class, module and message).

A step is ``{"op": "select", "uuids": [...], "spec": {...}, "return_objects":
true, "return_alternates": true}`` (the spec's keys: memory_mb, vcpus, root_gb,
ephemeral_gb, swap, extra_specs, name, availability_zone, num_instances,
group_policy, group_uuid, group_hosts, group_rules, ignore_hosts,
force_hosts, force_nodes, destination_host, destination_node, project_id,
image_properties, scheduler_hints), ``{"op": "update_aggregates", "name": ...,
"hosts": [...], "metadata": {...}}``, ``{"op": "delete_aggregate", "name": ...}``,
``{"op": "update_instance_info", "host": ..., "uuids": [...]}``,
``{"op": "sync_instance_info", "host": ..., "uuids": [...]}``,
``{"op": "delete_instance_info", "host": ..., "uuid": ...}``, ``{"op":
"raw_call", "method": ..., "version": ..., "args": {...}}`` (oslo's client
with a hand-made message), or ``{"op": "sleep", "seconds": S}``.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

# the image of every request that names none (a Glance image id)
_IMAGE_ID = "7c8a4f7e-3b1d-4e52-9a4e-2f0c6d1b5a90"


def _setup(conf_path: str, topic: str | None) -> None:
    from nova import config, objects
    from nova.scheduler import rpcapi

    if topic:  # tests sharing a broker: queue names are global on a vhost
        rpcapi.RPC_TOPIC = topic

    objects.register_all()
    config.parse_args(["nova-client", "--config-file", conf_path], init_rpc=True)


def _spec(ctxt: Any, data: dict[str, Any], uuids: list[str]) -> Any:
    from nova import objects

    flavor = objects.Flavor(
        name=data.get("name", "m1.test"),
        flavorid=data.get("name", "m1.test"),
        memory_mb=data.get("memory_mb", 512),
        vcpus=data.get("vcpus", 1),
        root_gb=data.get("root_gb", 1),
        ephemeral_gb=data.get("ephemeral_gb", 0),
        swap=data.get("swap", 0),
        extra_specs=data.get("extra_specs", {}),
    )
    # one image unless the step names another: a resent request is the same request
    # (its image id is in what actorsched compares, for IsolatedHostsFilter)
    image = objects.ImageMeta.from_dict(
        {"id": data.get("image_id", _IMAGE_ID), "properties": data.get("image_properties", {})}
    )
    group = None
    if data.get("group_policy"):
        group = objects.InstanceGroup(
            uuid=data.get("group_uuid", str(uuid.uuid4())),
            policy=data["group_policy"],
            rules=data.get("group_rules", {}),
            members=data.get("group_members", []),
            hosts=data.get("group_hosts", []),
        )
    destination = None
    if data.get("destination_host") or data.get("destination_node"):
        destination = objects.Destination(
            host=data.get("destination_host"), node=data.get("destination_node")
        )
    return objects.RequestSpec(
        ctxt,
        flavor=flavor,
        image=image,
        num_instances=data.get("num_instances", len(uuids)),
        instance_uuid=uuids[0],
        availability_zone=data.get("availability_zone"),
        instance_group=group,
        ignore_hosts=data.get("ignore_hosts"),
        force_hosts=data.get("force_hosts"),
        force_nodes=data.get("force_nodes"),
        requested_destination=destination,
        project_id=data.get("project_id", "project-a"),
        user_id="user-a",
        scheduler_hints=data.get("scheduler_hints", {}),
        is_bfv=data.get("is_bfv", False),
    )


def _aggregate(ctxt: Any, step: dict[str, Any]) -> Any:
    from nova import objects

    return objects.Aggregate(
        ctxt,
        id=step.get("id", 1),
        uuid=step.get("uuid", str(uuid.uuid5(uuid.NAMESPACE_DNS, step["name"]))),
        name=step["name"],
        hosts=step.get("hosts", []),
        metadata=step.get("metadata", {}),
    )


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "obj_to_primitive"):
        return {
            "object": value.obj_name(),
            "version": value.VERSION,
            **{k: _plain(getattr(value, k)) for k in value.fields if value.obj_attr_is_set(k)},
        }
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _run(step: dict[str, Any]) -> Any:
    from nova import (
        context,
        rpc,
    )
    from nova import objects as nova_objects
    from nova.scheduler import rpcapi

    ctxt = context.get_admin_context()
    api = rpcapi.SchedulerAPI()
    op = step["op"]
    if op == "select":
        uuids = step["uuids"]
        spec = _spec(ctxt, step.get("spec", {}), uuids)
        return api.select_destinations(
            ctxt,
            spec,
            uuids,
            return_objects=step.get("return_objects", True),
            return_alternates=step.get("return_alternates", True),
        )
    if op == "update_aggregates":
        return api.update_aggregates(ctxt, [_aggregate(ctxt, step)])
    if op == "delete_aggregate":
        return api.delete_aggregate(ctxt, _aggregate(ctxt, step))
    if op == "update_instance_info":
        instances = nova_objects.InstanceList(
            objects=[nova_objects.Instance(uuid=u, host=step["host"]) for u in step["uuids"]]
        )
        return api.update_instance_info(ctxt, step["host"], instances)
    if op == "sync_instance_info":
        return api.sync_instance_info(ctxt, step["host"], step["uuids"])
    if op == "delete_instance_info":
        return api.delete_instance_info(ctxt, step["host"], step["uuid"])
    if op == "raw_call":
        client = rpc.get_client(api.client.target, serializer=None)
        cctxt = client.prepare(version=step.get("version", "4.5"), timeout=step.get("timeout", 30))
        return cctxt.call(ctxt, step["method"], **step.get("args", {}))
    if op == "sleep":
        time.sleep(step["seconds"])
        return None
    raise ValueError(f"unknown step {op!r}")


def main() -> int:
    _setup(sys.argv[1], sys.argv[3] if len(sys.argv) > 3 else None)
    with open(sys.argv[2], encoding="utf-8") as file:
        steps = json.load(file)
    for step in steps:
        started = time.monotonic()
        try:
            line = {"ok": True, "result": _plain(_run(step))}
        except Exception as exc:
            line = {
                "ok": False,
                "class": type(exc).__name__,
                "module": type(exc).__module__,
                "message": str(exc),
                "is_no_valid_host": type(exc).__mro__[1].__name__ == "NoValidHost"
                or type(exc).__name__.startswith("NoValidHost"),
            }
        line["seconds"] = round(time.monotonic() - started, 3)
        print(json.dumps(line, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
