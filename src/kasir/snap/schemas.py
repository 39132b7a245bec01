"""Base for SNAP bodies: camelCase on the wire, snake_case in Python."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SnapModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class SnapErrorBody(BaseModel):
    """Every SNAP failure: `responseCode` (HTTP + service code + case) and `responseMessage`."""

    responseCode: str  # noqa: N815 (wire name)
    responseMessage: str  # noqa: N815
