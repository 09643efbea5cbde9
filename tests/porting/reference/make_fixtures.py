"""Regenerate this folder's fixtures from the reference runtime (promptise), installed in its
own virtual environment, never in promptui's:

    python -m venv /tmp/promptise-venv && /tmp/promptise-venv/bin/pip install promptise==1.10.1
    pip download promptise==1.10.1 --no-binary :all: --no-deps -d /tmp/promptise-sdist
    tar xzf /tmp/promptise-sdist/promptise-1.10.1.tar.gz -C /tmp/promptise-sdist
    /tmp/promptise-venv/bin/python tests/porting/reference/make_fixtures.py \\
        /tmp/promptise-sdist/promptise-1.10.1

It writes ``manifests/`` (the four ``promptise runtime init`` templates and the eight complete
manifests of the reference's runtime docs) and ``routes.json`` (every method and path of the
reference's OrchestrationAPI app, read from the installed package)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
#: (fixture name, docs page, line of its ```yaml fence): the complete manifests of the docs
DOCS = [("docs-context", "docs/runtime/context.md", 231),
        ("docs-budget", "docs/runtime/governance/budget.md", 56),
        ("docs-health", "docs/runtime/governance/health.md", 52),
        ("docs-mission", "docs/runtime/governance/mission.md", 38),
        ("docs-secrets", "docs/runtime/governance/secrets.md", 50),
        ("docs-index", "docs/runtime/index.md", 266),
        ("docs-manifests-intro", "docs/runtime/manifests.md", 10),
        ("docs-manifests-full", "docs/runtime/manifests.md", 330)]


def main(sdist: Path) -> None:
    out = HERE / "manifests"
    out.mkdir(exist_ok=True)
    cli = Path(sys.executable).parent / "promptise"
    for template in ("basic", "cron", "webhook", "full"):
        subprocess.run([str(cli), "runtime", "init", "-t", template, "-o",
                        str(out / f"template-{template}.agent"), "--force"], check=True,
                       capture_output=True)
    for name, page, line in DOCS:
        lines = (sdist / page).read_text().splitlines()
        assert re.match(r"```ya?ml", lines[line - 1]), (page, line)
        end = lines.index("```", line)
        (out / f"{name}.agent").write_text("\n".join(lines[line:end]) + "\n")
    from aiohttp import web  # the reference's, in its venv
    from promptise.runtime.api import OrchestrationAPI
    from promptise.runtime.runtime import AgentRuntime

    api = OrchestrationAPI(AgentRuntime())
    api._app = app = web.Application()  # what start() does, without binding a port
    api._setup_routes()
    routes = sorted({(m, r.resource.canonical) for r in app.router.routes()
                     for m in [r.method] if m not in ("HEAD", "*")})
    (HERE / "routes.json").write_text(json.dumps(
        [{"method": m, "path": p} for m, p in routes], indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
