from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kasir.snap.schemas import SnapModel


class AccessTokenRequest(SnapModel):
    """interface.md endpoint 1: body of the B2B access-token request."""

    grant_type: str = Field(
        description="Must be `client_credentials`.",
        examples=["client_credentials"],
        json_schema_extra={"enum": ["client_credentials"]},  # checked by parse_grant, which says why
    )
    additional_info: dict[str, Any] | None = Field(None, description="Optional free object.")


class AccessTokenResponse(BaseModel):
    """The access-token resource. `expiresIn` is the string `"900"`."""

    responseCode: str = Field(examples=["2007300"])  # noqa: N815 (wire names)
    responseMessage: str = Field(examples=["Successful"])  # noqa: N815
    accessToken: str = Field(max_length=2048)  # noqa: N815
    tokenType: str = Field(examples=["Bearer"])  # noqa: N815
    expiresIn: str = Field(examples=["900"])  # noqa: N815
    additionalInfo: dict[str, Any] | None = None  # noqa: N815
