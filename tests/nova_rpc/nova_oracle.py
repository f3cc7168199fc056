"""Nova 34's own answers for the tests, from Nova's venv (never imported by actorsched).

``.venv-nova/bin/python tests/nova_rpc/nova_oracle.py conf NOVA.CONF OPTIONS.json``
prints, as one JSON object, the value oslo.config gives each ``[group, option]``
of OPTIONS.json once Nova's options are registered and NOVA.CONF is read
(``null`` for a file that does not exist: Nova's defaults).

``... nova_oracle.py spec SPECS.json`` prints the primitive Nova's
``NovaObjectSerializer`` puts on the wire for each RequestSpec described in
SPECS.json (the keys of ``nova_client._spec``), as a JSON list.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any


def _conf(path: str, options: list[list[str]]) -> dict[str, Any]:
    import nova.conf
    from nova import config
    from oslo_messaging import transport

    conf = nova.conf.CONF
    conf.register_opts(transport._transport_opts)  # transport_url, control_exchange
    files = ["--config-file", path] if Path(path).exists() else []
    config.parse_args(["oracle", *files], init_rpc=False)
    out: dict[str, Any] = {}
    for group, option in options:
        section = conf if group == "DEFAULT" else getattr(conf, group)
        value = getattr(section, option)
        out[f"{group}.{option}"] = list(value) if isinstance(value, list | tuple) else value
    return out


def _specs(specs: list[dict[str, Any]]) -> list[Any]:
    from nova import context, objects
    from nova.objects import base

    sys.path.insert(0, str(Path(__file__).parent))
    import nova_client

    objects.register_all()
    ctxt = context.get_admin_context()
    serializer = base.NovaObjectSerializer()
    out = []
    for data in specs:
        uuids = data.pop("uuids", [str(uuid.uuid4())])
        spec = nova_client._spec(ctxt, data, uuids)
        out.append(serializer.serialize_entity(ctxt, spec))
    return out


def main() -> int:
    kind, *rest = sys.argv[1:]
    if kind == "conf":
        with open(rest[1], encoding="utf-8") as file:
            print(json.dumps(_conf(rest[0], json.load(file)), default=str))
    elif kind == "spec":
        with open(rest[0], encoding="utf-8") as file:
            print(json.dumps(_specs(json.load(file)), default=str))
    else:
        raise SystemExit(f"unknown oracle {kind!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
