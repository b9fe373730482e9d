// The first-run setup page: sends the first administrator's name, e-mail and password with the setup link's token
// to POST /api/admin/setup. It builds no markup from data: only text is set.
const form = document.getElementById("setup");
const fields = ["name", "email", "password", "confirm"].map((id) => document.getElementById(id));
const [name, email, password, confirm] = fields;
const error = document.getElementById("error");
const submit = document.getElementById("submit");
const token = new URLSearchParams(location.search).get("token") ?? "";

function fail(message, field) {
  error.textContent = message;
  error.hidden = false;
  for (const input of fields) input.removeAttribute("aria-invalid");
  if (field) {
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  if (name.value.trim() === "") return fail("Enter your name.", name);
  if (!email.value.includes("@")) return fail("Enter an e-mail address.", email);
  if (password.value === "") return fail("Enter a password.", password);
  if (password.value !== confirm.value) return fail("The two passwords are not the same.", confirm);
  submit.disabled = true;
  try {
    const answer = await fetch("../api/admin/setup", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      credentials: "omit",
      body: JSON.stringify({ token, name: name.value, email: email.value, password: password.value }),
    });
    const body = await answer.json().catch(() => ({}));
    if (answer.ok) {
      form.hidden = true;
      document.getElementById("intro").hidden = true;
      document.getElementById("created").textContent = body.user?.email ?? email.value;
      document.getElementById("done").hidden = false;
      document.getElementById("title").textContent = "Administrator created";
      document.getElementById("title").focus();
      return;
    }
    fail(body.error ?? `The server answered ${answer.status}.`);
  } catch {
    fail("The server could not be reached. Try again.");
  } finally {
    submit.disabled = false;
  }
});
