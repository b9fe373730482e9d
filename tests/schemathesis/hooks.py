"""Keeps schemathesis from turning the run's own administrator against itself.

Schemathesis learns values from answers (the administrator's id from list-users, its session's id from
list-user-sessions) and feeds them back into later requests. Banning yourself is a 400 no schema can express, and
setting your own password, ending your own sessions or demoting yourself ends the session the run depends on; those
cases are dropped here. tests/api covers each of them.
"""

import os

import schemathesis

ADMIN_ID = os.environ.get("ADMIN_ID", "")
ADMIN_SESSION = os.environ.get("ADMIN_SESSION_ID", "")
ADMIN_TOKEN = os.environ.get("ADMIN_TOKEN", "")


@schemathesis.hook
def filter_case(ctx, case):
    body = case.body if isinstance(case.body, dict) else {}
    query = case.query if isinstance(case.query, dict) else {}
    values = set(map(str, body.values())) | set(map(str, query.values()))
    return not (values & {ADMIN_ID, ADMIN_SESSION, ADMIN_TOKEN} - {""})
