#!/usr/bin/env python3
"""Draws the charts of benches/curves.sh from its CSV files: `python3 benches/plot.py [DIR]` (docs/bench by default).

Standard library only, SVG written by hand: the charts are redrawn from the CSV files beside them, without a run,
a browser or a plotting package. A CSV that is missing is skipped; a column left empty (the group-commit anchor
before it was measured) draws no line.
"""

import csv
import math
import os
import sys
from xml.sax.saxutils import escape

W, H = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 80, 190, 72, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def read(path):
    """The CSV's comment lines (its provenance) and its rows as dicts of floats (None where empty)."""
    comments, lines = [], []
    with open(path, newline="") as f:
        for line in f:
            (comments if line.startswith("#") else lines).append(line)
    rows = []
    for row in csv.DictReader(lines):
        rows.append({k: (float(v) if v not in ("", None) else None) for k, v in row.items()})
    return [c.lstrip("# ").rstrip() for c in comments], rows


def nice_ticks(lo, hi, count=5):
    """Round tick values covering lo..hi on a linear axis."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=10 * mag)
    start = math.floor(lo / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < hi - step * 1e-9:  # the last tick at or above the highest value
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def wrap(text, width):
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


def label(v):
    if v >= 1_000_000 and v % 1_000_000 == 0:
        return f"{int(v // 1_000_000)}M"
    if v >= 1_000 and v % 1_000 == 0:
        return f"{int(v // 1_000)}k"
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:g}"


def chart(path, title, subtitle, xlabel, ylabel, series, xlog=False, xticks=None, xtick_labels=None, ymin0=True):
    """series: list of (name, [(x, y), ...], colour index, dashed). Writes one SVG line chart."""
    series = [(n, [(x, y) for x, y in pts if x is not None and y is not None], c, dash) for n, pts, c, dash in series]
    series = [s for s in series if s[1]]
    if not series:
        return False
    xs = [x for _, pts, _, _ in series for x, _ in pts]
    ys = [y for _, pts, _, _ in series for _, y in pts]
    fx = (lambda v: math.log10(v)) if xlog else (lambda v: v)
    x0, x1 = fx(min(xs)), fx(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    yticks = nice_ticks(0 if ymin0 else min(ys), max(ys) * 1.05)
    y0, y1 = yticks[0], yticks[-1]
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(v):
        return LEFT + (fx(v) - x0) / (x1 - x0) * pw

    def py(v):
        return TOP + ph - (v - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for k, part in enumerate(wrap(subtitle, 110)[:3]):
        out.append(f'<text x="{LEFT}" y="{34 + 12 * k}" fill="#555" font-size="10">{escape(part)}</text>')
    for t in yticks:
        y = py(t)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label(t))}</text>')
    if xticks is None:
        xticks = sorted(set(xs))
    for i, t in enumerate(xticks):
        x = px(t)
        text = xtick_labels[i] if xtick_labels else label(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{escape(text)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 15}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(
        f'<text x="18" y="{TOP + ph / 2}" text-anchor="middle" transform="rotate(-90 18 {TOP + ph / 2})">'
        f"{escape(ylabel)}</text>"
    )
    for i, (name, pts, c, dashed) in enumerate(series):
        colour = COLOURS[c % len(COLOURS)]
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        dash_attr = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash_attr}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"><title>'
                       f"{escape(name)}: {label(x)} → {y:g}</title></circle>")
        ly = TOP + 10 + i * 20
        out.append(f'<line x1="{LEFT + pw + 12}" x2="{LEFT + pw + 36}" y1="{ly}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{LEFT + pw + 42}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def provenance(notes):
    """The run a CSV came from, in one line: its comment lines without the script's name."""
    return "; ".join(n.replace("benches/curves.sh, ", "") for n in notes)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "docs", "bench")
    drawn = []

    def svg(name):
        drawn.append(name)
        return os.path.join(d, name)

    def col(rows, key):
        return [r[key] for r in rows]

    p = os.path.join(d, "sessions.csv")
    if os.path.exists(p):
        notes, rows = read(p)
        n = col(rows, "sessions")
        chart(svg("sessions-throughput.svg"), "get-session: requests/s against the number of sessions",
              f"each request a random one of N sessions; median of rounds; {provenance(notes)}",
              "sessions in the store (log scale)", "requests/s",
              [("service-auth", list(zip(n, col(rows, "ours_rps"))), 0, False),
               ("bare hyper", list(zip(n, col(rows, "bare_rps"))), 1, False)], xlog=True)
        chart(svg("sessions-latency.svg"), "get-session: p50 and p99 against the number of sessions",
              f"the runs of the throughput chart; {provenance(notes)}", "sessions in the store (log scale)",
              "milliseconds",
              [("service-auth p50", list(zip(n, col(rows, "ours_p50_ms"))), 0, False),
               ("service-auth p99", list(zip(n, col(rows, "ours_p99_ms"))), 0, True),
               ("bare hyper p50", list(zip(n, col(rows, "bare_p50_ms"))), 1, False),
               ("bare hyper p99", list(zip(n, col(rows, "bare_p99_ms"))), 1, True)], xlog=True)
    p = os.path.join(d, "latency.csv")
    if os.path.exists(p):
        notes, rows = read(p)
        # x: the number of nines, so that the tail gets room: percentile p at -log10(1 - p/100); the maximum
        # (100) has no place on that axis.
        rows = [r for r in rows if r["percentile"] < 100]
        nines = [-math.log10(1 - r["percentile"] / 100) for r in rows]
        shown = [50, 90, 99, 99.9, 99.99]
        chart(svg("latency-distribution.svg"), "get-session latency distribution: ours against bare hyper's",
              provenance(notes), "percentile (log scale of 1 - p)", "milliseconds",
              [("service-auth", list(zip(nines, col(rows, "ours_ms"))), 0, False),
               ("bare hyper", list(zip(nines, col(rows, "bare_ms"))), 1, False)],
              xticks=[-math.log10(1 - s / 100) for s in shown], xtick_labels=[f"p{s:g}" for s in shown])
    p = os.path.join(d, "startup.csv")
    if os.path.exists(p):
        notes, rows = read(p)
        n = col(rows, "accounts")
        chart(svg("startup-time.svg"), "Start-up: time to listening against accounts",
              f"N users and N sessions; median of the starts after the first; {provenance(notes)}",
              "accounts (log scale)", "seconds",
              [("listening after", list(zip(n, col(rows, "listening_s"))), 0, False)], xlog=True)
        chart(svg("startup-memory.svg"), "Start-up: memory against accounts",
              f"N users and N sessions; {provenance(notes)}", "accounts (log scale)", "MB",
              [("resident after start", list(zip(n, col(rows, "rss_mb"))), 0, False),
               ("peak while loading", list(zip(n, col(rows, "peak_mb"))), 1, True),
               ("store file on disk", list(zip(n, col(rows, "store_mb"))), 2, False)], xlog=True)
    p = os.path.join(d, "writes.csv")
    if os.path.exists(p):
        notes, rows = read(p)
        c = col(rows, "connections")
        chart(svg("writes.svg"), "Durable writes (update-user): writes/s against connections",
              f"each answer after its fsync; median of rounds; {provenance(notes)}", "connections (log scale)",
              "writes/s",
              [("service-auth update-user", list(zip(c, col(rows, "ours_rps"))), 0, False),
               ("group-commit anchor", list(zip(c, col(rows, "anchor_rps"))), 1, False)], xlog=True)
    print("drew " + ", ".join(os.path.join(d, n) for n in drawn))


if __name__ == "__main__":
    main()
