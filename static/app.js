// Copy buttons: <button data-copy="value">. No inline script anywhere (CSP).
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
    var label = button.textContent, aria = button.getAttribute("aria-label");
    button.textContent = "Copied";
    button.setAttribute("aria-label", "Copied");
    setTimeout(function () { button.textContent = label; button.setAttribute("aria-label", aria); }, 1200);
  });
});
