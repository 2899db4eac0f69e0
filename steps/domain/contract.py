"""The base of every value the steps pass each other: a :class:`msgspec.Struct` with five verbs.

The steps' contracts (:mod:`steps.domain.models`, each step's input and output) are msgspec structs,
not pydantic models: a step pod is a fresh Python process, and importing pydantic and building its
models cost 0.1–0.15 s of every cold step here (``python -m bench.coldstart``; bench/README.md),
where msgspec costs about 10 ms. backup-export's settings (their validators) and the Hera
definitions that render the templates keep pydantic; nothing on an event's path imports it.

:class:`Contract` keeps the verbs the steps and their tests have always used, with the meaning they
had: :meth:`~Contract.model_validate` and :meth:`~Contract.model_validate_json` check data against
the declared types (strictly: ``"1"`` is not an int) and raise :class:`ContractError`, a
``ValueError`` naming the field (msgspec's message, e.g. ``Expected `str`, got `int` - at
`$.tag```); :meth:`~Contract.model_copy` replaces fields without validating them (as pydantic's
does); :meth:`~Contract.model_dump` and :meth:`~Contract.model_dump_json` give the wire form (a
``datetime`` as RFC 3339, ``Z`` for UTC, as pydantic wrote it). Construction by keywords does not
validate (msgspec structs do not): what comes from outside goes through ``model_validate``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from typing import Any, Literal, TypeVar

import msgspec

from steps.domain.errors import ContractError

C = TypeVar("C", bound="Contract")
#: What a python-mode dump keeps as it is (a JSON dump writes them as RFC 3339 text).
_PYTHON_TYPES = (datetime, date, time, timedelta)


#: msgspec's "Expected `int`, got `str` - at `$.targets[0].rule`" (its one way to say where).
_AT_RE = re.compile(r" - at `\$((?:\.|\[).*)`$")


class Contract(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A contract value: keyword-only, unknown fields refused when validated."""

    @classmethod
    def model_validate(cls: type[C], data: Any) -> C:
        """``data`` (a mapping as JSON gives it, or an instance) checked against the declared types."""
        if isinstance(data, cls):
            return data
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise _error(cls, exc) from None

    @classmethod
    def model_validate_json(cls: type[C], text: str | bytes) -> C:
        """JSON text checked against the declared types."""
        try:
            return msgspec.json.decode(text, type=cls)
        except msgspec.ValidationError as exc:
            raise _error(cls, exc) from None
        except msgspec.DecodeError as exc:
            raise ContractError(f"{cls.__name__}: not JSON: {exc}") from None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """What pydantic validates a contract with, when pydantic is asked to (Hera's runner's
        ``validate_call`` on a step's inputs): :meth:`model_validate`. Nothing here imports pydantic
        unless pydantic itself calls this."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls.model_validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: v.model_dump(mode="json")
            ),
        )

    def model_copy(self: C, *, update: Mapping[str, Any] | None = None) -> C:
        """This value with the fields in ``update`` replaced (not validated, as pydantic's copy)."""
        return msgspec.structs.replace(self, **update) if update else self

    def model_dump(
        self, *, mode: Literal["python", "json"] = "python", exclude_none: bool = False
    ) -> dict[str, Any]:
        """The fields as a dict (nested contracts as dicts); ``mode="json"``: the wire form's types
        (lists, RFC 3339 text), as :meth:`model_dump_json` writes them."""
        if mode == "json":
            data = msgspec.json.decode(msgspec.json.encode(self))
        else:
            data = msgspec.to_builtins(self, builtin_types=_PYTHON_TYPES)
        return _without_none(data) if exclude_none else data

    def model_dump_json(self) -> str:
        """The wire form: compact JSON, fields in declaration order."""
        return msgspec.json.encode(self).decode()


def _error(contract: type, error: msgspec.ValidationError) -> ContractError:
    """msgspec's error as a :class:`ContractError` naming the field its message names."""
    message = str(error)
    at = _AT_RE.search(message)
    return ContractError(f"{contract.__name__}: {message}", field=at.group(1).lstrip(".") if at else "")


def _without_none(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_none(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_without_none(v) for v in data]
    return data
