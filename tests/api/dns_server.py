"""A real DNS server on loopback (dnslib) for the single sign-on domain verification tests (tests/api/sso.rs).

Prints {"port": N} once it listens on 127.0.0.1:N (UDP: the answers here are small), then reads lines of JSON from stdin, each
{"name": "<fqdn>", "txt": ["<value>", ...]} setting the TXT records of that name (an empty list removes them),
and answers each with {"ok": true}. Every other name is NXDOMAIN. Ends when stdin closes.
"""

import json
import sys
import threading

from dnslib import QTYPE, RCODE, RR, TXT
from dnslib.server import BaseResolver, DNSServer

RECORDS = {}
LOCK = threading.Lock()


class Resolver(BaseResolver):
    def resolve(self, request, handler):
        reply = request.reply()
        name = str(request.q.qname).lower()
        with LOCK:
            values = RECORDS.get(name)
        if values is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif request.q.qtype == QTYPE.TXT:
            for value in values:
                reply.add_answer(RR(request.q.qname, QTYPE.TXT, rdata=TXT(value), ttl=60))
        return reply


def main():
    server = DNSServer(Resolver(), address="127.0.0.1", port=0, logger=Quiet())
    server.start_thread()
    print(json.dumps({"port": server.server.server_address[1]}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        change = json.loads(line)
        name = change["name"].lower()
        if not name.endswith("."):
            name += "."
        with LOCK:
            if change["txt"]:
                RECORDS[name] = list(change["txt"])
            else:
                RECORDS.pop(name, None)
        print(json.dumps({"ok": True}), flush=True)


class Quiet:
    def __getattr__(self, _name):
        return lambda *args, **kwargs: None


if __name__ == "__main__":
    main()
