"""Checks a Prometheus text exposition (format 0.0.4) read on standard input as `promtool check metrics` does, without
the Prometheus server package promtool comes in: prometheus-client's parser (tests/requirements.txt, in .venv), plus
the rules its parser leaves out and promtool's linter (promlint) applies. Prints one line per problem and exits 1 if
there is any; prints nothing and exits 0 otherwise. Run by tests/api/metrics.rs."""

import re
import sys

from prometheus_client.parser import text_string_to_metric_families

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# promlint's lists: units to be given in their base unit, abbreviations to be written out, type names.
NON_BASE_UNITS = ["minutes", "hours", "days", "weeks", "milliseconds", "microseconds", "nanoseconds",
                  "kilobytes", "megabytes", "gigabytes", "terabytes", "petabytes", "celsius", "fahrenheit",
                  "percent", "kilometers", "miles", "feet", "inches", "millimeters", "centimeters"]
ABBREVIATIONS = ["s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"]
TYPES = ["counter", "gauge", "histogram", "summary", "untyped"]


def camel(name):
    return re.search(r"[a-z][A-Z]", name) is not None


def check(text):
    problems = []
    say = problems.append
    # What the Go parser refuses and prometheus-client's accepts: a family described twice (its HELP or TYPE
    # repeated, or its samples split by another family's), a TYPE after the family's first sample, a sample
    # without HELP and TYPE before it.
    described = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name = line.split(" ", 3)[1:3]
            if not NAME.match(name):
                say(f"line {number}: invalid metric name {name!r}")
            seen = described.setdefault(name, {"lines": set(), "sampled": False})
            if kind in seen["lines"] or (current != name and seen["lines"]):
                say(f"line {number}: second {kind} line for metric name {name}")
            if kind == "TYPE" and seen["sampled"]:
                say(f"line {number}: TYPE for {name} after its samples")
            seen["lines"].add(kind)
            if kind == "TYPE":
                seen["type"] = line.split(" ", 3)[3].strip() if line.count(" ") >= 3 else ""
            current = name
        elif line.startswith("#") or not line.strip():
            continue
        else:
            family = current if current is not None else ""
            sample_name = re.split(r"[{ \t]", line, maxsplit=1)[0]
            if family not in described or not sample_name.startswith(family):
                say(f"line {number}: sample {sample_name} outside its family's HELP and TYPE")
            else:
                described[family]["sampled"] = True
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser's own refusals: a bad label, value, escape, name
        return problems + [f"text format parsing error: {e!r}"]

    for exposed, seen in described.items():
        if "HELP" not in seen["lines"]:
            say(f"{exposed}: no help text")
        if seen.get("type") not in ("counter", "gauge", "histogram", "summary"):
            say(f"{exposed}: no TYPE, or not one of counter, gauge, histogram, summary")
    for family in families:
        kind = family.type
        # The parser takes `_total` off a counter's name, and adds it to samples that lack it: the name exposed is
        # the sample's.
        exposed = family.samples[0].name if kind == "counter" and family.samples else family.name
        if kind == "counter":
            declared = [n for n in described if n in (family.name, family.name + "_total")]
            exposed = declared[0] if declared else exposed
        if camel(exposed):
            say(f"{exposed}: metric names should be written in 'snake_case' not 'camelCase'")
        if ":" in exposed:
            say(f"{exposed}: metric names should not contain ':'")
        words = exposed.split("_")
        for unit in NON_BASE_UNITS:
            if unit in words:
                say(f"{exposed}: use base unit instead of {unit!r}")
        for abbreviation in ABBREVIATIONS:
            if abbreviation in words:
                say(f"{exposed}: metric names should not contain abbreviated units ({abbreviation!r})")
        for type_name in TYPES:
            if type_name in words:
                say(f"{exposed}: metric name should not include type {type_name!r}")
        if kind == "counter" and not exposed.endswith("_total"):
            say(f"{exposed}: counter metrics should have '_total' suffix")
        if kind != "counter" and exposed.endswith("_total"):
            say(f"{exposed}: non-counter metrics should not have '_total' suffix")
        if kind not in ("histogram", "summary") and re.search(r"_(count|sum|bucket)$", exposed):
            say(f"{exposed}: non-histogram and non-summary metrics should not have '_count', '_sum' or '_bucket' suffix")
        series = set()
        for sample in family.samples:
            for label in sample.labels:
                if not LABEL.match(label) or label.startswith("__"):
                    say(f"{sample.name}: invalid label name {label!r}")
                if camel(label):
                    say(f"{sample.name}: label names should be written in 'snake_case' not 'camelCase'")
            if "le" in sample.labels and kind != "histogram":
                say(f"{exposed}: non-histogram metrics should not have 'le' label")
            if "quantile" in sample.labels and kind != "summary":
                say(f"{exposed}: non-summary metrics should not have 'quantile' label")
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if key in series:
                say(f"{sample.name}{dict(key[1])}: a series exposed twice")
            series.add(key)
        if kind == "histogram":
            check_histogram(family, say)
    return problems


def check_histogram(family, say):
    """Each series of a histogram: buckets with a valid `le`, cumulative, ending in +Inf, and +Inf equal to _count."""
    buckets, counts = {}, {}
    for sample in family.samples:
        rest = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
        if sample.name.endswith("_bucket"):
            if "le" not in sample.labels:
                say(f"{sample.name}: a bucket without 'le'")
                continue
            try:
                bound = float(sample.labels["le"])
            except ValueError:
                say(f"{sample.name}: 'le' is not a number: {sample.labels['le']!r}")
                continue
            buckets.setdefault(rest, []).append((bound, sample.value))
        elif sample.name.endswith("_count"):
            counts[rest] = sample.value
    for rest, series in buckets.items():
        series.sort()
        values = [v for _, v in series]
        if values != sorted(values):
            say(f"{family.name}{dict(rest)}: buckets are not cumulative")
        if series[-1][0] != float("inf"):
            say(f"{family.name}{dict(rest)}: no +Inf bucket")
        elif rest in counts and counts[rest] != series[-1][1]:
            say(f"{family.name}{dict(rest)}: the +Inf bucket is not the _count")


if __name__ == "__main__":
    found = check(sys.stdin.read())
    for problem in found:
        print(problem)
    sys.exit(1 if found else 0)
