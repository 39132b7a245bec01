"""The request bodies, as TypedDicts: your editor and type checker see every field and its type.

Plain dicts: pass `{"external_id": ...}` literals, the names are the wire names (snake_case for the
wallet and virtual accounts, camelCase for card and BNPL, as Kasir's interface has them). Money: whole
rupiah as `int` (wallet, virtual accounts, card), a string with two decimals (BNPL, e.g.
"150000.00"). Each body is split in a required part (`_...Required`) and the optional keys
(total=False), which runs on Python 3.10.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

# --- wallet (snake_case) ----------------------------------------------------------------


class WalletPaymentDetailsRequired(TypedDict):
    amount: int  # whole rupiah
    transaction_description: str


class WalletPaymentDetails(WalletPaymentDetailsRequired, total=False):
    expired_time: str  # ISO 8601 with offset


class WalletCustomerDetails(TypedDict):
    email: str
    full_name: str
    phone: str


class WalletItemRequired(TypedDict):
    item_id: str
    name: str
    amount: int  # unit price, whole rupiah
    qty: int


class WalletItem(WalletItemRequired, total=False):
    description: str


class WalletAddress(TypedDict):
    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str  # ISO country code, e.g. "ID"


class WalletDetails(TypedDict):
    id: str  # the customer's wallet account: a phone number (HP) or an e-mail address
    id_type: Literal["HP", "EMAIL"]


class WalletCreatePaymentRequired(TypedDict):
    external_id: str
    order_id: str
    currency: Literal["IDR"]
    payment_method: Literal["wallet"]
    payment_channel: str  # OVO, DANA, SHOPEEPAY, LINKAJA, VIRGO; QRIS with create-qr only
    payment_details: WalletPaymentDetails
    customer_details: WalletCustomerDetails
    item_details: list[WalletItem]


class WalletCreatePayment(WalletCreatePaymentRequired, total=False):
    """wallet_create_payment and wallet_create_qr; `wallet_details` is required by create-payment."""

    wallet_details: WalletDetails
    billing_address: WalletAddress
    shipping_address: WalletAddress
    additional_data: str
    callback_url: str
    return_url: str


class WalletReference(TypedDict):
    """wallet_inquiry: names one transaction."""

    transaction_id: str
    external_id: str
    order_id: str


class WalletRefundRequired(WalletReference):
    refund_amount: int  # whole rupiah


class WalletRefund(WalletRefundRequired, total=False):
    reason: str


class WalletVoid(WalletReference, total=False):
    reason: str


class WalletDummyPaymentRequired(WalletReference):
    payment_method: Literal["wallet"]
    payment_channel: str


class WalletDummyPayment(WalletDummyPaymentRequired, total=False):
    """Staging only: `simulate_status` "PAID" (default) or a failure, with `failure_reason`."""

    simulate_status: Literal["PAID", "FAILED", "EXPIRED"]
    failure_reason: str


# --- virtual accounts (snake_case, the wallet's headers) ---------------------------------


class VaPaymentDetailsRequired(TypedDict):
    billing_name: str  # the name the bank shows the payer, up to 100 characters
    transaction_description: str


class VaPaymentDetails(VaPaymentDetailsRequired, total=False):
    """`amount` is required for CLOSED and PARTIAL (the total), optional and never enforced for OPEN."""

    payment_system: Literal["CLOSED", "OPEN", "PARTIAL"]  # default CLOSED
    is_multi_use: bool  # CLOSED default False, OPEN default True; PARTIAL ignores it
    amount: int  # whole rupiah
    va_number: str  # your digits (1 to 12), left-padded with 0 after the bank's prefix; else random
    expired_time: str  # ISO 8601 with offset; 1 minute to 3650 days ahead
    is_customer_paying_fee: bool


class VaCustomerDetailsRequired(TypedDict):
    email: str
    full_name: str


class VaCustomerDetails(VaCustomerDetailsRequired, total=False):
    phone: str


class VaAddress(TypedDict, total=False):
    """Free text, every field optional."""

    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str


class VaCreateRequired(TypedDict):
    external_id: str
    order_id: str
    currency: Literal["IDR"]
    payment_method: Literal["bank_transfer"]
    payment_channel: str  # BCA, BRI, MANDIRI, BNI, PERMATA, CIMB, BSI, BNC (and the aliases BCA-MCP, ...)
    payment_details: VaPaymentDetails
    customer_details: VaCustomerDetails


class VaCreate(VaCreateRequired, total=False):
    """create_va. CLOSED and PARTIAL: the items' amount × qty add up to payment_details.amount."""

    item_details: list[WalletItem]
    billing_address: VaAddress
    shipping_address: VaAddress
    callback_url: str
    additional_data: str


