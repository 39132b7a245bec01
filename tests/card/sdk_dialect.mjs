// The provider's Node SDK (IFORTEPAY/ifp-node, pg/card) against Kasir: its card requests (the three charges,
// and the inquiry of its branch feature/cc-inquiry) with
// the headers and bodies the SDK sends, and the answers read as the SDK reads them. Node's own
// fetch and crypto, no npm package. Run by tests/card/test_sdk_dialect_node.py:
//
//     node tests/card/sdk_dialect.mjs '{"baseUrl": ..., "merchantId": ..., "secretUnboundId": ..., "hashKey": ...,
//                                       "callbackUrl": ..., "year": "2029"}'
//
// Prints one JSON line of what the SDK returned for each call; exits 1 when a check fails.

import { createHash } from "node:crypto";
import assert from "node:assert/strict";

const config = JSON.parse(process.argv[2]);

// The SDK's request headers: Basic base64(merchantId:secretUnboundId), x-req-signature =
// sha256(hashKey + externalId + orderId) in lowercase hex, x-version v3; sub-merchant-id and
// response-type only when set.
function headers(externalId, orderId, { subMerchantId, responseType } = {}) {
  const auth = Buffer.from(`${config.merchantId}:${config.secretUnboundId}`).toString("base64");
  const result = {
    "Content-Type": "application/json",
    Authorization: `Basic ${auth}`,
    "x-req-signature": createHash("sha256").update(config.hashKey + externalId + orderId).digest("hex"),
    "x-version": "v3",
  };
  if (subMerchantId) result["sub-merchant-id"] = subMerchantId;
  if (responseType) result["response-type"] = responseType;
  return result;
}

const unique = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

// The SDK's body: its keys in its order; an undefined callback_url is dropped by JSON.stringify.
function body({ externalId, orderId, cardDetails, paymentMode = "CLOSE", tenor, storeToken }) {
  const result = {
    external_id: externalId,
    order_id: orderId,
    currency: "IDR",
    payment_method: "CARD",
    payment_channel: "BCAPG",
    payment_mode: paymentMode,
    callback_url: config.callbackUrl,
    return_url: "https://shop.example/return",
    card_details: cardDetails,
    payment_details: { amount: 150000, transaction_description: "Sepatu lari" },
    customer_details: {
      full_name: "Siti Rahayu",
      phone: "081234567890",
      email: "siti@example.id",
      ip_address: "10.10.10.100",
    },
    item_details: [
      { item_id: "SKU-1", name: "Sepatu Lari", amount: 50000, qty: 2 },
      { item_id: "shippingfee", name: "Ongkos kirim", amount: 50000, qty: 1, description: "JNE" },
    ],
    billing_address: { address: "Jl. Sudirman 1", city: "Jakarta", postal_code: "10220", country: "ID" },
  };
  if (tenor) result.payment_options = { tenor };
  result.store_token = storeToken === undefined ? true : storeToken;
  return result;
}

const card = (number, cvn) => {
  const details = {
    card_holder_name: "Siti Rahayu",
    card_number: number,
    card_expired_month: "12",
    card_expired_year: config.year,
  };
  if (cvn !== undefined) details.card_cvn = cvn;
  return details;
};

// The SDK's client: POST, and on an HTTP error the error response's body, as axios gives it.
async function post(path, payload, requestHeaders) {
  try {
    const response = await fetch(config.baseUrl + path, {
      method: "POST",
      headers: requestHeaders,
      body: JSON.stringify(payload),
    });
    return await response.json();
  } catch (error) {
    return { response_code: "98", response_message: "SystemError", error: error.message };
  }
}

// The SDK's answers: responseCode/responseMessage from response_code/response_message, then the data
// it copies for each call (truthy fields only), or `error`.
function built(client) {
  const response = { responseCode: client.response_code, responseMessage: client.response_message };
  if (client.error) response.error = client.error;
  return response;
}

function readCharge(client) {
  const response = built(client);
  if (client.error || !client.data) return response;
  const data = {};
  if (client.data.html) data.html = client.data.html;
  if (client.data.link) data.link = client.data.link;
  response.data = data;
  return response;
}

function readChargeDirect(client) {
  const response = built(client);
  if (client.error || !client.data) return response;
  const source = client.data;
  const data = {};
  if (source.token) data.token = source.token;
  if (source.status) data.status = source.status;
  if (source.transaction_code) data.transactionCode = source.transaction_code;
  if (source.transaction_description) data.transactionDescription = source.transaction_description;
  const tx = source.transaction_data || {};
  const transactionData = {};
  if (tx.external_id) transactionData.externalId = tx.external_id;
  if (tx.receipt_no) transactionData.receiptNo = tx.receipt_no;
  if (tx.order_id) transactionData.orderId = tx.order_id;
  if (tx.transaction_id) transactionData.transactionId = tx.transaction_id;
  if (tx.approval_code) transactionData.approvalCode = tx.approval_code;
  data.transactionData = transactionData;
  response.data = data;
  return response;
}

async function charge(options = {}) {
  const externalId = unique("EXT");
  const orderId = unique("ORD");
  const payload = body({ externalId, orderId, cardDetails: card(options.number ?? "4811111111111114", "123") });
  const sent = headers(externalId, orderId, options);
  return readCharge(await post("/card-v2/v1/charge", payload, sent));
}

