"""``save_manifest`` / ``manifest_to_process_config``: a config (built in Python, patched live,
forked) written as a manifest loads back to the same config, and no credential value is ever
written: references stay references, literals become references with a note."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core import (
    ManifestError,
    ProcessConfig,
    TriggerEvent,
    manifest_to_process_config,
    register_trigger_type,
    save_manifest,
    unregister_trigger_type,
)
from runtime_core.manifest.loader import load_manifest, manifest_text, parse_manifest

SECRET = "whsec-value-never-written-0123456789"
TOKEN = "literal-token-never-written-9876"


def _comparable(config: ProcessConfig) -> dict[str, Any]:
    data: dict[str, Any] = config.model_dump(mode="json")
    data["webhook secrets"] = [[s.get_secret_value() for s in t.secrets()]
                               for t in config.triggers]
    return data


def _round_trip(config: ProcessConfig, tmp_path: Path, name: str = "saved") -> ProcessConfig:
    path = tmp_path / f"{name}.agent"
    save_manifest(config, path)
    text = path.read_text(encoding="utf-8")
    assert SECRET not in text and TOKEN not in text
    return load_manifest(path).config


class _Source:
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def wait_for_next(self) -> TriggerEvent:
        raise NotImplementedError


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    yield monkeypatch


CONFIGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "echo with a journal": {"model": "echo", "journal": {"level": "full",
                                                         "path": "j/journal.db"}},
    "scripted and tools": {
        "model": {"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "dumps", "args": {"obj": "$payload"}}]},
            {"reply": "done"}, {"raise": "boom"}]},
        "instructions": "Book each invoice once.\nNever twice.\n",
        "tools": [{"path": "json:dumps", "effect": "read"}, "json:loads"],
    },
    "triggers of every kind": {"triggers": [
        {"type": "cron", "cron_expression": "*/5 * * * *", "timezone": "Europe/Paris",
         "filter_expression": "action == 'opened' and draft is None"},
        {"type": "interval", "seconds": 2.5},
        {"type": "file_watch", "watch_path": "./inbox", "patterns": ["*.csv"], "debounce": 1.0,
         "watch_events": ["added"], "recursive": False},
        {"type": "event", "event_type": "deploy.finished", "event_source": "ci"},
        {"type": "message", "topic": "reports.*"},
        {"type": "manual"},
        {"type": "webhook", "webhook_port": 0, "webhook_path": "/gh",
         "signature_scheme": "github", "hmac_secret": "${HOOK_SECRET}",
         "allowed_sources": ["192.30.252.0/22"]},
    ]},
    "servers and secrets as references": {
        "servers": {"tools": {"command": "python", "args": ["-m", "srv"],
                              "env": {"API_TOKEN": "${API_TOKEN}", "LOG_LEVEL": "debug"}},
                    "gh": {"type": "http", "url": "https://mcp.example.com/mcp",
                           "bearer_token": "${GH_TOKEN}", "headers": {"X-Team": "ops"},
                           "tool_prefix": "gh_"}},
        "secrets": {"enabled": True, "secrets": {"api_key": "${MONITORING_API_KEY}"},
                    "default_ttl": 3600},
    },
    "governance and config fields": {
        "budget": {"enabled": True, "max_tool_calls_per_run": 20, "on_exceeded": "pause",
                   "tool_costs": {"restart": {"cost_weight": 5.0, "irreversible": True}}},
        "health": {"enabled": True, "stuck_threshold": 3, "on_anomaly": "escalate"},
        "mission": {"enabled": True, "objective": "Keep uptime.",
                    "success_check": "state.ok >= 3"},
        "context": {"initial_state": {"seen": 0, "nested": {"a": [1, 2]}},
                    "writable_keys": ["seen"]},
        "concurrency": 3, "restart_policy": "on_failure", "max_restarts": 5,
        "restart_backoff": 2.0, "trigger_delivery": {"max_retries": 2},
        "run_budget": {"max_model_calls": 10}, "drain_timeout": 30,
        "execution_mode": "open", "open_mode": {"max_dynamic_triggers": 2},
        "incidents": {"fingerprint": "payload.labels.alertname", "reopen_window": 60},
    },
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_config_saved_as_a_manifest_loads_to_the_same_config(
    name: str, tmp_path: Path, env: pytest.MonkeyPatch
) -> None:
    config = manifest_to_process_config({"name": "x", **_as_manifest(CONFIGS[name])},
                                        base_dir=tmp_path)
    assert _comparable(_round_trip(config, tmp_path)) == _comparable(config)
    python_built = ProcessConfig.model_validate(CONFIGS[name])  # built in Python, not read
    if not any(t.get("hmac_secret") for t in CONFIGS[name].get("triggers", [])):
        assert _comparable(_round_trip(python_built, tmp_path, "py")) == \
            _comparable(python_built)


def _as_manifest(fields: dict[str, Any]) -> dict[str, Any]:
    """ProcessConfig fields spelled as a manifest writes them."""
    data = dict(fields)
    context = data.pop("context", None)
    extra = {k: data.pop(k) for k in list(data) if k in (
        "concurrency", "restart_policy", "max_restarts", "restart_backoff", "trigger_delivery",
        "run_budget")}
    if context:
        data["world"] = context.pop("initial_state", {})
        extra["context"] = context
    if extra:
        data["config"] = extra
    data.setdefault("journal", {"level": "none"})
    return data


def test_webhook_secrets_are_written_as_the_references_they_were_read_from(
    tmp_path: Path, env: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hooks.agent").write_text(
        "name: hooks\ntriggers:\n  - type: webhook\n    webhook_port: 0\n"
        "    hmac_secret: ${HOOK_SECRET}\n  - type: webhook\n    webhook_port: 0\n"
        "    webhook_path: /two\n    hmac_secret: ['${HOOK_SECRET}', '${OLD:-old-secret-1}']\n")
    config = load_manifest(tmp_path / "hooks.agent").config
    assert config.triggers[0].secrets()[0].get_secret_value() == SECRET
    text = manifest_text(config, "hooks")
    assert SECRET not in text  # (a default the author wrote stays as written)
    data = yaml.safe_load(text)
    assert data["triggers"][0]["hmac_secret"] == "${HOOK_SECRET}"
    assert data["triggers"][1]["hmac_secret"] == ["${HOOK_SECRET}", "${OLD:-old-secret-1}"]
    assert "# note" not in text


def test_literal_credentials_become_references_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ProcessConfig(
        triggers=[{"type": "webhook", "webhook_port": 0, "hmac_secret": SECRET}],
        secrets={"enabled": True, "secrets": {"db": TOKEN, "api": "${API}"}},
        servers={"gh": {"type": "http", "url": "https://mcp.example.com/mcp",
                        "bearer_token": TOKEN, "headers": {"Authorization": f"Bearer {TOKEN}"}},
                 "local": {"command": "python", "env": {"DB_PASSWORD": TOKEN}}},
        health={"enabled": True, "escalation": {
            "webhook_url": f"https://hooks.example.com/x?token={TOKEN}"}})
    path = tmp_path / "lit.agent"
    notes = save_manifest(config, path)
    text = path.read_text(encoding="utf-8")
    assert SECRET not in text and TOKEN not in text
    data = yaml.safe_load(text)
    assert data["triggers"][0]["hmac_secret"] == "${TRIGGERS_0_HMAC_SECRET}"
    assert data["secrets"]["secrets"] == {"db": "${SECRETS_SECRETS_DB}", "api": "${API}"}
    assert data["servers"]["gh"]["bearer_token"] == "${SERVERS_GH_BEARER_TOKEN}"
    assert data["servers"]["local"]["env"]["DB_PASSWORD"] == "${SERVERS_LOCAL_ENV_DB_PASSWORD}"
    assert data["health"]["escalation"]["webhook_url"].startswith("${")
    assert len(notes) == 6 and all("set " in note for note in notes)
    assert all(f"# note: {note}" in text for note in notes)
    # with the variables set, it loads to the same config
    for note in notes:
        variable = note.split("set ")[1].split()[0]
        monkeypatch.setenv(variable, "x")
    monkeypatch.setenv("HEALTH_ESCALATION_WEBHOOK_URL", "https://hooks.example.com/x")
    monkeypatch.setenv("TRIGGERS_0_HMAC_SECRET", SECRET)
    monkeypatch.setenv("SERVERS_GH_BEARER_TOKEN", TOKEN)
    loaded = load_manifest(path).config
    assert loaded.triggers[0].secrets()[0].get_secret_value() == SECRET
    assert loaded.servers["gh"].bearer_token == "${SERVERS_GH_BEARER_TOKEN}"  # read at connect


def test_custom_trigger_types_bring_their_plugin(tmp_path: Path) -> None:
    (tmp_path / "porting_plugin_a.py").write_text(
        "from runtime_core import register_trigger_type\n"
        "from tests.porting.test_save_manifest import _Source\n"
        "register_trigger_type('porting-a', lambda config, **_: _Source(), overwrite=True)\n")
    try:
        (tmp_path / "custom.agent").write_text(
            "name: custom\nplugins: [porting_plugin_a]\ntriggers:\n"
            "  - {type: porting-a, custom_config: {queue: q1}, filter_expression: 'n > 1'}\n")
        config = load_manifest(tmp_path / "custom.agent").config
        data = yaml.safe_load(manifest_text(config, "custom"))
        assert data["plugins"] == ["porting_plugin_a"]
        assert data["triggers"] == [{"type": "porting-a", "custom_config": {"queue": "q1"},
                                     "filter_expression": "n > 1"}]
        register_trigger_type("porting-b", lambda config, **_: _Source())  # from this module
        scripted = ProcessConfig(triggers=[{"type": "porting-b"}])
        assert yaml.safe_load(manifest_text(scripted, "b"))["plugins"] == [
            "tests.porting.test_save_manifest"]
    finally:
        unregister_trigger_type("porting-a")
        unregister_trigger_type("porting-b")


def test_what_a_manifest_cannot_hold() -> None:
    class Model:
        name = "mine"

        async def complete(self, request: object) -> object:
            raise NotImplementedError

    with pytest.raises(ValueError, match="model is a Python object"):
        manifest_text(ProcessConfig(model=Model()), "x")
    with pytest.raises(ValueError, match="cannot name a manifest"):
        manifest_text(ProcessConfig(), "not a name")


def test_manifest_to_process_config_checks_as_a_file_does(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        manifest_to_process_config({"name": "x", "triggers": [{"type": "cron"}]})
    assert caught.value.errors[0]["loc"] == "triggers[0]"
    assert "needs 'cron_expression'" in caught.value.errors[0]["msg"]
    config = manifest_to_process_config({"name": "x", "model": "echo"})
    assert config.journal.level == "checkpoint"  # a manifest's default


# -- property: any config of these parts comes back the same ---------------------------------------
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30).filter(
    lambda t: "${" not in t)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(names, inner, max_size=3), max_leaves=8)
triggers = st.one_of(
    st.builds(lambda s, f: {"type": "interval", "seconds": s,
                            **({"filter_expression": f} if f else {})},
              st.floats(0.1, 1e6), st.sampled_from([None, "n > 1", "x is None and 1 < y <= 5",
                                                    "title.lower().startswith('a')"])),
    st.builds(lambda tz: {"type": "cron", "cron_expression": "0 * * * *", "timezone": tz},
              st.sampled_from([None, "UTC", "Europe/Paris"])),
    st.builds(lambda t, s: {"type": "event", "event_type": t, "event_source": s}, names,
              st.none() | names),
    st.builds(lambda t: {"type": "message", "topic": t}, names),
    st.builds(lambda p, d: {"type": "file_watch", "watch_path": f"./{p}", "debounce": d},
              names, st.floats(0, 10)),
)
configs = st.fixed_dictionaries({
    "instructions": st.none() | texts,
    "triggers": st.lists(triggers, max_size=3, unique_by=lambda t: repr(sorted(t.items()))),
    "context": st.builds(lambda s: {"initial_state": s}, st.dictionaries(names, json_values,
                                                                         max_size=3)),
    "concurrency": st.integers(1, 100),
    "restart_policy": st.sampled_from(["never", "on_failure", "always"]),
    "secrets": st.builds(lambda s: {"enabled": bool(s), "secrets": s},
                         st.dictionaries(names, names.map(lambda n: f"${{{n.upper()}}}"),
                                         max_size=2)),
})


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_property_round_trip(fields: dict[str, Any]) -> None:
    config = ProcessConfig.model_validate(fields)
    back = parse_manifest(manifest_text(config, "prop"), Path(os.devnull).parent / "p.agent")
    assert _comparable(back.config) == _comparable(config)
