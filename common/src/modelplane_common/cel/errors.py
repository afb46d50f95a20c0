"""The two errors of CEL matching.

`SelectorError` is what a caller sees: a selector that does not compile, or
fails with a type error. `CelValueError` is raised inside the CEL library
functions (a bad quantity or version string) and is a ValueError, so celpy
turns it into a CEL error value that ``&&``/``||`` may absorb instead of
aborting the evaluation.
"""

from __future__ import annotations


class SelectorError(ValueError):
    """A selector that does not compile, or fails at evaluation with a type error.

    The message names the expression and the cause.
    """

    def __init__(self, expression: str, cause: str) -> None:
        shown = expression if len(expression) <= 200 else expression[:200] + "..."
        super().__init__(f"CEL selector {shown!r}: {cause}")
        self.expression = expression
        self.cause = cause


class CelValueError(ValueError):
    """A CEL library function rejected its argument (bad quantity or version string...).

    A ValueError subclass so that celpy turns it into a CEL error value (which
    ``&&``/``||`` may absorb) instead of aborting the evaluation.
    """
