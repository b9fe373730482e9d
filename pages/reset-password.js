// The reset-password page: sends the new password with the link's token to POST /api/auth/reset-password (the
// same call an application's own form makes). It builds no markup from data: only text is set.
const form = document.getElementById("reset");
const password = document.getElementById("password");
const confirm = document.getElementById("confirm");
const error = document.getElementById("error");
const submit = document.getElementById("submit");
const token = new URLSearchParams(location.search).get("token") ?? "";

function fail(message, field) {
  error.textContent = message;
  error.hidden = false;
  for (const input of [password, confirm]) input.removeAttribute("aria-invalid");
  if (field) {
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  if (password.value === "") return fail("Enter a new password.", password);
  if (password.value !== confirm.value) return fail("The two passwords are not the same.", confirm);
  submit.disabled = true;
  try {
    const answer = await fetch("../api/auth/reset-password", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      credentials: "omit",
      body: JSON.stringify({ token, newPassword: password.value }),
    });
    if (answer.ok) {
      form.hidden = true;
      document.getElementById("done").hidden = false;
      document.getElementById("title").textContent = "Password changed";
      document.getElementById("title").focus();
      return;
    }
    const body = await answer.json().catch(() => ({}));
    if (body.code === "INVALID_TOKEN") {
      fail("This link is no longer valid (it was used already, or it expired). Ask for a new one.");
    } else {
      fail(body.message ?? `The server answered ${answer.status}.`, password);
    }
  } catch {
    fail("The server could not be reached. Try again.");
  } finally {
    submit.disabled = false;
  }
});
