// What a shop's TypeScript writes with the types openapi-typescript generates from Kasir's /openapi.json
// (tests/test_openapi_typescript.py): `tsc --noEmit --strict` must accept it as written. Each value is
// what Kasir sends or accepts on the wire; only the fields a request needs are given, so a field the
// document leaves optional must not come out required.
import type { paths, webhooks } from "./openapi";

type DummyPayment = paths["/ewallet/v2/dummy-payment"]["post"];
type CardCharge = paths["/card-v2/v1/charge"]["post"];
type Json<Body> = Body extends { content: { "application/json": infer Value } } ? Value : never;

// The dummy payment answers its six fields, and a generated client finds exactly those.
export const dummyPaymentAnswer: Json<DummyPayment["responses"][200]> = {
  external_id: "EXT-1001",
  order_id: "ORDER-1001",
  transaction_status: "PAID",
  paid_time: "2026-11-23T10:16:00.000+07:00",
  reference_id: "R2611230001",
  response_code: "00",
};
// @ts-expect-error the dummy payment's answer has no response_message
export const dummyPaymentMessage: string = dummyPaymentAnswer.response_message;

// The provider SDK's snake_case charge on the same path as the camelCase one, with its headers.
export const sdkCharge: Json<CardCharge["requestBody"]> = {
  external_id: "EXT-1002",
  order_id: "ORD-1002",
  currency: "IDR",
  payment_method: "CARD",
  payment_channel: "BCAPG",
  payment_mode: "CLOSE",
  return_url: "https://shop.example/return",
  card_details: {
    card_holder_name: "Siti Rahayu",
    card_number: "4811111111111114",
    card_expired_month: "12",
    card_expired_year: "2030",
    card_cvn: "123",
  },
  payment_details: { amount: 150000, transaction_description: "Sepatu lari" },
  customer_details: {
    full_name: "Siti Rahayu",
    phone: "081234567890",
    email: "siti@example.id",
    ip_address: "203.0.113.7",
  },
  store_token: true,
};
export const sdkHeaders: CardCharge["parameters"]["header"] = {
  "x-req-signature": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
  "x-version": "v3",
  "response-type": "url",
};
export const sdkAnswer: Json<CardCharge["responses"][200]> = {
  response_code: "00",
  response_message: "Success",
  data: { link: "https://kasir.example/card/pages/CARD2611230001" },
};
export const sdkRefusal: Json<CardCharge["responses"][400]> = {
  response_code: "01",
  response_message: "payment_details.amount is required",
};

// Kasir's own camelCase charge on that path, and what either answer gives the shop: the page to send the customer to.
export const camelCharge: Json<CardCharge["requestBody"]> = {
  externalId: "EXT-1003",
  orderId: "ORD-1003",
  currency: "IDR",
  paymentMethod: "card",
  paymentChannel: "CARD",
  paymentMode: "CLOSE",
  paymentDetails: { amount: 150000, isCustomerPayingFee: false, transactionDescription: "Sepatu lari" },
  itemDetails: [{ itemId: "SKU-1", name: "Sepatu Lari", amount: 150000, qty: 1 }],
  customerDetails: { email: "siti@example.id", fullName: "Siti Rahayu", phone: "081234567890", ipAddress: "203.0.113.7" },
  billingAddress: {
    fullName: "Siti Rahayu",
    phone: "081234567890",
    address: "Jl. Sudirman 1",
    city: "Jakarta",
    postalCode: "10220",
    country: "ID",
  },
  shippingAddress: {
    fullName: "Siti Rahayu",
    phone: "081234567890",
    address: "Jl. Sudirman 1",
    city: "Jakarta",
    postalCode: "10220",
    country: "ID",
  },
  returnUrl: "https://shop.example/return",
};

export function paymentPage(answer: Json<CardCharge["responses"][200]>): string {
  if ("statusCode" in answer) {
    return answer.data.link;
  }
  return "link" in answer.data ? answer.data.link : answer.data.html;
}

