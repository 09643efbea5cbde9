"""The form of an MCP server's question, as the control room and the CLI build it: the fields
its requested schema asks for, values typed by an operator turned into the field's type, and
the check an answer must pass (the runtime checks again before the server gets it)."""

from __future__ import annotations

from runtime_core.agent.mcp.elicit_form import (
    FormError,
    FormField,
    check_content,
    field_problem,
    form_fields,
    parse_value,
)

__all__ = ["FormError", "FormField", "check_content", "field_problem", "form_fields",
           "parse_value"]
