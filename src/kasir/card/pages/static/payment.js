// The payment page's behaviour: a file, not inline (the pages' Content-Security-Policy allows no inline script).
(function () {
  "use strict";
  var form = document.getElementById("pay-form");
  var number = document.getElementById("card-number");
  var month = document.getElementById("exp-month");
  var year = document.getElementById("exp-year");
  var cvn = document.getElementById("cvn");
  var holder = document.getElementById("holder-name");
  var button = document.getElementById("pay");
  var touched = {};

  function digits(value) { return value.replace(/\s+/g, ""); }
  function luhn(d) {
    var sum = 0;
    for (var i = 0; i < d.length; i++) {
      var n = d.charCodeAt(d.length - 1 - i) - 48;
      if (i % 2 === 1) { n *= 2; if (n > 9) { n -= 9; } }
      sum += n;
    }
    return sum % 10 === 0;
  }
  function checkNumber() {
    var d = digits(number.value);
    if (!/^[0-9]{13,19}$/.test(d)) { return "must be 13 to 19 digits"; }
    if (!luhn(d)) { return "is not a valid card number (check digit)"; }
    return "";
  }
  function checkMonth() { return /^(0?[1-9]|1[0-2])$/.test(month.value.trim()) ? "" : "must be a month, 01 to 12"; }
  function checkYear() {
    var y = year.value.trim();
    if (!/^([0-9]{2}|[0-9]{4})$/.test(y)) { return "must be a year as YY or YYYY"; }
    if (checkMonth() !== "") { return ""; }
    var full = y.length === 2 ? 2000 + parseInt(y, 10) : parseInt(y, 10);
    var now = new Date();
    var m = parseInt(month.value.trim(), 10);
    if (full < now.getFullYear() || (full === now.getFullYear() && m < now.getMonth() + 1)) {
      return "the card has expired (expiry is in the past)";
    }
    return "";
  }
  function checkCvn() { return /^[0-9]{3,4}$/.test(cvn.value.trim()) ? "" : "must be 3 or 4 digits"; }
  function checkHolder() { return holder.value.trim() ? "" : "is required"; }
  var checks = [
    [number, checkNumber, "card-number-error"], [month, checkMonth, "exp-month-error"],
    [year, checkYear, "exp-year-error"], [cvn, checkCvn, "cvn-error"], [holder, checkHolder, "holder-name-error"]
  ];
  // The last attempt's decline (or the server's refusal) above the form: stale once the customer is told
  // what is wrong with what they type now, so it goes when a new field error shows.
  var banner = document.getElementById("message");
  function clearBanner() {
    if (banner !== null) { banner.parentNode.removeChild(banner); banner = null; }
  }
  function show(entry, force) {
    var input = entry[0], message = entry[1]();
    if (!force && !touched[input.id]) { return message === ""; }
    if (message !== "") { clearBanner(); }
    document.getElementById(entry[2]).textContent = message;
    input.classList.toggle("invalid", message !== "");
    input.setAttribute("aria-invalid", message !== "" ? "true" : "false");
    return message === "";
  }
  checks.forEach(function (entry) {
    entry[0].addEventListener("input", function () {
      if (entry[0] === number) {  // group digits in fours as the customer types
        var d = digits(number.value).replace(/[^0-9]/g, "").slice(0, 19);
        number.value = d.replace(/(.{4})/g, "$1 ").trim();
      }
      if (entry[0] === holder) { holder.value = holder.value.toUpperCase(); }
      touched[entry[0].id] = touched[entry[0].id] || entry[0].value.length > 0;
      show(entry, false);
      if (entry[0] === month) { show(checks[2], false); }
    });
    entry[0].addEventListener("blur", function () { touched[entry[0].id] = true; show(entry, false); });
  });
  var installment = document.getElementById("installment");
  document.querySelectorAll("input[name=tenor]").forEach(function (radio) {
    radio.addEventListener("change", function () {
      var months = radio.getAttribute("data-months");
      installment.textContent = months === "0"
        ? "Full payment: " + radio.getAttribute("data-monthly")
        : months + " × " + radio.getAttribute("data-monthly") + " per month (0% interest)";
    });
  });
  form.addEventListener("submit", function (event) {
    var ok = true;
    checks.forEach(function (entry) { ok = show(entry, true) && ok; });
    if (!ok || form.getAttribute("data-submitted") === "true") { event.preventDefault(); return; }
    form.setAttribute("data-submitted", "true");
    button.disabled = true;  // one submission per attempt (the server refuses a second one too)
    button.textContent = "Processing…";
  });
})();
