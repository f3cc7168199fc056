"""nova.conf's ``[placement]`` auth options as actorsched reads them (no server needed;
``tests/placement/test_placement_keystone.py`` uses them against a real Keystone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actorsched.nova.conf import NovaConfigError, read
from actorsched.nova.placing import KeystoneToken, placement_auth

BASE = "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n"


def _conf(tmp_path: Path, placement: str) -> Path:
    path = tmp_path / "nova.conf"
    path.write_text(BASE + placement)
    return path


def test_no_placement_section_or_auth_type_none_sends_the_token(tmp_path: Path) -> None:
    for section in ("", "[placement]\nauth_type = none\n", "[placement]\nauth_type = noauth\n"):
        auth = read(str(_conf(tmp_path, section))).placement_auth
        assert not auth.keystone
        assert auth.problem() is None
        assert not isinstance(placement_auth(auth, "admin"), KeystoneToken)


def test_a_password_section_is_read_as_keystoneauth_reads_it(tmp_path: Path) -> None:
    auth = read(
        str(
            _conf(
                tmp_path,
                "[placement]\nauth_type = password\nauth_url = http://ks:5000/v3\n"
                "username = nova\npassword = 'pa ss'\nproject_name = service\n"
                "default_domain_name = Default\nregion_name = RegionOne\n",
            )
        )
    ).placement_auth
    assert auth.keystone
    assert auth.problem() is None
    assert auth.get("password") == "pa ss"  # one pair of quotes stripped, as oslo.config
    assert auth.domain("user") == auth.domain("project") == ("name", "Default")
    assert "pa ss" not in repr(auth)
    hook = placement_auth(auth, "admin")
    assert isinstance(hook, KeystoneToken)
    assert hook.url == "http://ks:5000/v3"


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ("auth_type = password\nusername = nova\npassword = x\n", "needs auth_url"),
        (
            "auth_type = password\nauth_url = http://ks/\nusername = nova\npassword = x\n",
            "needs user_domain_name (or user_domain_id)",
        ),
        ("auth_type = password\nauth_url = http://ks/\npassword = x\n", "username (or user_id)"),
        ("auth_type = v3applicationcredential\n", "actorsched authenticates to Placement with"),
        (
            "auth_type = password\nauth_url = ks:5000\nuser_id = u\npassword = x\n",
            "not http(s)://",
        ),
    ],
)
def test_a_section_it_cannot_use_is_refused_in_one_line(
    tmp_path: Path, section: str, said: str
) -> None:
    auth = read(str(_conf(tmp_path, "[placement]\n" + section))).placement_auth
    problem = auth.problem()
    assert problem is not None
    assert said in problem
    assert "\n" not in problem
    with pytest.raises(NovaConfigError, match=r"nova\.conf \[placement\]"):
        placement_auth(auth, "admin")
