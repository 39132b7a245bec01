"""The bodies of /healthz and /readyz, for the OpenAPI document."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema


class Health(BaseModel):
    status: str = Field(examples=["ok"])


class Readiness(BaseModel):
    """`ready` with each product's processor (null: the product is off), or `not ready` with the reason (503)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"status": "ready", "products": {"wallet": "simulator", "bnpl": None}}]}
    )

    status: str = Field(json_schema_extra={"enum": ["ready", "not ready"]})
    products: dict[str, str | None] | SkipJsonSchema[None] = None
    reason: str | SkipJsonSchema[None] = None
