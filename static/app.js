// Copy buttons: <button data-copy="value">. No inline script anywhere (CSP).
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    var status = document.getElementById("announce");
    if (status) status.textContent = "Copied to the clipboard";
    setTimeout(function () { button.textContent = label; if (status) status.textContent = ""; }, 1200);
  });
});