class VaReference(WalletReference, total=False):
    """va_inquiry and cancel_va: names one VA (the three ids together)."""

    payment_method: Literal["bank_transfer"]
    payment_channel: str  # the VA's


class VaDummyPaymentRequired(WalletReference):
    payment_method: Literal["bank_transfer"]
    payment_channel: str  # the VA's


class VaDummyPayment(VaDummyPaymentRequired, total=False):
    """Staging only: one payment into the VA. `amount` is required for OPEN and PARTIAL; for CLOSED it may be
    left out (the VA's amount) and, when sent, must be the VA's amount."""

    amount: int


# --- payment links (snake_case, the wallet's headers) -------------------------------------


class PaymentLinkChannelRequired(TypedDict):
    channel: str  # CARD, VA, OVO, DANA, SHOPEEPAY, LINKAJA, VIRGO or QRIS, any letter case


class PaymentLinkChannel(PaymentLinkChannelRequired, total=False):
    """One method offered on the link's page. `acq`: CARD's acquirer (BCACC, CIMBCC, BRICC, BCAPG, CIMBPG or
    CARD, the default: any), VA's bank (required: BCA, BRI, ..., or an alias such as BCA-MCP); a wallet's or
    QRIS's own code, or left out."""

    acq: str


class PaymentLinkCustomerDetailsRequired(TypedDict):
    full_name: str
    email: str
    address: str


class PaymentLinkCustomerDetails(PaymentLinkCustomerDetailsRequired, total=False):
    phone: str  # prefills the wallet's phone on the page
    is_email_show: bool  # default True: the page shows the customer's e-mail
    is_phone_show: bool  # default True


class PaymentLinkItemRequired(TypedDict):
    item_id: str
    name: str
    amount: int  # unit price, whole rupiah
    qty: int  # 1 to 999


class PaymentLinkItem(PaymentLinkItemRequired, total=False):
    description: str


class PaymentLinkCreateRequired(TypedDict):
    external_id: str
    order_id: str
    amount: int  # whole rupiah, 10,000 or more; with item_details, the items' amount × qty
    description: str
    customer_details: PaymentLinkCustomerDetails
    selected_channels: list[PaymentLinkChannel]  # in the order the page lists them


class PaymentLinkCreate(PaymentLinkCreateRequired, total=False):
    """create_payment_link (docs/merchant/payment-link.md)."""

    currency: Literal["IDR"]
    is_customer_paying_fee: bool
    item_details: list[PaymentLinkItem]
    billing_address: VaAddress
    shipping_address: VaAddress
    save_card: bool  # offer "save this card" on the card page
    callback_url: str
    success_redirect_url: str  # absolute http(s); transaction_id=<id> is added to its query
    failed_redirect_url: str
    expired_time: str  # ISO 8601 with offset; default 24 hours, 1 minute to 30 days ahead
    additional_data: str


# --- BNPL (SNAP, camelCase) -------------------------------------------------------------


class Money(TypedDict):
    value: str  # up to 16 digits and 2 decimals: "150000.00"
    currency: Literal["IDR"]


class BnplCalculationItemRequired(TypedDict):
    itemId: str
    name: str
    amount: Money
    url: str
    category: str
    qty: int | str
    parentType: Literal["SELLER"]
    parentId: str


class BnplCalculationItem(BnplCalculationItemRequired, total=False):
    imageUrl: str


class BnplCalculateRequired(TypedDict):
    amount: Money
    itemDetails: list[BnplCalculationItem]


class BnplCalculate(BnplCalculateRequired, total=False):
    additionalInfo: dict[str, Any]


class BnplPaymentDetails(TypedDict):
    amount: Money


class BnplCheckoutItem(TypedDict):
    itemId: str  # a SKU, or shippingfee, adminfee, taxfee, discount, additionalfee, insurancefee
    name: str
    amount: Money
    category: str
    qty: int


class BnplCustomerDetailsRequired(TypedDict):
    firstName: str
    email: str
    phone: str


class BnplCustomerDetails(BnplCustomerDetailsRequired, total=False):
    lastName: str


class BnplSellerAddressRequired(TypedDict):
    firstName: str
    address: str
    city: str
    postalCode: str
    phone: str
    countryCode: str


class BnplSellerAddress(BnplSellerAddressRequired, total=False):
    lastName: str


class BnplSeller(TypedDict, total=False):
    id: str
    name: str
    url: str
    sellerIdNumber: str
    email: str
    address: BnplSellerAddress


