// The console's webhooks page (#/webhooks, #/webhooks/<id>): endpoints, whether they are failing, the delivery log,
// a test message and resending. A client of /api/admin/webhooks like the rest of the console; the secret of a new
// or rotated endpoint is shown once, in the page, and never stored by the script.

import { h, field, messageLine, say, show, when, at, api, act, confirmAction } from "./app.js";

/// The endpoints, and a form to register one.
export async function webhooksPage() {
  const { webhooks, events } = await api("GET", "/api/admin/webhooks");
  const line = messageLine("webhooks-msg");
  const url = h("input", { type: "url", name: "url", required: true, placeholder: "https://app.example.com/hooks/auth" });
  const boxes = events.map((e) => h("input", { type: "checkbox", name: "events", value: e, checked: true }));
  const eventList = h("fieldset", {}, h("legend", { text: "Events" }),
    boxes.map((box) => h("label", { class: "check" }, box, " ", h("code", { text: box.value }))));
  const secret = h("p", { id: "webhook-secret", class: "secret" });
  const create = h("button", { type: "submit", text: "Add endpoint" });
  const form = h("form", { id: "webhook-create", "aria-label": "Add a webhook endpoint" },
    field("URL", url, "https:// (http:// only to this machine)"), eventList, create);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    await act(line, create, async () => {
      const made = await api("POST", "/api/admin/webhooks", { url: url.value, events: chosen });
      secret.textContent = `Signing secret (shown once, copy it now): ${made.secret}`;
      return "Endpoint added.";
    });
  });
  const rows = webhooks.map((w) => h("tr", {},
    h("td", {}, h("a", { href: `#/webhooks/${w.id}`, text: w.url })),
    h("td", { text: w.events.join(", ") }),
    h("td", { text: !w.enabled ? "disabled" : w.failing ? `failing since ${when(w.failing_since)}` : "healthy" }),
    h("td", { text: String(w.queued) })));
  show("Webhooks",
    h("table", { id: "webhooks-table" },
      h("caption", { text: "Endpoints" }),
      h("thead", {}, h("tr", {}, ["URL", "Events", "State", "Queued"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows)),
    h("h2", { text: "Add an endpoint" }), form, line, secret);
}

/// One endpoint: its state, test, rotate, enable or disable, delete, and its delivery log with resending.
export async function webhookPage(id) {
  const [{ webhook: w }, { deliveries }] = await Promise.all([
    api("GET", `/api/admin/webhooks/${id}`),
    api("GET", `/api/admin/webhooks/${id}/deliveries?limit=100`),
  ]);
  const line = messageLine("webhook-msg");
  const secret = h("p", { id: "webhook-secret", class: "secret" });
  const state = !w.enabled ? "Disabled" : w.failing ? `Failing since ${when(w.failing_since)}: a message has waited more than three days; it is still retried` : "Healthy";
  const details = [
    ["URL", w.url], ["Events", w.events.join(", ")], ["State", state], ["Queued", String(w.queued)],
    ["Previous secret signs until", w.previous_secret_expires_at ? when(w.previous_secret_expires_at) : "—"],
    ["Created", when(w.created_at)],
  ];
  const test = h("button", { type: "button", text: "Send a test message" });
  test.addEventListener("click", () => act(line, test, async () => {
    const { message_id } = await api("POST", `/api/admin/webhooks/${id}/test`);
    return `Queued ${message_id}; it shows in the log below once attempted (reload).`;
  }));
  const rotate = h("button", { type: "button", text: "Rotate the secret" });
  rotate.addEventListener("click", async () => {
    const ok = await confirmAction({ title: "Rotate the secret?", text: "A new secret signs from now on; the current one keeps signing beside it for 24 hours.", confirmLabel: "Rotate" });
    if (!ok) return;
    await act(line, rotate, async () => {
      const done = await api("PATCH", `/api/admin/webhooks/${id}`, { rotate_secret: true });
      secret.textContent = `New signing secret (shown once, copy it now): ${done.secret}`;
      return "Secret rotated.";
    });
  });
  const toggle = h("button", { type: "button", text: w.enabled ? "Disable" : "Enable" });
  toggle.addEventListener("click", () => act(line, toggle, async () => {
    await api("PATCH", `/api/admin/webhooks/${id}`, { enabled: !w.enabled });
    location.reload();
  }));
  const remove = h("button", { type: "button", class: "danger", text: "Delete" });
  remove.addEventListener("click", async () => {
    const ok = await confirmAction({ title: "Delete this endpoint?", text: "Its queued messages and its delivery log are deleted with it.", confirmLabel: "Delete" });
    if (!ok) return;
    await act(line, remove, async () => {
      await api("DELETE", `/api/admin/webhooks/${id}`);
      location.hash = "#/webhooks";
    });
  });
  const rows = deliveries.map((d) => {
    const resend = h("button", { type: "button", text: "Resend" });
    resend.addEventListener("click", () => act(line, resend, async () => {
      await api("POST", `/api/admin/webhooks/${id}/resend`, { delivery_id: d.id });
      return `Queued ${d.message_id} again.`;
    }));
    return h("tr", {},
      h("td", {}, at(d.at)),
      h("td", {}, h("code", { text: d.event })),
      h("td", { text: String(d.attempt) }),
      h("td", { text: d.success ? `delivered (${d.status})` : d.status ? `answered ${d.status}` : (d.error ?? "failed") }),
      h("td", { text: `${d.duration_ms} ms` }),
      h("td", {}, resend));
  });
  show(`Webhook ${w.url}`,
    h("dl", { id: "webhook" }, details.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })])),
    h("div", { class: "buttons" }, test, rotate, toggle, remove), line, secret,
    h("table", { id: "deliveries-table" },
      h("caption", { text: "Delivery attempts, newest first" }),
      h("thead", {}, h("tr", {}, ["When", "Event", "Attempt", "Outcome", "Took", ""].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows)),
    h("a", { href: "#/webhooks", text: "All endpoints" }));
}
