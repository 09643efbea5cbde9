"""Fixtures for the runtime tests."""

from tests.fake_openai import server  # noqa: F401 - the loopback OpenAI-compatible server
