"""kasir-client: the Python client for Kasir.

    from kasir_client import Client, Credentials

    credentials = Credentials.from_files("var/demo/credentials.json", "var/demo/private.pem")
    with Client("http://127.0.0.1:8000", credentials) as client:   # AsyncClient: same methods, awaited
        token = client.access_token()                  # cached, refreshed before expiry ("disbursement" too)
        tx = client.wallet_create_payment({...})       # Basic auth, x-req-signature, x-version: v3
        options = client.bnpl_calculate({...})         # SNAP-signed, fresh X-EXTERNAL-ID
        result = client.card_charge({...})             # X-Idempotency-Key reused across retries
        va = client.create_va({...})                   # a virtual account: va.va_number, as the wallet signs
        link = client.create_payment_link({...})       # a payment link: send the customer to link.payment_url
        sent = client.transfer({...})                  # a payout: the disbursement token, X-Idempotency-Key
        if result.is_success:                          # statusCode "00"
            print(result.link)

Retries: the calls that create or move money carry an X-Idempotency-Key (made per call, or
`idempotency_key=`) that every retry repeats, so none acts twice; all calls are retried after
connection errors and 5xx, money calls also after 409 with Retry-After, with exponential backoff,
full jitter and Retry-After honoured. The whole rule, and why it is safe: `Client.__doc__`.

Exceptions (see `kasir_client._errors`):

    KasirError
    ├── ConfigurationError
    ├── TransportError
    ├── APIError (.status, .code, .message, .errors, .request_id, .body)
    │   ├── AuthenticationError
    │   ├── ValidationError
    │   ├── NotFoundError
    │   ├── ConflictError
    │   └── ServerError
    ├── SignatureError
    └── ConfirmationError

Wallet, virtual-account, payment-link, BNPL, disbursement and token calls raise an APIError; card_charge returns
its refusal (the interface's SDK mapping) as a ChargeResult whose `.error` is the same APIError.

Callbacks: `verify_wallet_callback`, `verify_va_callback`, `verify_payment_page_callback`,
`verify_bnpl_notification`, `verify_payout_notification`, then `client.confirm_wallet_payment(event, amount=...)` /
`client.confirm_va_payment(...)` / `client.confirm_payment_link(...)` / `client.confirm_bnpl_payment(...)`
before fulfilling (the wallet, VA and payment-page signature covers neither status nor amount); for your
own tests `sign_wallet_callback`, `sign_va_callback`, `sign_payment_page_callback` and
`sign_bnpl_notification`.
Request bodies are TypedDicts (`kasir_client.bodies`). The whole guide: the SDK's README.md.
"""

from kasir_client import bodies
from kasir_client._client import USER_AGENT, AsyncClient, Client, RequestLog
from kasir_client._errors import (
    APIError,
    AuthenticationError,
    ConfigurationError,
    ConfirmationError,
    ConflictError,
    KasirError,
    NotFoundError,
    ServerError,
    SignatureError,
    TransportError,
    ValidationError,
)
from kasir_client._models import (
    BnplCalculation,
    BnplNotification,
    BnplTransaction,
    ChargeResult,
    Credentials,
    InstallmentOption,
    PaymentLinkResult,
    PaymentPageCallback,
    PayoutAccount,
    PayoutBalance,
    PayoutHistory,
    PayoutHistoryEntry,
    PayoutNotification,
    PayoutTransfer,
    SelectedChannel,
    VaCallback,
    VaPayment,
    VaPaymentResult,
    VaResult,
    WalletCallback,
    WalletResult,
)
from kasir_client._version import __version__ as __version__
from kasir_client._webhooks import (
    sign_bnpl_notification,
    sign_payment_page_callback,
    sign_payout_notification,
    sign_va_callback,
    sign_wallet_callback,
    verify_bnpl_notification,
    verify_payment_page_callback,
    verify_payout_notification,
    verify_va_callback,
    verify_wallet_callback,
)

__all__ = [
    "APIError",
    "AsyncClient",
    "AuthenticationError",
    "BnplCalculation",
    "BnplNotification",
    "BnplTransaction",
    "ChargeResult",
    "Client",
    "ConfigurationError",
    "ConfirmationError",
    "ConflictError",
    "Credentials",
    "InstallmentOption",
    "KasirError",
    "NotFoundError",
    "PaymentLinkResult",
    "PaymentPageCallback",
    "PayoutAccount",
    "PayoutBalance",
    "PayoutHistory",
    "PayoutHistoryEntry",
    "PayoutNotification",
    "PayoutTransfer",
    "RequestLog",
    "SelectedChannel",
    "ServerError",
    "SignatureError",
    "TransportError",
    "USER_AGENT",
    "ValidationError",
    "VaCallback",
    "VaPayment",
    "VaPaymentResult",
    "VaResult",
    "WalletCallback",
    "WalletResult",
    "bodies",
    "sign_bnpl_notification",
    "sign_payment_page_callback",
    "sign_payout_notification",
    "sign_va_callback",
    "sign_wallet_callback",
    "verify_bnpl_notification",
    "verify_payment_page_callback",
    "verify_payout_notification",
    "verify_va_callback",
    "verify_wallet_callback",
]
