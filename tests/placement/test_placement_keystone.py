"""Keystone auth of the Placement link, from Nova's own ``[placement]`` section of nova.conf.

Against a real Keystone (keystone 30.0.0, ``keystone_server.py``: SQLite, Fernet
tokens, ``keystone-manage bootstrap``) and a real Placement behind Keystone's
auth_token middleware (``placement_server.py --keystone-url``: every token is
checked with that Keystone, none cached), both in Nova's venv. A nova.conf whose
``[placement]`` says ``auth_type = password`` is read by actorsched
(:mod:`actorsched.nova.conf`), and :func:`actorsched.nova.placing.placement_auth`
gets its token from Keystone, sends it, takes a new one when Placement refuses a
revoked one and before it expires; bad credentials are refused in one line
without the password.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from placement_fixture import (
    NOVA_PYTHON,
    PlacementServer,
    import_error,
    placement_missing,
    running_placement,
)

from actorsched.nova.conf import read
from actorsched.nova.placement import PlacementClient, PlacementError, token_auth
from actorsched.nova.placing import KeystoneToken, placement_auth
from actorsched.settings import SettingsError
from actorsched.settings import load as load_settings

KEYSTONE = Path(__file__).with_name("keystone_server.py")
PASSWORD = "s3cret"  # keystone_server.py's bootstrap default


def _keystone_missing() -> str | None:
    missing = placement_missing()
    if missing:
        return missing
    failed = import_error(NOVA_PYTHON, ("keystone.server.wsgi", "keystonemiddleware.auth_token"))
    if failed:
        return (
            f"Keystone is not in Nova's venv ({NOVA_PYTHON}): `make nova-venv` installs "
            f"keystone==30.0.0 ({failed})"
        )
    return None


MISSING = _keystone_missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
]


@pytest.fixture(scope="module")
def keystone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Keystone of this module: its v3 URL."""
    state = tmp_path_factory.mktemp("keystone")
    out, err = state / "stdout.log", state / "stderr.log"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [str(NOVA_PYTHON), str(KEYSTONE), "--state-dir", str(state / "db")],
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 240  # db_sync and bootstrap: a minute when loaded
        while not out.read_text().startswith("READY "):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Keystone did not start:\n" + err.read_text()[-3000:])
            time.sleep(0.2)
        yield out.read_text().split()[1]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def placement(keystone: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    with running_placement(tmp_path_factory.mktemp("placement"), keystone_url=keystone) as server:
        yield server


def _nova_conf(tmp_path: Path, keystone: str, **placement: str) -> Path:
    options = {
        "auth_type": "password",
        "auth_url": keystone.removesuffix("/v3"),  # unversioned, as devstack writes it
        "username": "admin",
        "password": PASSWORD,
        "user_domain_name": "Default",
        "project_name": "admin",
        "project_domain_name": "Default",
        **placement,
    }
    path = tmp_path / "nova.conf"
    path.write_text(
        "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n[placement]\n"
        + "".join(f"{k} = {v}\n" for k, v in options.items() if v)
    )
    return path


def _keystone_hook(tmp_path: Path, keystone: str) -> KeystoneToken:
    """What serve builds from nova.conf's [placement] (auth_type = password)."""
    conf = read(str(_nova_conf(tmp_path, keystone)))
    hook = placement_auth(conf.placement_auth, "admin")
    assert isinstance(hook, KeystoneToken)
    return hook


async def test_a_token_from_novas_placement_section_opens_placement_behind_keystone(
    tmp_path: Path, keystone: str, placement: PlacementServer
) -> None:
    # without a Keystone token Placement refuses (it is behind Keystone indeed)
    async with PlacementClient(placement.url, auth=token_auth("admin")) as plain:
        assert (await plain.request("GET", "/resource_providers")).status == 401
    conf = read(str(_nova_conf(tmp_path, keystone)))
    assert conf.placement_auth.keystone
    assert "s3cret" not in repr(conf)  # the password is never shown
    hook = placement_auth(conf.placement_auth, "admin")
    assert isinstance(hook, KeystoneToken)
    async with PlacementClient(placement.url, auth=hook) as client:
        name = f"cn-{uuid.uuid4().hex[:8]}"
        created = await client.request("POST", "/resource_providers", {"name": name})
        assert created.status == 200, created.body
        listed = await client.read(f"/resource_providers?name={name}")
        assert listed is not None
        assert [p["name"] for p in listed["resource_providers"]] == [name]
    assert hook.issued == 1  # one token for both calls
    assert hook.expires_at is not None


async def test_a_revoked_token_is_replaced_when_placement_refuses_it(
    tmp_path: Path, keystone: str, placement: PlacementServer
) -> None:
    hook = _keystone_hook(tmp_path, keystone)
    async with PlacementClient(placement.url, auth=hook) as client:
        assert (await client.request("GET", "/resource_providers")).status == 200
        first = dict(await hook())
        # revoke it in Keystone (DELETE /v3/auth/tokens, the token revoking itself)
        async with PlacementClient(keystone, auth=token_auth(first["X-Auth-Token"])) as ks:
            response = await ks._request(
                "DELETE", "/auth/tokens", None, None, {"X-Subject-Token": first["X-Auth-Token"]}
            )
            assert response.status == 204, response.body
        answered = await client.request("GET", "/resource_providers")
        assert answered.status == 200  # asked again with a new token
        assert hook.issued == 2
        assert dict(await hook()) != first


async def test_a_token_is_renewed_before_it_expires(
    tmp_path: Path, keystone: str, placement: PlacementServer
) -> None:
    conf = read(str(_nova_conf(tmp_path, keystone)))
    # keystone_server.py's tokens last an hour: held "stale" all but its first seconds
    hook = KeystoneToken(conf.placement_auth, stale_seconds=3600 - 5.0)
    first, expires = dict(await hook()), hook.expires_at
    assert hook.issued == 1
    assert expires is not None
    # good until stale_seconds before Keystone's expires_at
    left = (expires - datetime.now(UTC)).total_seconds()
    assert hook.good_until - time.monotonic() == pytest.approx(left - hook.stale_seconds, abs=1)
    await asyncio.sleep(max(0.0, hook.good_until - time.monotonic()) + 0.1)
    renewed = dict(await hook())
    assert hook.issued == 2  # taken anew before Keystone's expiry, not after a 401
    assert renewed != first
    assert hook.expires_at is not None
    assert hook.expires_at >= expires
    async with PlacementClient(placement.url, auth=hook, timeout=60) as client:
        assert (await client.request("GET", "/resource_providers")).status == 200
    await hook.aclose()


async def test_calls_that_find_no_token_share_one_authentication(
    tmp_path: Path, keystone: str, placement: PlacementServer
) -> None:
    hook = _keystone_hook(tmp_path, keystone)
    # Placement answers one call at a time, each token checked with Keystone: a
    # minute's timeout for the last of them on a loaded machine
    async with PlacementClient(placement.url, auth=hook, timeout=60) as client:
        answers = await asyncio.gather(
            *(client.request("GET", "/resource_providers") for _ in range(6))
        )
    assert [a.status for a in answers] == [200] * 6
    assert hook.issued == 1


async def test_bad_credentials_are_refused_in_one_line_without_the_password(
    tmp_path: Path, keystone: str, placement: PlacementServer
) -> None:
    conf = read(str(_nova_conf(tmp_path, keystone, password="not-the-password")))
    async with PlacementClient(
        placement.url, auth=placement_auth(conf.placement_auth, "admin")
    ) as client:
        with pytest.raises(PlacementError) as refused:
            await client.request("GET", "/resource_providers")
    message = str(refused.value)
    assert refused.value.status == 401
    assert "Keystone at" in message
    assert "refused the credentials of nova.conf [placement]" in message
    assert "not-the-password" not in message
    assert "\n" not in message


def test_serve_refuses_a_placement_section_it_cannot_authenticate_with(
    tmp_path: Path, keystone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def settings_of(path: Path) -> Any:
        monkeypatch.setenv("ACTORSCHED_NOVA_CONFIG", str(path))
        monkeypatch.setenv("ACTORSCHED_NOVA_PLACEMENT_URL", "http://127.0.0.1:1")
        return load_settings()

    with pytest.raises(SettingsError, match="needs password"):
        settings_of(_nova_conf(tmp_path, keystone, password=""))
    with pytest.raises(SettingsError, match=r"needs .*project_domain_name"):
        settings_of(_nova_conf(tmp_path, keystone, project_domain_name=""))
    with pytest.raises(SettingsError, match="v3applicationcredential: actorsched authenticates"):
        settings_of(_nova_conf(tmp_path, keystone, auth_type="v3applicationcredential"))
    good = settings_of(_nova_conf(tmp_path, keystone))
    assert good.nova_conf is not None
    assert good.nova_conf.placement_auth.keystone
    # without a Placement URL the section is not used, so not checked
    monkeypatch.delenv("ACTORSCHED_NOVA_PLACEMENT_URL")
    loaded = load_settings()
    assert loaded.nova.placement_url is None
    assert json.dumps(loaded.nova.model_dump())  # nothing of the section in the settings
