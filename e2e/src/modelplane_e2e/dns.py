"""A DNS server on 127.0.0.1 answering A queries for a fixed set of names: a headless Service.

Crossplane's Deployment runtime puts a function behind a headless Service and
points the FunctionRevision's `status.endpoint` at `dns:///<service>.<namespace>:9443`;
cluster DNS answers that name with one A record per ready pod, and Crossplane's
gRPC client, configured for `round_robin`, sends each call to the next pod
(design/scheduler.md, "Control-plane cost and Crossplane's message limits").
The e2e has no cluster DNS, so the harness runs this instead: a UDP server
that answers each name it was given with its addresses (127.0.0.x, one per
function process), AAAA and TXT (the gRPC resolver asks for
`_grpc_config.<name>`) with no records, and any other name with NXDOMAIN.
The endpoint names it as the resolver's authority,
`dns://127.0.0.1:<port>/<name>:<grpc port>`, which grpc-go's DNS resolver
dials instead of the system's resolver. Every query is logged, one line each.

    python -m modelplane_e2e.dns --port 5353 --record name=127.0.0.1,127.0.0.2
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Mapping, Sequence

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

TTL = 5


def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 nobody has bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answer(query: dns.message.Message, records: Mapping[dns.name.Name, Sequence[str]]) -> bytes:
    """The response to one query: A records of a known name, nothing else."""
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA
    (question,) = query.question
    addresses = records.get(question.name)
    if addresses is None:
        response.set_rcode(dns.rcode.NXDOMAIN)
    elif question.rdtype == dns.rdatatype.A:
        response.answer.append(
            dns.rrset.from_text_list(question.name, TTL, dns.rdataclass.IN, "A", list(addresses))
        )
    return response.to_wire()


def serve(port: int, records: Mapping[dns.name.Name, Sequence[str]]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", port))
        print(f"answering on 127.0.0.1:{port} for {sorted(map(str, records))}", flush=True)
        while True:
            wire, peer = s.recvfrom(4096)
            try:
                query = dns.message.from_wire(wire)
                reply = answer(query, records)
            except (dns.exception.DNSException, ValueError) as err:
                print(f"{peer}: unreadable query: {err}", flush=True)
                continue
            (question,) = query.question
            kind = dns.rdatatype.to_text(question.rdtype)
            print(f"{peer[0]}:{peer[1]} {kind} {question.name}", flush=True)
            s.sendto(reply, peer)


def resolves(port: int, name: str) -> list[str]:
    """The A records the server on `port` answers for `name` (a readiness probe)."""
    reply = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1", port=port, timeout=1)
    return [item.address for rrset in reply.answer for item in rrset]


def _record(text: str) -> tuple[dns.name.Name, list[str]]:
    name, _, addresses = text.partition("=")
    return dns.name.from_text(name), addresses.split(",")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", action="append", default=[], help="NAME=IP[,IP...]")
    args = parser.parse_args(argv)
    serve(args.port, dict(_record(r) for r in args.record))


if __name__ == "__main__":
    main(sys.argv[1:])
