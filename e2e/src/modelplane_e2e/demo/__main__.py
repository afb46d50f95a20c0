"""`python -m modelplane_e2e.demo up|down|smoke` (`make demo`, `make demo-down`,
`make demo-smoke`'s test calls `session.smoke`)."""

from __future__ import annotations

import argparse
import sys

from modelplane_e2e.demo import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modelplane_e2e.demo")
    parser.add_argument("command", choices=["up", "down", "smoke"])
    command = parser.parse_args(argv).command
    if command == "up":
        return session.up()
    if command == "down":
        return session.down()
    session.smoke(session.new_run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
