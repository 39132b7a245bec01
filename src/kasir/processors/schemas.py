"""The answer of POST /processors/{name}/notify, for the OpenAPI document."""

from __future__ import annotations

from pydantic import BaseModel


class AppliedNotification(BaseModel):
    product: str
    reference: str
    status: str


class ProcessorNotificationAnswer(BaseModel):
    applied: list[AppliedNotification]