// Requests with only their required fields.
export const walletPayment: Json<paths["/ewallet/v2/create-payment"]["post"]["requestBody"]> = {
  external_id: "EXT-1004",
  order_id: "ORDER-1004",
  currency: "IDR",
  payment_method: "wallet",
  payment_channel: "DANA",
  payment_details: { amount: 100000, transaction_description: "Order at Toko Maju" },
  customer_details: { email: "siti@example.id", full_name: "Siti Rahayu", phone: "081234567890" },
  item_details: [{ item_id: "SKU-1", name: "Kopi", amount: 100000, qty: 1 }],
};
export const accessToken: Json<paths["/auth/merchants/v1.0/access-token/b2b"]["post"]["requestBody"]> = {
  grantType: "client_credentials",
};
export const bnplCheckout: Json<paths["/v1.0/bnpl/qr-checkout"]["post"]["requestBody"]> = {
  partnerReferenceNo: "ORDER-1005",
  paymentDetails: { amount: { value: "100000.00", currency: "IDR" } },
  itemDetails: [
    {
      itemId: "SKU-1",
      name: "Kopi",
      amount: { value: "100000.00", currency: "IDR" },
      category: "1001",
      qty: 1,
    },
  ],
  customerDetails: { firstName: "Siti", email: "siti@example.id", phone: "081234567890" },
  callbackUrl: "https://shop.example/bnpl",
};

// Virtual accounts: the answers' `data` and the callback are typed, field by field.
type Va = paths["/va"]["post"];
export const vaCreate: Json<Va["requestBody"]> = {
  external_id: "EXT-1006",
  order_id: "ORDER-1006",
  currency: "IDR",
  payment_method: "bank_transfer",
  payment_channel: "BCA",
  payment_details: { billing_name: "Toko Maju", transaction_description: "Order at Toko Maju", amount: 100000 },
  customer_details: { email: "siti@example.id", full_name: "Siti Rahayu" },
};
export function vaNumber(answer: Json<Va["responses"][200]>): string {
  const paid: number = answer.data.payment_details.total_paid_amount;
  const last: string | undefined = answer.data.payment_history[0]?.reference_id;
  return `${answer.data.payment_channel} ${answer.data.payment_details.va_number} ${paid} ${last ?? ""}`;
}
export function vaPaymentReference(
  answer: Json<paths["/va/dummy-payment"]["post"]["responses"][200]>,
): string {
  return answer.data.reference_id;
}
type VaNotification = webhooks["vaNotification"]["post"];
export function vaPaid(callback: Json<VaNotification["requestBody"]>): number {
  return callback.transaction_status === "PAID" ? callback.payment_details.total_amount : 0;
}

// Payment links: the create request with its required fields, the answers' `data` and the payment-page
// callback of a link, typed field by field (Villanesia reads payment_url, transaction_id, expired_time).
type Link = paths["/payment-page/payment"]["post"];
export const linkCreate: Json<Link["requestBody"]> = {
  external_id: "EXT-1007",
  order_id: "ORDER-1007",
  amount: 150000,
  description: "Order at Toko Maju",
  customer_details: { full_name: "Siti Rahayu", email: "siti@example.id", address: "Jl. Sudirman 1" },
  selected_channels: [{ channel: "CARD" }, { channel: "DANA" }, { channel: "VA", acq: "BCA" }],
};
export function linkToPay(answer: Json<Link["responses"][200]>): string {
  return `${answer.data.transaction_id} ${answer.data.payment_url} ${answer.data.expired_time}`;
}
export function linkPaidBy(
  answer: Json<paths["/payment-page/payment/{transaction_id}"]["get"]["responses"][200]>,
): string {
  const channels: string = answer.data.selected_channels.map((entry) => entry.channel).join(",");
  return `${answer.data.transaction_status} ${answer.data.payment_method} ${answer.data.acq} ${channels}`;
}
type PaymentPageNotification = webhooks["paymentPageNotification"]["post"];
export function linkCallback(callback: Json<PaymentPageNotification["requestBody"]>): string {
  const version: number | undefined = callback.mis_version;
  return `${callback.payment_method} ${callback.payment_channel} ${callback.sub_merchant_id ?? ""} ${version ?? ""}`;
}
