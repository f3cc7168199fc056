"""Settings in layers (default < file < environment < flag), their errors, and the CLI."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from actorsched import SchedulerConfig, cli
from actorsched import serve as serve_command
from actorsched.settings import (
    FLAGS,
    AgentSettings,
    AuthSettings,
    NovaSettings,
    ServiceSettings,
    SettingsError,
    add_arguments,
    default_journal_path,
    load,
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser, [flag.option for flag in FLAGS])
    return parser.parse_args(list(argv))


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("ACTORSCHED_"):
            monkeypatch.delenv(key)


def _other_value(model: type[BaseModel], name: str) -> Any:
    """A valid value of ``name`` that is not its default."""
    info = model.model_fields[name]
    default = info.get_default(call_default_factory=True)
    if name == "enabled_filters":
        return ["RamFilter", "ComputeFilter"]
    if name == "traits":
        return ["CUSTOM_A", "CUSTOM_B"]
    if name == "metrics_weight_setting":  # pairs of a metric's name and its ratio
        return [("cpu.idle.time", 1.5), ("cpu.frequency", -1.0)]
    if name == "image_props_weight_setting":  # pairs of a property's name and its ratio
        return [("os_distro", 1.5), ("hw_machine_type", -1.0)]
    if isinstance(default, list):  # a list of names (isolated_images ...)
        return ["other-a", "other-b"]
    if typing.get_origin(info.annotation) is typing.Literal:
        return next(v for v in typing.get_args(info.annotation) if v != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default * 2 if default else 1.5
    if isinstance(default, str):
        special = {"journal": "/tmp/elsewhere.sqlite", "amqp_url": "amqp://u:p@elsewhere:5673/v"}
        return special.get(name, f"other-{default}"[:255])
    assert default is None, (name, default)
    numbers = {"metrics_port": 9109, "prefetch": 7, "rounds": 7, "seed": 7}
    named = {
        "image_properties_default_architecture": "x86_64",  # one of Nova's names
        "placement_url": "http://placement.example:8778/",
    }
    return numbers.get(name, named.get(name, f"other-{name}"))


def _every_field() -> list[tuple[str, str]]:
    sections: dict[str, type[BaseModel]] = {
        "scheduler": SchedulerConfig,
        "service": ServiceSettings,
    }
    return [(section, name) for section, model in sections.items() for name in model.model_fields]


_SECTIONS: dict[str, type[BaseModel]] = {
    "scheduler": SchedulerConfig,
    "service": ServiceSettings,
    "agent": AgentSettings,
    "nova": NovaSettings,
    "auth": AuthSettings,
}


def _model(section: str) -> type[BaseModel]:
    return _SECTIONS[section]


def _toml(value: Any) -> str:
    return json.dumps(value)  # JSON scalars, strings and lists are TOML too


@pytest.mark.parametrize(("section", "name"), _every_field())
def test_every_setting_can_be_set_from_the_file(section: str, name: str, tmp_path: Path) -> None:
    value = _other_value(_model(section), name)
    path = tmp_path / "actorsched.toml"
    path.write_text(f"[{section}]\n{name} = {_toml(value)}\n")
    settings = load(_args("--config", str(path)))
    assert getattr(getattr(settings, section), name) == value
    assert settings.sources[f"{section}.{name}"] == f"file {path} [{section}]"


@pytest.mark.parametrize(("section", "name"), _every_field())
def test_every_setting_can_be_set_from_the_environment(
    section: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = _other_value(_model(section), name)
    text = value if isinstance(value, str) else json.dumps(value)
    monkeypatch.setenv(f"ACTORSCHED_{name.upper()}", text)
    settings = load(_args())
    assert getattr(getattr(settings, section), name) == value
    assert settings.sources[f"{section}.{name}"] == f"$ACTORSCHED_{name.upper()}"


def test_a_flag_beats_the_environment_which_beats_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "actorsched.toml"
    path.write_text(
        "[scheduler]\ncpu_allocation_ratio = 8.0\nram_allocation_ratio = 1.5\n"
        "disk_allocation_ratio = 3.0\n[service]\nqueue = 'from-file'\n"
    )
    monkeypatch.setenv("ACTORSCHED_CPU_ALLOCATION_RATIO", "2.0")
    monkeypatch.setenv("ACTORSCHED_RAM_ALLOCATION_RATIO", "1.25")
    settings = load(_args("--config", str(path), "--cpu-allocation-ratio", "1.0"))
    assert settings.scheduler.cpu_allocation_ratio == 1.0  # flag over env over file
    assert settings.scheduler.ram_allocation_ratio == 1.25  # env over file
    assert settings.scheduler.disk_allocation_ratio == 3.0  # file over default
    assert settings.service.queue == "from-file"
    assert settings.scheduler.max_attempts == 3  # default
    assert settings.sources["scheduler.cpu_allocation_ratio"] == "--cpu-allocation-ratio"
    assert settings.sources["scheduler.ram_allocation_ratio"] == "$ACTORSCHED_RAM_ALLOCATION_RATIO"
    rows = {key: (value, where) for key, value, where in settings.rows()}
    assert rows["scheduler.max_attempts"] == (3, "default")


def test_the_config_file_may_also_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.toml"
    path.write_text("[scheduler]\nhost_subset_size = 4\n")
    monkeypatch.setenv("ACTORSCHED_CONFIG", str(path))
    assert load(_args()).scheduler.host_subset_size == 4


def test_every_flag_names_a_real_setting_and_sets_it(tmp_path: Path) -> None:
    nova_conf = tmp_path / "nova.conf"
    nova_conf.write_text("[DEFAULT]\n")  # --nova-config reads its file: Nova's defaults
    for flag in FLAGS:
        value = _other_value(_model(flag.section), flag.field)
        if (flag.section, flag.field) == ("nova", "config"):
            value = str(nova_conf)
        if flag.kind == "switch":
            argv = [flag.option]
        elif flag.kind == "list":
            argv = [flag.option, ",".join(value)]
        else:
            argv = [flag.option, str(value)]
        settings = load(_args(*argv))
        assert getattr(getattr(settings, flag.section), flag.field) == value, flag
        assert settings.sources[f"{flag.section}.{flag.field}"] == flag.option


def test_every_setting_has_a_one_line_description_its_flag_shows() -> None:
    # the settings reference's "what" column and each flag's --help come from it
    from actorsched.settings import _MODELS

    missing = []
    for section, model in _MODELS.items():
        for name, field in model.model_fields.items():
            text = field.description or ""
            if not text.strip() or "\n" in text:
                missing.append(f"{section}.{name}: {text!r}")
    assert missing == [], "settings without a one-line Field(description=...)"
    overridden = {(f.section, f.field) for f in FLAGS if f.option == "--disabled"}
    for flag in FLAGS:
        description = _MODELS[flag.section].model_fields[flag.field].description
        assert (flag.help == description) != ((flag.section, flag.field) in overridden), flag


def test_a_default_computed_where_it_runs_is_named_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --help and the settings reference say it in words, the same whoever generates them
    import socket

    from actorsched.settings import _MODELS, computed_default

    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    machine = (str(tmp_path), socket.gethostname())
    for model in _MODELS.values():
        for name, field in model.model_fields.items():
            if field.default_factory is None:
                continue
            value = str(field.default_factory())  # type: ignore[call-arg]
            if any(part in value for part in machine):
                assert computed_default(field), name
    parser = argparse.ArgumentParser()
    add_arguments(parser, ["--journal"])
    assert "(default: a file in the state directory)" in " ".join(parser.format_help().split())


@pytest.mark.parametrize(
    ("argv", "env", "line"),
    [
        (
            ["--metrics-port", "70000"],
            {},
            "setting metrics_port=70000 (from --metrics-port): Input should be less than "
            "or equal to 65535",
        ),
        (
            ["--mailbox-size", "0"],
            {},
            "setting mailbox_size=0 (from --mailbox-size): Input should be greater than or "
            "equal to 1",
        ),
        (
            [],
            {"ACTORSCHED_CPU_ALLOCATION_RATIO": "lots"},
            "setting cpu_allocation_ratio=lots (from $ACTORSCHED_CPU_ALLOCATION_RATIO): Input "
            "should be a valid number, unable to parse string as a number",
        ),
        (
            [],
            {"ACTORSCHED_ENABLED_FILTERS": "[RamFilter"},
            "setting enabled_filters=[RamFilter (from $ACTORSCHED_ENABLED_FILTERS): not valid JSON",
        ),
        (
            ["--log-format", "xml"],
            {},
            "setting log_format=xml (from --log-format): Input should be 'text' or 'json'",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_setting_the_value_and_the_rule(
    argv: list[str],
    env: dict[str, str],
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(["config", *argv]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"actorsched config: {line}"), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[schedular]\nseed = 1\n", "unknown table(s) ['schedular']"),
        ("[scheduler]\ncpu_ratio = 1.0\n", "unknown setting(s) ['cpu_ratio'] in [scheduler]"),
        ("[scheduler\n", "is not valid TOML"),
        ("[service]\nprefetch = 0\n", "setting prefetch=0 (from file "),
    ],
)
def test_a_bad_file_is_refused_naming_what_is_wrong(
    text: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load(_args("--config", str(path)))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"config file .*nowhere\.toml: No such file"):
        load(_args("--config", str(tmp_path / "nowhere.toml")))


def test_config_prints_each_value_and_where_it_came_from_with_secrets_hidden(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORSCHED_MAX_ATTEMPTS", "5")
    code = cli.main(["config", "--json", "--amqp-url", "amqp://user:s3cret@broker:5672/"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["scheduler.max_attempts"] == {"value": 5, "source": "$ACTORSCHED_MAX_ATTEMPTS"}
    assert shown["service.amqp_url"] == {
        "value": "amqp://user:***@broker:5672/",
        "source": "--amqp-url",
    }
    assert shown["scheduler.cpu_allocation_ratio"] == {"value": 4.0, "source": "default"}
    assert len(shown) == sum(len(model.model_fields) for model in _SECTIONS.values())
    assert cli.main(["config"]) == 0
    text = capsys.readouterr().out
    assert "scheduler.max_attempts" in text
    assert "($ACTORSCHED_MAX_ATTEMPTS)" in text


def test_the_default_journal_is_an_absolute_path_in_a_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    assert default_journal_path() == tmp_path / "state" / "journal.sqlite"
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    expected = (
        Path("/var/lib/actorsched/journal.sqlite")
        if os.geteuid() == 0
        else tmp_path / "xdg" / "actorsched" / "journal.sqlite"
    )
    assert default_journal_path() == expected
    assert ServiceSettings().journal == str(expected)


async def test_serve_makes_the_journals_missing_directory_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "journal.sqlite"
    settings = load(_args("--journal", str(path), "--create-journal"))
    scheduler = serve_command._build_scheduler(settings.scheduler, settings.service)
    try:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        await scheduler.start()
        assert scheduler.journal is not None
        assert path.exists()
    finally:
        await scheduler.stop()


def test_version_and_help_and_the_usage_of_the_command_given_a_bad_flag() -> None:
    run = [sys.executable, "-m", "actorsched.cli"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0
    assert version.stdout.strip().startswith("actorsched 0.")
    top = subprocess.run([*run, "--help"], capture_output=True, text=True, check=False)
    assert top.returncode == 0
    assert "``" not in top.stdout
    assert "Exit codes: 0 done, 1 failed while running, 2 bad usage or settings." in top.stdout
    bad = subprocess.run([*run, "serve", "--bogus"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert bad.stderr.startswith("usage: actorsched serve ")
    assert "actorsched serve: error: unrecognized arguments: --bogus" in bad.stderr


def test_serve_tries_the_broker_for_connect_timeout_with_a_line_per_attempt(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "actorsched.cli",
            "serve",
            "--amqp-url",
            "amqp://guest:guest@127.0.0.1:1/",  # nothing listens on port 1
            "--connect-timeout",
            "2.5",
            "--journal",
            str(tmp_path / "j.sqlite"),
            "--create-journal",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    attempts = [line for line in result.stderr.splitlines() if "unreachable (attempt" in line]
    assert len(attempts) == 2, result.stderr  # at 0 s and 1 s; the 3rd at 3 s is past 2.5 s
    assert "trying again in 1.0 s" in attempts[0]
    assert "amqp://guest:***@127.0.0.1:1/" in attempts[0]
    assert "unreachable after 3 attempt(s) in 2.5 s (--connect-timeout)" in result.stderr


def test_log_level_and_format_take_any_case_from_every_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load(_args("--log-level", "debug")).service.log_level == "DEBUG"
    monkeypatch.setenv("ACTORSCHED_LOG_FORMAT", "JSON")
    assert load(_args()).service.log_format == "json"
    path = tmp_path / "a.toml"
    path.write_text('[service]\nlog_level = "warning"\n')
    assert load(_args("--config", str(path))).service.log_level == "WARNING"


def test_a_prefetch_over_the_mailbox_is_a_settings_error_naming_both() -> None:
    with pytest.raises(SettingsError) as caught:
        load(_args("--mailbox-size", "10", "--prefetch", "64"))
    assert str(caught.value) == (
        "setting prefetch=64 (from --prefetch): must be at most mailbox_size=10 (from "
        "--mailbox-size), so that every delivery fits in the mailbox"
    )


@pytest.mark.parametrize("url", ["notaurl", "http://broker/", "amqp:///"])
def test_a_broker_url_that_is_not_amqp_is_a_settings_error(url: str) -> None:
    with pytest.raises(SettingsError, match=f"setting amqp_url={re.escape(url)} .*must be amqp://"):
        load(_args("--amqp-url", url))


def test_an_empty_environment_variable_is_as_if_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORSCHED_PREFETCH", "")
    settings = load(_args())
    assert settings.service.prefetch is None
    assert settings.sources.get("service.prefetch", "default") == "default"


@pytest.mark.parametrize(
    ("line", "field"),
    [("mailbox_size = true", "mailbox_size"), ('host_subset_size = "3"', "host_subset_size")],
)
def test_a_files_values_are_checked_strictly(line: str, field: str, tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text(f"[scheduler]\n{line}\n")
    with pytest.raises(SettingsError, match=f"setting {field}="):
        load(_args("--config", str(path)))


def test_nova_release_is_34_from_a_nova_conf_and_a_choice_of_two_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load(_args()).scheduler.nova_release == 18
    nova_conf = tmp_path / "nova.conf"
    nova_conf.write_text("[DEFAULT]\n")
    settings = load(_args("--nova-config", str(nova_conf)))
    assert settings.scheduler.nova_release == 34
    assert settings.sources["scheduler.nova_release"] == f"nova.conf {nova_conf} Nova 34"
    monkeypatch.setenv("ACTORSCHED_NOVA_RELEASE", "18")  # the environment wins over it
    assert load(_args("--nova-config", str(nova_conf))).scheduler.nova_release == 18
    monkeypatch.setenv("ACTORSCHED_NOVA_RELEASE", "22")
    with pytest.raises(SettingsError, match=r"setting nova_release=22 .*should be 18 or 34"):
        load(_args())


def test_sigterm_while_the_broker_is_retried_stops_serve_at_once_with_0(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "actorsched.cli",
        "serve",
        "--amqp-url",
        "amqp://guest:guest@127.0.0.1:1/",
        "--connect-timeout",
        "60",
        "--journal",
        str(tmp_path / "j.sqlite"),
        "--create-journal",
    ]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        line = process.stderr.readline()
        while "unreachable (attempt 1" not in line:
            assert line, "serve ended before its first attempt"
            line = process.stderr.readline()
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert "stopped before the broker could be reached" in process.stderr.read()


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    # `actorsched config | head -1`: the reader is gone before the command writes
    from conftest import code_under_test_env

    process = subprocess.Popen(
        [sys.executable, "-m", "actorsched", "config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=code_under_test_env(),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # before the command's first line
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert err == "", err  # no BrokenPipeError traceback, nothing at exit either


def test_an_actorsched_variable_that_names_no_setting_is_named_at_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # a typo in the environment is named, as a typo in the file is refused
    monkeypatch.setenv("ACTORSCHED_RAM_ALLOCATON_RATIO", "2.0")  # sic
    monkeypatch.setenv("ACTORSCHED_NOVA_PLACEMENT_URLL", "http://x")  # sic
    monkeypatch.setenv("ACTORSCHED_HOST_SUBSET_SIZE", "2")  # a setting
    monkeypatch.setenv("ACTORSCHED_TEST_AMQP_URL", "amqp://x")  # the tests' own
    chosen = load()
    assert chosen.unknown_env == (
        "ACTORSCHED_NOVA_PLACEMENT_URLL",
        "ACTORSCHED_RAM_ALLOCATON_RATIO",
    )
    assert chosen.scheduler.host_subset_size == 2
    with caplog.at_level(logging.WARNING):
        chosen.warn_unknown_env(logging.getLogger("actorsched.test"))
    (line,) = [r.getMessage() for r in caplog.records]
    assert "ACTORSCHED_NOVA_PLACEMENT_URLL, ACTORSCHED_RAM_ALLOCATON_RATIO name no setting" in line


def test_help_shows_each_flags_default() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "request queue to consume (default: actorsched.requests)" in text
    assert "(default: 5.0)" in text  # commit_timeout
    assert "seconds a journal commit may take" in text
    assert "(default: none)" in text  # prefetch: none given