async function chargeDirect(path, { cardDetails, paymentMode, tenor, signWith } = {}) {
  const externalId = unique("EXT");
  const orderId = unique("ORD");
  const payload = body({ externalId, orderId, cardDetails, paymentMode, tenor });
  const sent = headers(externalId, orderId);
  if (signWith) {
    sent["x-req-signature"] = createHash("sha256").update(signWith + externalId + orderId).digest("hex");
  }
  const answer = readChargeDirect(await post(path, payload, sent));
  return { ...answer, externalId, orderId };
}

const results = {};

// 1. charge (3-D Secure): data.html by default, data.link with response-type url.
results.chargeHtml = await charge();
assert.equal(results.chargeHtml.responseCode, "00");
assert.match(results.chargeHtml.data.html, /<form [^>]*action="http/);
results.chargeLink = await charge({ responseType: "url", number: "4000000000003220" });
assert.equal(results.chargeLink.responseCode, "00");
assert.match(results.chargeLink.data.link, /\/card\/pages\/CARD[0-9A-Z]+\/3ds$/);

// 2. chargeDirect: the outcome, a token; a declined card is 00 and FAILED.
results.chargeDirect = await chargeDirect("/card-v2/v1/charge-direct", {
  cardDetails: card("4811111111111114", "123"),
  paymentMode: "INSTALLMENT",
  tenor: 3,
});
assert.equal(results.chargeDirect.responseCode, "00");
assert.equal(results.chargeDirect.data.status, "SUCCESS");
assert.equal(results.chargeDirect.data.transactionCode, "00");
assert.equal(results.chargeDirect.data.transactionData.externalId, results.chargeDirect.externalId);
assert.match(results.chargeDirect.data.transactionData.approvalCode, /^[0-9]{6}$/);
assert.ok(results.chargeDirect.data.token);
results.declined = await chargeDirect("/card-v2/v1/charge-direct", { cardDetails: card("4000000000000002", "123") });
assert.equal(results.declined.responseCode, "00");
assert.equal(results.declined.data.status, "FAILED");
assert.equal(results.declined.data.transactionCode, "05");

// 3. chargeDirectV2: the stored card by its token, without a CVN.
results.chargeDirectV2 = await chargeDirect("/card-v2/v2/charge-direct", {
  cardDetails: { token: results.chargeDirect.data.token },
});
assert.equal(results.chargeDirectV2.responseCode, "00");
assert.equal(results.chargeDirectV2.data.status, "SUCCESS");
assert.equal(results.chargeDirectV2.data.token, results.chargeDirect.data.token);

// 4. inquiry (branch feature/cc-inquiry): the body {external_id, order_id, transaction_id}, the charges' headers
// (never sub-merchant-id), and the answer copied to camelCase as its getInquiry does.
function readInquiry(client) {
  const response = built(client);
  if (client.error || !client.data) return response;
  const d = client.data;
  const data = {
    approvalCode: d.approval_code, merchantId: d.merchant_id, misVersion: d.mis_version,
    transactionId: d.transaction_id, externalId: d.external_id, orderId: d.order_id, receiptNo: d.receipt_no,
    responseCode: d.response_code, paymentChannel: d.payment_channel, transactionStatus: d.transaction_status,
    hostResponseCode: d.host_response_code, message: d.message, installmentTenor: d.installment_tenor,
    paymentMode: d.payment_mode,
  };
  if (d.payment_details) {
    const p = d.payment_details;
    data.paymentDetails = {
      amount: p.amount, expiredTime: p.expired_time, feeAmount: p.fee_amount, paidTime: p.paid_time,
      totalAmount: p.total_amount, totalPaidAmount: p.total_paid_amount,
    };
  }
  if (d.card_details) {
    const c = d.card_details;
    data.cardDetails = { cardHolderName: c.card_holder_name, cardNumber: c.card_number, token: c.token, cardBrand: c.card_brand };
  }
  response.data = data;
  return response;
}

async function inquiry(externalId, orderId, transactionId) {
  const payload = { external_id: externalId, order_id: orderId, transaction_id: transactionId };
  return readInquiry(await post("/card-v2/inquiry", payload, headers(externalId, orderId)));
}

const paid = results.chargeDirect;
results.inquiry = await inquiry(paid.externalId, paid.orderId, paid.data.transactionData.transactionId);
assert.equal(results.inquiry.responseCode, "00");
assert.equal(results.inquiry.data.transactionStatus, "PAID");
assert.equal(results.inquiry.data.approvalCode, paid.data.transactionData.approvalCode);
assert.equal(results.inquiry.data.receiptNo, paid.data.transactionData.receiptNo);
assert.equal(results.inquiry.data.cardDetails.cardNumber, "481111******1114");
assert.equal(results.inquiry.data.cardDetails.token, paid.data.token);
assert.equal(results.inquiry.data.paymentDetails.totalPaidAmount, 150000);
assert.equal(typeof results.inquiry.data.paymentDetails.paidTime, "number");
assert.equal(results.inquiry.data.installmentTenor, 3);
results.inquiryUnknown = await inquiry(paid.externalId, paid.orderId, "CARD00000000000000000000");
assert.equal(results.inquiryUnknown.responseCode, "02");
assert.equal(results.inquiryUnknown.data, undefined);

// A wrong hash key: the SDK's failure, responseCode 04 and a message.
results.wrongSignature = await chargeDirect("/card-v2/v1/charge-direct", {
  cardDetails: card("4811111111111114", "123"),
  signWith: "not-the-hash-key",
});
assert.equal(results.wrongSignature.responseCode, "04");
assert.ok(results.wrongSignature.responseMessage);

console.log(JSON.stringify(results));
