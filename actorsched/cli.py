"""The ``actorsched`` command.

Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``main(args) -> int``; this file only wires
them together, importing a module when its subcommand is chosen.

Exit codes, the same for every subcommand: 0 done (or a clean stop), 1 a
failure while running (a fail-stop, the broker or journal unreachable, a
request refused), 2 a usage or settings error (nothing was started).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from .settings import SettingsError
from .version import __version__

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "commands", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

# name: (module, the function adding its flags, the function running it, help)
_COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "demo": (
        "actorsched.demo",
        "add_arguments",
        "main",
        "the 2015 host-state race, side by side on three schedulers",
    ),
    "serve": (
        "actorsched.serve",
        "add_arguments",
        "main",
        "run the scheduler as an AMQP service",
    ),
    "report": (
        "actorsched.agent",
        "add_arguments",
        "main",
        "the host agent: publish this machine's host reports on an interval",
    ),
    "hosts": (
        "actorsched.inspect",
        "hosts_arguments",
        "hosts_main",
        "list the hosts a running serve holds, with their figures and claims",
    ),
    "claims": (
        "actorsched.inspect",
        "claims_arguments",
        "claims_main",
        "list the live claims of a running serve (--host H: on one host)",
    ),
    "where": (
        "actorsched.inspect",
        "where_arguments",
        "where_main",
        "show the host an instance is on",
    ),
    "plan": (
        "actorsched.inspect",
        "plan_arguments",
        "plan_main",
        "a dry run: where a RequestSpec would go and why, claiming nothing",
    ),
    "host": (
        "actorsched.operate",
        "host_arguments",
        "host_main",
        "show, drain or remove one host of a running serve",
    ),
    "claim": (
        "actorsched.operate",
        "claim_arguments",
        "claim_main",
        "release a claim of a running serve",
    ),
    "aggregate": (
        "actorsched.operate",
        "aggregate_arguments",
        "aggregate_main",
        "list, create, change and delete the host aggregates of a running serve",
    ),
    "config": (
        "actorsched.settings",
        "config_arguments",
        "main",
        "print the effective settings of serve and where each came from",
    ),
    "bench": (
        "benchmarks.run",
        "add_arguments",
        "main",
        "measure placements/s, latency and memory against baselines (source tree only)",
    ),
}


def _benchmarks_root() -> Path | None:
    # benchmarks/ sits beside the package in the source tree; an installed wheel has none
    root = Path(__file__).resolve().parent.parent
    return root if (root / "benchmarks" / "run.py").is_file() else None


def commands() -> list[str]:
    """The subcommands this installation offers (``bench`` only in a source tree)."""
    return [name for name in _COMMANDS if name != "bench" or _benchmarks_root() is not None]


def _load(module: str) -> ModuleType:
    if module.startswith("benchmarks."):
        root = _benchmarks_root()
        if root is not None and str(root) not in sys.path:
            sys.path.insert(0, str(root))
    return importlib.import_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="actorsched",
        description="A cloud placement scheduler in which one task owns all host state.",
        epilog="Exit codes: 0 done, 1 failed while running, 2 bad usage or settings.",
    )
    parser.add_argument("--version", action="version", version=f"actorsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if a in _COMMANDS), None)
    modules: dict[str, ModuleType] = {}
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name in commands():
        module, adder, _, help_text = _COMMANDS[name]
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        parsers[name] = sub_parser
        if name == chosen:
            modules[name] = _load(module)
            getattr(modules[name], adder)(sub_parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the subcommand's own usage, not the top level's
        parsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        runner = _COMMANDS[args.command][2]
        result: int = getattr(modules[args.command], runner)(args)
    except SettingsError as exc:
        print(f"actorsched {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return _reader_gone()
    try:
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe is caught
    except BrokenPipeError:
        return _reader_gone()
    return result


def _reader_gone() -> int:
    """The reader of stdout went away (``actorsched hosts | head -1``): end quietly,
    1 as a cut-off output is, with nothing more written there (not at exit either)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
