"""The webhook fields of a manifest: signature_scheme, signature_header, allowed_sources and a
list of hmac_secret, each checked at load with an error that says what to write."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from runtime_core.manifest.loader import ManifestError, parse_manifest
from runtime_core.triggers.config import TRIGGER_FIELDS, TriggerConfig
from runtime_core.triggers.registry import trigger_id_for


def problem_of(text: str) -> str:
    with pytest.raises(ManifestError) as err:
        parse_manifest(text, Path("hook.agent"))
    return str(err.value.problems[0])


def webhook(*lines: str) -> str:
    return "name: a\ntriggers:\n  - type: webhook\n" + "".join(f"    {line}\n" for line in lines)


def test_trigger_fields_list_the_new_webhook_fields() -> None:
    for name in ("signature_scheme", "signature_header", "allowed_sources", "hmac_secret"):
        assert name in TRIGGER_FIELDS["webhook"]
    with pytest.raises(ValidationError, match="does not apply"):
        TriggerConfig(type="cron", cron_expression="* * * * *", signature_scheme="github")


def test_a_github_trigger_with_rotated_secrets_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_NEW", "new-secret")
    monkeypatch.setenv("GH_OLD", "old-secret")
    manifest = parse_manifest(webhook(
        "webhook_path: /github", "signature_scheme: github",
        'hmac_secret: ["${GH_NEW}", "${GH_OLD}"]',  # quoted: { is YAML inside [ ]
        "allowed_sources: [192.30.252.0/22, 185.199.108.0/22, '2a0a:a440::/29']"),
        Path("gh.agent"))
    config = manifest.config.triggers[0]
    assert [s.get_secret_value() for s in config.secrets()] == ["new-secret", "old-secret"]
    assert config.signature_scheme == "github"
    assert "new-secret" not in repr(config) and "new-secret" not in str(config.model_dump())


def test_unknown_scheme_lists_the_valid_ones() -> None:
    text = problem_of(webhook("hmac_secret: s", "signature_scheme: gitlab"))
    assert text.startswith("hook.agent:5:")
    assert "unknown signature_scheme 'gitlab'" in text
    assert "promptui, github, stripe, slack, standard" in text


def test_a_bad_cidr_names_itself() -> None:
    text = problem_of(webhook("allowed_sources: [10.0.0.0/8, 300.1.2.0/24]"))
    assert "'300.1.2.0/24'" in text and "CIDR" in text
    assert "allowed_sources is empty" in problem_of(webhook("allowed_sources: []"))


@pytest.mark.parametrize(("secret", "says"), [
    ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starts with 'whsec_'"),
    ("whsec_not*base64!", "not valid base64"),
    ("whsec_", "needs a key"),
])
def test_standard_webhooks_secret_is_checked_at_load(secret: str, says: str) -> None:
    text = problem_of(webhook("signature_scheme: standard", f"hmac_secret: '{secret}'"))
    assert says in text
    assert secret.removeprefix("whsec_") not in text or not secret.removeprefix("whsec_")


def test_rotation_list_errors_name_the_entry() -> None:
    text = problem_of(webhook("signature_scheme: standard",
                              "hmac_secret: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, oops]"))
    assert "hmac_secret[1]" in text and "whsec_" in text
    assert "hmac_secret[0] is empty" in problem_of(webhook("hmac_secret: ['', b]"))
    assert "lists no secret" in problem_of(webhook("hmac_secret: []"))
    assert "one secret or a list" in problem_of(webhook("hmac_secret: {a: 1}"))


def test_scheme_or_header_without_a_secret_is_an_error() -> None:
    assert "only applies with hmac_secret" in problem_of(webhook("signature_scheme: github"))
    assert "not a header name" in problem_of(webhook("hmac_secret: s",
                                                     "signature_header: 'X Bad: 1'"))


def test_existing_trigger_ids_do_not_change() -> None:
    """Ids are digests of the config as written: the new fields' defaults are left out, so a
    journal's events still name the trigger that took them."""
    config = TriggerConfig(type="webhook", webhook_path="/in", hmac_secret="s")
    body = json.dumps({"hmac_secret": "**********", "type": "webhook", "webhook_path": "/in"},
                      sort_keys=True)
    assert trigger_id_for(config) == f"webhook-{hashlib.sha256(body.encode()).hexdigest()[:8]}"
