// The otp page's behaviour: a file, not inline (the pages' Content-Security-Policy allows no inline script).
(function () {
  "use strict";
  var form = document.getElementById("otp-form");
  var button = document.getElementById("verify");
  var otp = document.getElementById("otp");
  // After a wrong code the field is marked; typing a new one clears the mark (the message stays until sent).
  otp.addEventListener("input", function () {
    otp.classList.remove("invalid");
    otp.removeAttribute("aria-invalid");
  });
  form.addEventListener("submit", function (event) {
    if (form.getAttribute("data-submitted") === "true") { event.preventDefault(); return; }
    form.setAttribute("data-submitted", "true");
    button.disabled = true;
    button.textContent = "Verifying…";
  });
})();
