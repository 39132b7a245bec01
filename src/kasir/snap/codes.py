"""SNAP service codes (docs/decisions.md §4). A responseCode is HTTP status + service code + case."""

from __future__ import annotations

SERVICE_TOKEN = "73"  # noqa: S105 (a service code, not a password)
SERVICE_PAYMENT_CALCULATION = "90"
SERVICE_QR_CHECKOUT = "92"
SERVICE_STATUS_INQUIRY = "93"

SUCCESS_MESSAGE = "Successful"


def success_code(service_code: str) -> str:
    """`2007300` for the token service, `2009200` for QR checkout, ..."""
    return f"200{service_code}00"


# Disbursement (docs/decisions.md §11.1).
SERVICE_BALANCE_INQUIRY = "11"
SERVICE_HISTORY_LIST = "12"
SERVICE_HISTORY_DETAIL = "13"
SERVICE_ACCOUNT_INQUIRY = "16"
SERVICE_TRANSFER = "18"
SERVICE_TRANSFER_STATUS = "36"
