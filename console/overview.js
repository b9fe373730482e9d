// The overview, the console's first page: what is happening (sign-ins, failures, sign-ups, lock-outs and password
// resets over the last 24 hours and 30 days, from GET /api/admin/stats) and the state of the service (active
// sessions, accounts created this week, the outbox, the newest backup, from it and GET /api/admin/status), the
// webhooks' health (endpoints failing, deliveries queued, from GET /api/admin/webhooks) and the administrators
// without a second factor.
//
// The charts are SVG drawn here (no library): bars of one counter each, coloured from console.css (so the dark
// scheme applies), hidden from screen readers, which read the same numbers in the table beside each chart.

import { api, h, show, when } from "./app.js";

const SVG = "http://www.w3.org/2000/svg";

/// The counters in the order the API lists them, with their names in words.
const LABELS = {
  sign_ins: "Sign-ins",
  failed_sign_ins: "Failed sign-ins",
  sign_ups: "Sign-ups",
  lockouts: "Lock-outs",
  password_resets: "Password resets",
};

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  el.append(...children);
  return el;
}

const hourFormat = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", timeZone: "UTC" });
const dayFormat = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", timeZone: "UTC" });

/// The two periods the overview shows: their buckets' field in the answer and how a bucket is named.
const PERIODS = [
  { key: "hourly", id: "hours", title: "Last 24 hours", unit: "Hour (UTC)", name: (d) => hourFormat.format(d), span: "in the last 24 hours" },
  { key: "daily", id: "days", title: "Last 30 days", unit: "Day (UTC)", name: (d) => dayFormat.format(d), span: "in the last 30 days" },
];

const WIDTH = 240;
const HEIGHT = 72;

/// One counter over one period: a figure with its caption (total and peak), the bars, and the numbers as a table.
function chart(period, counter, index, buckets) {
  const values = buckets.map((b) => b[counter]);
  const total = values.reduce((a, b) => a + b, 0);
  const peak = Math.max(0, ...values);
  const id = `chart-${period.id}-${counter}`;
  const gap = buckets.length > 24 ? 1 : 2;
  const width = WIDTH / buckets.length;
  const bars = buckets.map((b, i) => {
    const v = b[counter];
    const height = peak ? Math.max(v ? 2 : 0, (v / peak) * (HEIGHT - 4)) : 0;
    return svg("rect", {
      class: "bar", x: (i * width + gap / 2).toFixed(2), y: (HEIGHT - height).toFixed(2),
      width: (width - gap).toFixed(2), height: height.toFixed(2), "data-value": v,
    });
  });
  const picture = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: `chart series-${index + 1}`, "aria-hidden": "true", focusable: "false", preserveAspectRatio: "none" },
    svg("line", { class: "baseline", x1: 0, y1: HEIGHT - 0.5, x2: WIDTH, y2: HEIGHT - 0.5 }), ...bars);
  const first = period.name(new Date(buckets[0].start));
  const last = period.name(new Date(buckets[buckets.length - 1].start));
  const table = h("table", { class: "visually-hidden", id: `${id}-table` },
    h("caption", { text: `${LABELS[counter]} ${period.span}, by ${period.unit.toLowerCase()}` }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: period.unit }), h("th", { scope: "col", text: LABELS[counter] }))),
    h("tbody", {}, buckets.map((b) => h("tr", {}, h("th", { scope: "row", text: period.name(new Date(b.start)) }), h("td", { text: String(b[counter]) })))));
  return h("figure", { class: "chart-card", id },
    h("figcaption", {},
      h("span", { class: "chart-name", text: LABELS[counter] }),
      h("span", { class: "chart-total", text: total.toLocaleString("en") }),
      h("span", { class: "chart-peak", text: peak ? `peak ${peak.toLocaleString("en")}` : "none" })),
    picture,
    h("div", { class: "chart-axis", "aria-hidden": "true" }, h("span", { text: first }), h("span", { text: last })),
    table);
}

