"""The docs site builds strict, its generated pages match the code, and the README
stays a short front door whose links all lead somewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_generated_reference_pages_match_the_code() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_site_builds_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists() and shutil.which("mkdocs") is None:
        pytest.skip("mkdocs is not installed (the docs extra: pip install -e '.[docs]')")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)\s#]+)[^)]*\)", text)
    assert links, "the README links to the docs"
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert missing == []


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert {page for page in pages if page not in nav} == set()
