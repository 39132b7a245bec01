"""The request bodies of every call, as TypedDicts (public home of `kasir_client._types`).

from kasir_client.bodies import WalletCreatePayment

body: WalletCreatePayment = {"external_id": "...", ...}
client.wallet_create_payment(body)
"""

from kasir_client._types import (
    BnplCalculate,
    BnplCalculationItem,
    BnplCheckout,
    BnplCheckoutItem,
    BnplCustomerDetails,
    BnplPaymentDetails,
    BnplSeller,
    BnplSellerAddress,
    CardAddress,
    CardCharge,
    CardCustomerDetails,
    CardDetails,
    CardItem,
    CardPaymentDetails,
    CardPaymentOptions,
    Money,
    WalletAddress,
    WalletCreatePayment,
    WalletCustomerDetails,
    WalletDetails,
    WalletDummyPayment,
    WalletItem,
    WalletPaymentDetails,
    WalletReference,
    WalletRefund,
    WalletVoid,
)

__all__ = [
    "BnplCalculate",
    "BnplCalculationItem",
    "BnplCheckout",
    "BnplCheckoutItem",
    "BnplCustomerDetails",
    "BnplPaymentDetails",
    "BnplSeller",
    "BnplSellerAddress",
    "CardAddress",
    "CardCharge",
    "CardCustomerDetails",
    "CardDetails",
    "CardItem",
    "CardPaymentDetails",
    "CardPaymentOptions",
    "Money",
    "WalletAddress",
    "WalletCreatePayment",
    "WalletCustomerDetails",
    "WalletDetails",
    "WalletDummyPayment",
    "WalletItem",
    "WalletPaymentDetails",
    "WalletReference",
    "WalletRefund",
    "WalletVoid",
]