/// The webhooks in a few words, and the failing endpoints by name (each a link to its page).
function webhookHealth(webhooks) {
  const enabled = webhooks.filter((w) => w.enabled);
  const failing = enabled.filter((w) => w.failing);
  const queued = webhooks.reduce((sum, w) => sum + w.queued, 0);
  const summary = !webhooks.length ? "No endpoint"
    : `${enabled.length} endpoint${enabled.length === 1 ? "" : "s"} on, ${failing.length ? `${failing.length} failing` : "none failing"}; ` +
      `${queued.toLocaleString("en")} deliver${queued === 1 ? "y" : "ies"} queued`;
  const list = failing.length
    ? h("ul", { id: "failing-webhooks" }, failing.map((w) => h("li", {},
      h("a", { href: `#/webhooks/${encodeURIComponent(w.id)}`, text: w.url }), ` failing since ${when(w.failing_since)}, ${w.queued.toLocaleString("en")} queued`)))
    : null;
  return { summary, list, failing: failing.length };
}

export async function overviewPage() {
  const [stats, status, { webhooks }] = await Promise.all([api("GET", "/api/admin/stats"), api("GET", "/api/admin/status"),
    api("GET", "/api/admin/webhooks")]);
  const hooks = webhookHealth(webhooks);
  const unprotected = status.administrators_without_second_factor;
  const outbox = stats.outbox === null ? "No mail transport configured"
    : `${stats.outbox.waiting.toLocaleString("en")} waiting (at most ${stats.outbox.max.toLocaleString("en")})`;
  const backup = !status.backups_configured ? "Not configured ([backup] dir in config.toml)"
    : status.last_backup_at ? when(status.last_backup_at) : "None yet";
  const facts = [
    ["Active sessions", status.sessions.toLocaleString("en")],
    ["Accounts created in the last 7 days", stats.accounts_created_7d.toLocaleString("en")],
    ["Users", status.users.toLocaleString("en")],
    ["Outbox", outbox],
    ["Webhooks", hooks.summary],
    ["Administrators without a second factor", unprotected === 0 ? "None" : unprotected.toLocaleString("en")],
    ["Newest backup", backup],
  ];
  const sections = PERIODS.map((period) => h("section", { "aria-labelledby": `${period.id}-heading`, class: "charts", id: `charts-${period.id}` },
    h("h2", { id: `${period.id}-heading`, text: period.title }),
    h("div", { class: "chart-grid" }, stats.counters.map((counter, i) => chart(period, counter, i, stats[period.key])))));
  // What needs an administrator's attention, with where to act: failing webhook endpoints, and administrators who
  // sign in with a password alone.
  const attention = [];
  if (hooks.failing) attention.push(h("p", { text: "Failing webhook endpoints (a message has waited longer than the failing limit; still retried):" }), hooks.list);
  if (unprotected) {
    const required = status.second_factor_required_for.includes("admin");
    attention.push(h("p", { id: "admins-without-factor" },
      `${unprotected} administrator${unprotected === 1 ? "" : "s"} sign${unprotected === 1 ? "s" : ""} in with a password alone. `,
      h("a", { href: "#/users?role=admin", text: "See who, in the users list" }),
      "; each sets one up on ", h("a", { id: "enrol-link", href: "/account/", text: "their account page" }),
      " (an authenticator app or a passkey)",
      required ? "." : "; to require a second factor, set [two_factor] required_for_roles = [\"admin\"]."));
  }
  show("Overview",
    h("dl", { id: "overview-facts", class: "facts" }, facts.flatMap(([k, v]) => [h("div", {}, h("dt", { text: k }), h("dd", { text: v }))])),
    ...(attention.length ? [h("section", { "aria-labelledby": "attention-heading", id: "attention" },
      h("h2", { id: "attention-heading", text: "Needs attention" }), ...attention)] : []),
    h("div", { class: "periods" }, sections),
    h("p", { class: "note", text: `Counted by every node and written every ${stats.flush_interval_secs} seconds; the charts' hours and days are UTC's (the server counts by them); every other time is this browser's, with UTC on hover.` }));
}
