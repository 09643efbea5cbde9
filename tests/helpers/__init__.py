"""Code the tests share, one job per module; the fixtures that use it live in the conftest.py
files (that is where pytest finds them). Test modules import from here, never from each other
(tests/spec/test_test_layout.py holds that).

    polling         wait_for / until (async) and poll (sync): a condition with a timeout; settle
    ports           free_port, taken_port
    events          record: every event a process emits
    cli             promptui_command and the CLI runners
    serving         the control API in the test's loop (served) and ``promptui serve`` as a
                    subprocess (start_serve, Served), with the manifests they run
    room            the control room under Pilot: apps, keys, what the screen shows
    scenes          the frozen scene (a ControlPlane of fixed data and a fixed clock)
    snapshots       what drives the frozen scene: sizes, pumping, opening a process, UTC
    models          loopback OpenAI-compatible and Anthropic servers
    postgres        a throwaway PostgreSQL from the installed binaries
    webhooks        webhook triggers on port 0 and each sender's signature
    mcp             MCP servers over HTTP (ours and the npm reference servers)
    elicitation     the asking MCP server's process and its questions
    completion      the deploy-pipeline tools of the completion-contract tests
    recovery        an outside ledger and a process dropped as a crash drops it
    history         a journal a real process wrote (for rewind and fork)
    start_failures  manifests that cannot start, one per cause
    planted         a process with a planted secret in every place one can go
    cluster         ``promptui serve --cluster`` nodes as OS processes, a load, the journal
    workers/        scripts the tests start as subprocesses (by path or ``python -m``)
"""
