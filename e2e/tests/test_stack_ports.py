"""The e2e stack refuses to start when a port it cannot choose is taken (stack.FIXED_PORTS)."""

from __future__ import annotations

import pytest
from modelplane_e2e import stack


@pytest.mark.parametrize(
    ("taken", "named"),
    [
        pytest.param({8080}, ["8080 (provider-kubernetes's metrics)"], id="metrics port taken"),
        pytest.param({9443}, ["9443 (provider-kubernetes's webhooks)"], id="webhook port taken"),
        pytest.param(
            {8080, 9443},
            ["8080 (provider-kubernetes's metrics)", "9443 (provider-kubernetes's webhooks)"],
            id="both taken: both named",
        ),
    ],
)
def test_a_taken_fixed_port_fails_at_once_naming_it(monkeypatch, taken, named):
    # Who listens is asked of the stack's own probe: no test binds a real 8080 or 9443.
    monkeypatch.setattr(stack, "listening", lambda port, host="127.0.0.1": port in taken)
    with pytest.raises(RuntimeError) as refused:
        stack.check_ports_free()
    assert str(refused.value) == (
        f"port(s) {', '.join(named)} taken: the stack binds them and cannot choose others "
        "(another run, or another program on this host?)"
    )


def test_free_fixed_ports_let_the_stack_start(monkeypatch):
    asked: list[int] = []
    monkeypatch.setattr(stack, "listening", lambda port, host="127.0.0.1": asked.append(port))
    stack.check_ports_free()
    assert sorted(asked) == [8080, 9443]