class BnplCheckoutRequired(TypedDict):
    partnerReferenceNo: str
    paymentDetails: BnplPaymentDetails
    itemDetails: list[BnplCheckoutItem]
    customerDetails: BnplCustomerDetails
    callbackUrl: str  # where the notification goes (verify it with verify_bnpl_notification)


class BnplCheckout(BnplCheckoutRequired, total=False):
    sellers: list[BnplSeller]
    additionalInfo: dict[str, Any]


# --- card (camelCase) -------------------------------------------------------------------


class CardPaymentDetailsRequired(TypedDict):
    amount: int  # whole rupiah
    isCustomerPayingFee: bool
    transactionDescription: str


class CardPaymentDetails(CardPaymentDetailsRequired, total=False):
    expiredTime: str


class CardItemRequired(TypedDict):
    itemId: str
    name: str
    amount: int  # unit price
    qty: int  # 1 to 999


class CardItem(CardItemRequired, total=False):
    description: str


class CardCustomerDetails(TypedDict):
    email: str
    fullName: str
    phone: str
    ipAddress: str


class CardAddress(TypedDict):
    fullName: str
    phone: str
    address: str
    city: str
    postalCode: str
    country: str


class CardDetails(TypedDict, total=False):
    """Only on a direct charge; never log or store these."""

    cardNumber: str
    cardExpiredMonth: str
    cardExpiredYear: str
    cardCvn: str
    cardHolderName: str


class CardPaymentOptions(TypedDict, total=False):
    useRewards: bool
    campaign_code: str  # snake_case on the wire (interface.md)
    tenor: Literal["0", "3", "6", "12"]  # months; "0" is full payment


class CardChargeRequired(TypedDict):
    externalId: str
    orderId: str
    currency: Literal["IDR"]
    paymentMethod: Literal["card", "ewallet"]
    paymentChannel: str
    paymentMode: Literal["CLOSE", "OPEN"]
    paymentDetails: CardPaymentDetails
    itemDetails: list[CardItem]
    customerDetails: CardCustomerDetails
    billingAddress: CardAddress
    shippingAddress: CardAddress
    returnUrl: str


class CardCharge(CardChargeRequired, total=False):
    cardDetails: CardDetails
    callbackUrl: str
    paymentOptions: CardPaymentOptions
    additionalData: str
    source: str  # the SDK sends "kasir-client" unless you name another


# --- disbursement (SNAP, camelCase, the disbursement token) ------------------------------


class AccountInquiryRequired(TypedDict):
    beneficiaryBankCode: str  # 3 digits (Bank Indonesia's), or 7 (code + branch); or OVO, DANA, GOPAY, ...
    beneficiaryAccountNo: str  # a bank's 6 to 34 digits; an e-wallet's phone (08... or 628...)


class AccountInquiry(AccountInquiryRequired, total=False):
    partnerReferenceNo: str
    additionalInfo: dict[str, Any]


class BalanceInquiry(TypedDict, total=False):
    partnerReferenceNo: str
    accountNo: str  # your disbursement account (account_no); when sent it must be yours
    balanceTypes: list[str]  # only "cash"


class OriginatorInfo(TypedDict):
    originatorCustomerNo: str
    originatorCustomerName: str
    originatorBankCode: str


class TransferInterbankRequired(TypedDict):
    partnerReferenceNo: str  # yours, unique among your accepted transfers, forever
    amount: Money  # whole rupiah: "250000.00"
    beneficiaryAccountName: str
    beneficiaryAccountNo: str
    beneficiaryBankCode: str


class TransferInterbank(TransferInterbankRequired, total=False):
    originatorInfos: list[OriginatorInfo]  # required on v1.2 (the default version)
    beneficiaryAddress: str
    beneficiaryBankName: str
    beneficiaryEmail: str
    customerReference: str
    currency: Literal["IDR"]
    sourceAccountNo: str
    transactionDate: str  # ISO 8601 with an offset
    feeType: Literal["OUR", "BEN", "SHA"]
    additionalInfo: dict[str, Any]  # "remark" shows in the history; "callbackUrl" asks for the notification


class HistoryFilter(TypedDict, total=False):
    originalPartnerReferenceNo: str


class HistoryList(TypedDict, total=False):
    partnerReferenceNo: str
    fromDateTime: str  # ISO 8601 with an offset; default today 00:00 Asia/Jakarta
    toDateTime: str  # default now; a window of at most 31 days
    pageSize: int  # 1 to 99, default 10
    pageNumber: int  # from 0
    filter: HistoryFilter
    additionalInfo: dict[str, Any]
