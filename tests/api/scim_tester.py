"""scim2-tester (PyPI), the RFC 7643/7644 compliance checker, against a running server (tests/api/scim.rs starts it).

    python3 tests/api/scim_tester.py BASE_URL TOKEN

BASE_URL is the SCIM root (…/api/auth/scim/v2), TOKEN an organization's SCIM token with every scope. Every check
is printed, one line each; the exit code is 1 when any check ends in ERROR or CRITICAL (a MUST of the RFCs broken),
2 when the tester itself could not run, 0 otherwise. DEVIATION (a SHOULD not followed) is printed and allowed.
"""

import secrets
import sys

import httpx2
import scim2_tester.checkers.patch_add
import scim2_tester.checkers.patch_replace
import scim2_tester.filling
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

FAILING = {Status.ERROR, Status.CRITICAL}

# The tester fills every string with a uuid4, the password and the e-mail address alike. About one run in forty, a
# four-digit run of the address's local part (8-4-4-4-12 hex digits) turns up inside the password, and the server
# refuses it as a context word (NIST SP 800-63B-4; docs/guides/operations.md), rightly: a 400 the tester counts as an
# ERROR. The password alone is drawn from the whole URL-safe alphabet instead, so that the run shows what the
# server does with the tester's requests, not whether two uuids happened to share four digits.
_generate = scim2_tester.filling.generate_random_value


def _generate_password_apart(context, path, mutability=None, required=None):
    value = _generate(context, path, mutability, required)
    if isinstance(value, str) and str(path).rsplit(".", 1)[-1] == "password":
        value = "scim-" + secrets.token_urlsafe(24)
    return value


for module in (scim2_tester.filling, scim2_tester.checkers.patch_add, scim2_tester.checkers.patch_replace):
    module.generate_random_value = _generate_password_apart


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
