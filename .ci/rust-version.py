#!/usr/bin/env python3
"""Checks that Cargo.toml's rust-version is true: equal to the highest rust-version among the locked dependencies
built for Linux (no older toolchain can build them, and ours needs nothing newer). No toolchain download needed."""
import json
import subprocess
import sys

meta = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", "x86_64-unknown-linux-gnu"]))
root = meta["resolve"]["root"]
built = {node["id"] for node in meta["resolve"]["nodes"]}
packages = {p["id"]: p for p in meta["packages"]}


def version(text):
    parts = [int(x) for x in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


ours = packages[root].get("rust_version")
if not ours:
    sys.exit("Cargo.toml has no rust-version")
needed = max(
    (version(p["rust_version"]), p["name"], p["version"])
    for pid, p in packages.items()
    if pid in built and pid != root and p.get("rust_version")
)
if version(ours) != needed[0]:
    sys.exit(f"rust-version = {ours} in Cargo.toml, but the locked dependencies need "
             f"{'.'.join(map(str, needed[0]))} ({needed[1]} {needed[2]}): make them equal")
print(f"rust-version {ours} is what the locked dependencies need ({needed[1]} {needed[2]})")
