"""Write the docs site's generated pages: the settings and the CLI reference.

``python scripts/docs_reference.py`` rewrites ``docs/reference/settings.md``
(every setting of every section: its table, environment variable, flag,
default and what it does, from the settings models: each field's description) and
``docs/reference/cli.md`` (each command's ``--help``); ``--check`` writes
nothing and exits 1 when either page differs from what the code says
(``make test`` runs it, so a page never drifts from the code).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from actorsched import cli, settings

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    "settings": ROOT / "docs" / "reference" / "settings.md",
    "cli": ROOT / "docs" / "reference" / "cli.md",
}


def _default(field: FieldInfo) -> str:
    if words := settings.computed_default(field):
        return words  # this machine's value is not the reader's
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "none"
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def settings_page() -> str:
    """Every setting, one table per section."""
    flags = {(f.section, f.field): f for f in settings.FLAGS}
    out = [
        "# Settings reference",
        "",
        "Generated from the settings models by `python scripts/docs_reference.py`;",
        "`make test` fails when this page and the code differ. A setting comes from,",
        "in order: the flag, the environment variable, the TOML file (`--config`,",
        "the table named below), a nova.conf (`--nova-config`, for what Nova's own",
        "options say), else the default. `actorsched config` shows each value and",
        "where it came from.",
    ]
    for section, model in settings._MODELS.items():
        prefix = settings._ENV_PREFIXES[section]
        out += ["", f"## [{section}]", "", "| setting | variable | flag | default | what |"]
        out.append("| --- | --- | --- | --- | --- |")
        for name, field in model.model_fields.items():
            flag = flags.get((section, name))
            what = field.description or ""  # its flag's help too (settings.Flag)
            option = f"`{flag.option}`" if flag is not None else ""
            cells = [f"`{name}`", f"`{prefix}{name.upper()}`", option, _default(field), what]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


def _help(argv: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        cli.main([*argv, "--help"])
    return buffer.getvalue().rstrip()


def cli_page() -> str:
    """``actorsched --help`` and each command's."""
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: a fixed one
    out = [
        "# CLI reference",
        "",
        "Generated from the parser by `python scripts/docs_reference.py`; `make test`",
        "fails when this page and the code differ.",
        "",
        "```text",
        _help([]),
        "```",
    ]
    for name in cli.commands():
        if name == "bench":
            continue  # a source tree's own, documented in Development
        out += ["", f"## actorsched {name}", "", "```text", _help([name]), "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on drift")
    args = parser.parse_args(argv)
    drifted = []
    for name, text in (("settings", settings_page()), ("cli", cli_page())):
        path = PAGES[name]
        if args.check:
            if not path.exists() or path.read_text() != text:
                drifted.append(str(path.relative_to(ROOT)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if drifted:
        print(
            f"{', '.join(drifted)} drifted from the code: run python scripts/docs_reference.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
