"""A manifest's config as a cluster node runs it: journaled to the cluster's PostgreSQL, with
what only SQLite does (retention) left out rather than failing the start; a config error is
told field by field (found running the demo's manifests on two nodes)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime_core import ProcessConfig
from runtime_core.cluster.errors import describe
from runtime_core.cluster.host import cluster_config

DSN = "postgresql://promptui@db.internal:5432/promptui"


def test_retention_is_left_out_on_the_cluster_s_journal(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    config = ProcessConfig(journal={"level": "checkpoint", "retention": {"keep_runs": 200}})
    with caplog.at_level("INFO", logger="runtime_core.cluster"):
        copy = cluster_config(config, DSN, "looper")
    assert copy.journal.backend == "postgres" and copy.journal.dsn == DSN
    assert copy.journal.retention is None
    assert config.journal.retention is not None  # the manifest's own config is untouched
    assert "looper's journal.retention does not apply on PostgreSQL" in caplog.text


def test_a_config_error_names_each_field() -> None:
    with pytest.raises(ValidationError) as raised:
        ProcessConfig(journal={"backend": "postgres", "dsn": DSN,
                               "retention": {"keep_runs": 5}}, queue_size=0)
    said = describe(raised.value)
    assert "journal: Value error, retention is SQLite-only" in said
    assert "queue_size:" in said
    assert "validation error" not in said
