// Kasir console: the few behaviours plain HTML lacks. No inline scripts anywhere (the CSP forbids them).
// htmx 2.0.11 (0BSD) is vendored beside this file as htmx.min.js.
(function () {
  "use strict";
  // "Download private.pem": the key is already on the page (shown once); it never goes back to the server.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-download]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-download"));
    var blob = new Blob([source.value], { type: "application/x-pem-file" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = button.getAttribute("data-filename") || "download.txt";
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 0);
  });
  // Buttons marked `danger` ask once more before the form goes, except where a page of its own does the
  // asking (`data-no-ask`: a confirmation page's button, or a button that leads to one).
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    if (button && button.classList.contains("danger") && button.id !== "confirm" && !button.hasAttribute("data-no-ask") && !window.confirm(button.textContent.trim() + "?")) {
      event.preventDefault();
    }
  });
})();
