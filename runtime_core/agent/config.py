"""The agent's settings: which model (a string, a scripted script, a remote model's settings
or, from Python, a model object) and which Python tools by import path. MCP servers are in
agent/mcp/config.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, Field, GetCoreSchemaHandler, field_validator
from pydantic_core import core_schema

from runtime_core.agent.model import Model
from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec
from runtime_core.strict import StrictModel

ModelSetting = str | ScriptedModelSpec | RemoteModelSpec


def is_model_object(value: object) -> TypeGuard[Model]:
    """A model given as an object (``ProcessConfig(model=obj)``): anything with a ``name`` and
    a ``complete(request)`` coroutine, as ``AgentProcess(model=obj)`` takes."""
    return (not isinstance(value, str | dict | list | BaseModel)
            and callable(getattr(value, "complete", None))
            and isinstance(getattr(value, "name", None), str))


def describe_model_object(model: Model) -> str:
    """How a model object shows where a config is JSON (digest, Config tab, API): its class
    and name. It is not a setting a manifest could load."""
    return f"<{type(model).__qualname__} object {model.name!r}>"


class _DeclarativeOrObject:
    """Pydantic schema of ProcessConfig.model: the declarative forms are validated as before
    (a manifest can only write those); a model object is kept as is, never copied."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        declarative = handler.generate_schema(ModelSetting)

        def keep_object(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            if is_model_object(value):
                return value
            if not isinstance(value, str | dict | BaseModel) and hasattr(value, "complete"):
                raise ValueError(f"a model object needs a 'name' (str) and an async "
                                 f"'complete(request)'; {type(value).__qualname__} has no name")
            return validate(value)

        def show_object(value: Any, serialize: core_schema.SerializerFunctionWrapHandler,
                        info: core_schema.SerializationInfo) -> Any:
            if is_model_object(value):
                return describe_model_object(value) if info.mode == "json" else value
            return serialize(value)

        return core_schema.no_info_wrap_validator_function(
            keep_object, declarative,
            serialization=core_schema.wrap_serializer_function_ser_schema(
                show_object, info_arg=True, schema=declarative))


#: ProcessConfig.model: a declarative setting or a model object.
ProcessModelSetting = Annotated[ModelSetting | Model, _DeclarativeOrObject]


class ToolDeclaration(StrictModel):
    """A Python tool named by import path, e.g. ``"mypkg.tools:lookup"``."""

    path: str = Field(description=(
        "'package.module:function', imported from the manifest's folder (or the installed "
        "packages)."))
    name: str | None = Field(default=None, description="The tool's name; default: the function's.")
    description: str | None = Field(default=None, description=(
        "What the model is told the tool does; default: the function's docstring."))
    effect: Literal["read", "write"] = Field(default="write", description=(
        "read: safe to repeat (interrupted by a crash, it is reported interrupted); write: "
        "changes the world (a crash mid-call parks the run until an operator reconciles it)."))

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr:
            raise ValueError(
                f"tool path {value!r} must look like 'package.module:function'"
            )
        return value
