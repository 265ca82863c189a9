"""The base of every MySQLCapture model: camelCase manifest names, no unknown fields, frozen, with rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

RULE_ERROR = "rule"
"""The pydantic error type of a broken `Rule`; its context names the field (manifest name) and the message."""


@dataclass(frozen=True)
class Rule:
    """A rule across fields of one object, stated twice: in Python for the worker, in CEL for the API server.

    Both statements sit side by side here, and tests/unit/test_crd.py evaluates both on the same manifests,
    so they cannot drift apart unnoticed.
    """

    holds: Callable[[Any], bool]
    """The Python statement: true when the (otherwise valid) model satisfies the rule."""
    cel: str
    """The CEL statement over `self`, the object as the API server sees it (defaults applied)."""
    message: str
    """What is wrong and how to fix it; the same text on both sides."""
    field: str | None = None
    """The manifest name of the field the problem is reported at; None reports it at the object itself."""

    def validation(self) -> dict[str, str]:
        """The rule as an `x-kubernetes-validations` entry."""
        entry = {"rule": self.cel, "message": self.message}
        if self.field is not None:
            entry["fieldPath"] = "." + self.field
        return entry

    def error(self) -> PydanticCustomError:
        """The pydantic error for a model that breaks the rule; load_manifest reports it at `field`."""
        where = f"{self.field}: " if self.field is not None else ""
        return PydanticCustomError(
            RULE_ERROR,
            "{where}{message}",
            {"where": where, "field": self.field or "", "message": self.message},
        )


def _add_rules(schema: dict[str, Any], model: type[Any]) -> None:
    rules: tuple[Rule, ...] = getattr(model, "rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.validation() for rule in rules]


class Model(BaseModel):
    """A part of the MySQLCapture resource: snake_case names in Python, camelCase aliases in manifests."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        json_schema_extra=_add_rules,
    )

    rules: ClassVar[tuple[Rule, ...]] = ()
    """Cross-field rules of this object, checked after its fields are valid."""

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        for rule in self.rules:
            if not rule.holds(self):
                raise rule.error()
        return self
