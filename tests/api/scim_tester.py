"""scim2-tester (PyPI), the RFC 7643/7644 compliance checker, against a running server (tests/api/scim.rs starts it).

    python3 tests/api/scim_tester.py BASE_URL TOKEN

BASE_URL is the SCIM root (…/api/auth/scim/v2), TOKEN an organization's SCIM token with every scope. Every check
is printed, one line each; the exit code is 1 when any check ends in ERROR or CRITICAL (a MUST of the RFCs broken),
2 when the tester itself could not run, 0 otherwise. DEVIATION (a SHOULD not followed) is printed and allowed.
"""

import sys

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

FAILING = {Status.ERROR, Status.CRITICAL}


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    base, token = sys.argv[1].rstrip("/") + "/", sys.argv[2]
    http = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    client = SyncSCIMClient(http)
    results = check_server(client)
    if not results:
        print("scim2-tester ran no check", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.name] = counts.get(r.status.name, 0) + 1
        where = f" [{r.resource_type}]" if getattr(r, "resource_type", None) else ""
        reason = f": {r.reason}" if r.reason else ""
        print(f"{r.status.name:<10} {r.title}{where}{reason}")
    failed = sum(counts.get(s.name, 0) for s in FAILING)
    print("scim2-tester: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
