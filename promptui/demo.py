"""The built-in demo: a handful of processes that show every runtime feature offline."""

from __future__ import annotations

from runtime_core import AgentRuntime, ProcessConfig

DEMO_PROCESSES: dict[str, dict[str, object]] = {
    "heartbeat": {
        "instructions": "Report that the system is alive.",
        "triggers": [{"type": "interval", "seconds": 1.0}],
    },
    "researcher": {
        "instructions": "Research the topic in each message and record what you found.",
        "model": {
            "provider": "scripted",
            "turns": [
                {"tool_calls": [{"name": "lookup", "args": {"topic": "$payload.content"}}]},
                {"tool_calls": [{"name": "record_finding",
                                 "args": {"topic": "$payload.content"}}]},
                {"sleep": 0.2, "reply": "Noted and recorded."},
            ],
        },
        "tools": [
            {"path": "promptui.demo_tools:lookup", "effect": "read"},
            {"path": "promptui.demo_tools:record_finding", "effect": "write"},
        ],
        "triggers": [{"type": "message", "topic": "research.*"}],
    },
    "flaky-deployer": {
        "instructions": "Deploy when asked; the demo's deploy target fails every other time.",
        "model": {
            "provider": "scripted",
            "turns": [{"tool_calls": [{"name": "check_service", "args": {"name": "api"}}]},
                      {"reply": "Deployed."}],
            "scripts": {"broken": [{"raise": "deploy target refused the connection"}]},
            "select": {"by_payload_field": "data.script"},
        },
        "tools": [{"path": "promptui.demo_tools:check_service", "effect": "read"}],
        "triggers": [{"type": "event", "event_type": "deploy.requested"}],
        "trigger_delivery": {"max_retries": 1, "retry_backoff": 0.5},
        "max_consecutive_failures": 2,
        "restart_policy": "on_failure",
        "restart_backoff": 1.0,
    },
    "looper": {
        "instructions": "Watch the queue. (Its script gets stuck calling the same tool.)",
        "model": {
            "provider": "scripted",
            "turns": [{"tool_calls": [{"name": "check_service", "args": {"name": "queue"}}],
                       "repeat": "forever"}],
        },
        "tools": [{"path": "promptui.demo_tools:check_service", "effect": "read"}],
        "run_budget": {"max_model_calls": 6},
        "triggers": [{"type": "interval", "seconds": 2.0}],
    },
}


def build_demo_runtime() -> AgentRuntime:
    runtime = AgentRuntime()
    for name, data in DEMO_PROCESSES.items():
        runtime.add_process(name, ProcessConfig.model_validate(data))
    return runtime


async def drive_demo(runtime: AgentRuntime, tick: int) -> None:
    """Feed the demo's bus and broker so every process has work (called once per second)."""
    topics = ["sqlite", "backoff", "queues"]
    runtime.broker.publish("research.topic", topics[tick % len(topics)], sender="demo")
    script = "broken" if tick % 2 else "ok"
    runtime.event_bus.emit("deploy.requested", {"script": script, "build": tick}, source="ci")
