"""The CEL environment of DRA device selectors: compile once, evaluate anywhere.

celpy's interpreter plus the ``cel.bind(var, init, body)`` macro Kubernetes
enables, the function library of `modelplane_common.cel.library`, and the
static checks of `modelplane_common.cel.check`. `compile_selector` is the
only way in; programs are cached by expression.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.evaluation import CELEvalError, Evaluator

from modelplane_common.cel.check import check, ident_name, is_cel_bind, is_empty_list_literal
from modelplane_common.cel.errors import SelectorError
from modelplane_common.cel.library import FUNCTIONS

# Kubernetes caps a DRA CEL selector at 10 Ki characters (the XRD does too).
MAX_EXPRESSION_LENGTH = 10 * 1024
_COMPILE_CACHE_SIZE = 1024


class _Evaluator(Evaluator):
    """celpy's interpreter plus the ``cel.bind(var, init, body)`` macro Kubernetes enables,
    and cel-go's ``x in []``: false without evaluating ``x`` (so even an error is false)."""

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def relation(self, tree: lark.Tree) -> Any:
        if (
            len(tree.children) == 2
            and getattr(tree.children[0], "data", None) == "relation_in"
            and is_empty_list_literal(tree.children[1])
        ):
            return ct.BoolType(False)
        return super().relation(tree)

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        if not is_cel_bind(tree):
            return super().member_dot_arg(tree)
        var_tree, init_tree, body_tree = tree.children[2].children
        var = ident_name(var_tree)
        assert var is not None, "check() refuses a cel.bind without an identifier"
        init = self.visit(init_tree)
        if isinstance(init, CELEvalError):
            return init
        try:
            return self.sub_evaluator(body_tree).evaluate({var: init})
        except CELEvalError as error:
            return error


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


ENV = celpy.Environment(runner_class=_Runner)


@lru_cache(maxsize=_COMPILE_CACHE_SIZE)
def compile_selector(expression: str) -> celpy.Runner:
    """Compile one selector expression into a reusable program (cached by expression).

    Raises :class:`SelectorError` when the expression does not parse, is too long, or
    references a function, variable or ``device`` field that does not exist.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise SelectorError(str(expression), "the expression is empty")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(expression, f"longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        ast = ENV.compile(expression)
    except celpy.CELParseError as error:
        raise SelectorError(expression, "does not parse: " + " ".join(str(error).split())) from None
    except RecursionError:
        raise SelectorError(expression, "nested too deeply") from None
    check(expression, ast)
    return ENV.program(ast, functions=FUNCTIONS)
