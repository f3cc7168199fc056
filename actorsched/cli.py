"""The ``actorsched`` command: ``demo``, ``serve`` and ``bench``.

Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``main(args) -> int``; this file only wires
them together, importing a module when its subcommand is chosen.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["main"]

_COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("actorsched.demo", "the 2015 host-state race, side by side on three schedulers"),
    "serve": ("actorsched.amqp.serve", "run the scheduler as a RabbitMQ (AMQP) service"),
    "bench": ("benchmarks.run", "measure placements/s, latency and memory against baselines"),
}


def _load(module: str) -> ModuleType:
    if module.startswith("benchmarks."):
        # benchmarks/ sits beside the package in the source tree, not inside it
        root = Path(__file__).resolve().parent.parent
        if (root / "benchmarks").is_dir() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
    return importlib.import_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="actorsched", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if a in _COMMANDS), None)
    modules: dict[str, ModuleType] = {}
    for name, (module, help_text) in _COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            modules[name] = _load(module)
            modules[name].add_arguments(sub_parser)
    args = parser.parse_args(argv)
    result: int = modules[args.command].main(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
