"""``promptui serve --cluster DSN``: this server is one node of a scale-out cluster.

Every node is started on the same manifests and the same PostgreSQL. The nodes register and
beat; each process runs on exactly one live node, which holds its lease (a fencing epoch), and
the processes spread over the nodes (a fair share each, ``--max-processes`` caps a node). Every
process's journal is that database, whatever its manifest says, so the node that takes a
process over (another node died, or left) recovers it exactly as a restart does on one box.
The node's address in the cluster is its API URL. The DSN's password is never printed; pass
``--cluster env`` to read the DSN from PROMPTUI_DSN and keep it out of the process list.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from promptui.cli.options import err, fail, load_manifests

if TYPE_CHECKING:
    from runtime_core.cluster.host import ClusterHost
    from runtime_core.control.cluster import ClusterControl
    from runtime_core.runtime import AgentRuntime

DSN_ENV = "PROMPTUI_DSN"
FROM_ENV = "env"

CLUSTER_OPTION = typer.Option(
    None, "--cluster", metavar="DSN", help="Run as a node of a scale-out cluster on this "
    "PostgreSQL (e.g. postgresql://promptui@db.internal/promptui); every process's journal is "
    f"that database. '{FROM_ENV}' reads the DSN from {DSN_ENV} (keeps a password out of the "
    "process list).")
NODE_ID_OPTION = typer.Option(None, "--node-id", help="This node's id in the cluster "
                              "(default: HOSTNAME-PID); with --cluster.")
MAX_PROCESSES_OPTION = typer.Option(None, "--max-processes", min=0, help="The most processes "
                                    "this node runs (default: its fair share); with "
                                    "--cluster.")
LEASE_TTL_OPTION = typer.Option(10.0, "--lease-ttl", min=0.5, max=600.0, hidden=True,
                                help="Seconds a process's lease lasts without renewal.")
NODE_GRACE_OPTION = typer.Option(
    None, "--node-grace", min=0.1, metavar="SECONDS", help="How long past the lease TTL a "
    "silent node shows as stale before it shows as gone (default: three lease TTLs); with "
    "--cluster.")
NODE_PRUNE_OPTION = typer.Option(
    3600.0, "--node-prune-after", min=1.0, metavar="SECONDS", help="A node silent this long "
    "is removed from the nodes list by the live nodes ('promptui nodes forget' removes one "
    "sooner); with --cluster.")


@dataclass(slots=True)
class ClusterSetup:
    runtime: AgentRuntime
    host: ClusterHost
    control: ClusterControl


def cluster_dsn(given: str) -> str:
    """The DSN ``--cluster`` names (``env``: PROMPTUI_DSN)."""
    if given != FROM_ENV:
        return given
    dsn = os.environ.get(DSN_ENV, "")
    if not dsn:
        raise fail(f"--cluster {FROM_ENV}: {DSN_ENV} is not set; set it to the cluster's "
                   "PostgreSQL DSN, or pass the DSN itself")
    return dsn


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def load_cluster(paths: list[Path], given_dsn: str, *, node_id: str | None,
                 max_processes: int | None, ttl_s: float, name: str,
                 read_only: bool, node_grace_s: float | None = None,
                 node_prune_after_s: float = 3600.0) -> ClusterSetup:
    """The node's runtime (no process added yet: its leases decide), its cluster host and its
    control plane; manifest problems printed and exit 1, a DSN that cannot be read exit 2."""
    from runtime_core.cluster.host import ClusterHost
    from runtime_core.cluster.nodes import NodeAging
    from runtime_core.control.cluster import ClusterControl
    from runtime_core.errors import RuntimeBaseError
    from runtime_core.manifest.loader import ManifestError
    from runtime_core.runtime import AgentRuntime

    dsn = cluster_dsn(given_dsn)
    try:
        manifests = load_manifests(paths)
    except ManifestError as exc:
        for problem in exc.problems:
            err.print(escape(str(problem)))
        raise typer.Exit(1) from None
    seen: dict[str, Path] = {}
    for manifest in manifests:
        if manifest.name in seen:
            raise fail(f"process {manifest.name!r} is declared twice ({seen[manifest.name]} "
                       f"and {manifest.path}); a cluster runs each process once", 1)
        seen[manifest.name] = manifest.path
        for warning in manifest.warnings:
            err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    runtime = AgentRuntime()
    host = ClusterHost(runtime, manifests, dsn, node_id=node_id or default_node_id(),
                       ttl_s=ttl_s, max_processes=max_processes,
                       node_aging=NodeAging(grace_s=node_grace_s,
                                            prune_after_s=node_prune_after_s))
    try:
        host.check()
    except RuntimeBaseError as exc:
        raise fail(str(exc)) from None
    return ClusterSetup(runtime, host, ClusterControl(runtime, host, name=name,
                                                      read_only=read_only))
