"""The CEL environment of DRA device selectors: compile once, evaluate anywhere.

celpy's interpreter plus the ``cel.bind(var, init, body)`` macro Kubernetes
enables, the function library of `modelplane_common.cel.library`, and the
static checks of `modelplane_common.cel.check` and the cost limit of
`modelplane_common.cel.cost` (a worst-case estimate refused at compile time,
a step budget for every evaluation). `compile_selector` is the only way in;
programs are cached by expression.
"""

from __future__ import annotations

from contextlib import suppress
from functools import lru_cache
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.evaluation import CELEvalError, Evaluator

from modelplane_common.cel.check import check, ident_name, is_cel_bind, is_empty_list_literal
from modelplane_common.cel.cost import MAX_COST, Budget, estimate, value_steps
from modelplane_common.cel.errors import SelectorError
from modelplane_common.cel.library import FUNCTIONS

# Kubernetes caps a DRA CEL selector at 10 Ki characters (the XRD does too).
MAX_EXPRESSION_LENGTH = 10 * 1024
_COMPILE_CACHE_SIZE = 1024


class _Evaluator(Evaluator):
    """celpy's interpreter plus the ``cel.bind(var, init, body)`` macro Kubernetes enables,
    cel-go's ``x in []``: false without evaluating ``x`` (so even an error is false), and a
    step budget (`cost.Budget`) shared by every sub-evaluator of one evaluation."""

    def __init__(self, ast: lark.Tree, activation: Any, budget: Budget) -> None:
        super().__init__(ast, activation=activation)
        self.budget = budget

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation, budget=self.budget)

    def _visit_tree(self, tree: lark.Tree) -> Any:
        # Every node of every evaluation passes here (lark's Interpreter): the one place
        # where steps are counted, so a runaway evaluation stops wherever it loops. The
        # body is lark's own rather than a call to it, so that counting adds no stack
        # frame per level (celpy's nesting depth is bounded by the recursion limit).
        self.budget.spend(1)
        method = getattr(self, tree.data)
        wrapper = getattr(method, "visit_wrapper", None)
        if wrapper is not None:
            value = wrapper(method, tree.data, tree.children, tree.meta)
        else:
            value = method(tree)
        self.budget.spend(value_steps(tree, value))
        return value

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
        evaluator = _Evaluator(self.ast, activation=self.new_activation(), budget=Budget(MAX_COST))
        return evaluator.evaluate(context)


ENV = celpy.Environment(runner_class=_Runner)


@lru_cache(maxsize=_COMPILE_CACHE_SIZE)
def compile_selector(expression: str) -> celpy.Runner:
    """Compile one selector expression into a reusable program (cached by expression).

    Raises :class:`SelectorError` when the expression does not parse, is too long,
    references a function, variable or ``device`` field that does not exist, or may
    cost more than the limit (`cost.estimate` over `cost.MAX_COST`).
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
    try:
        worst = estimate(ast)
    except RecursionError:
        raise SelectorError(expression, "nested too deeply") from None
    if worst > MAX_COST:
        raise SelectorError(
            expression,
            f"estimated cost {worst} exceeds the limit of {MAX_COST} steps "
            "(comprehensions nested over large collections)",
        )
    return ENV.program(ast, functions=FUNCTIONS)


def measured_steps(expression: str, context: dict[str, Any]) -> int:
    """The steps one evaluation of a selector spends in `context`, without a limit
    (how the cost limit's figures are measured, and how tests hold the estimate to them)."""
    program = compile_selector(expression)
    assert isinstance(program, _Runner)
    evaluator = _Evaluator(program.ast, activation=program.new_activation(), budget=Budget(2**62))
    with suppress(CELEvalError):  # an error value still spent its steps
        evaluator.evaluate(context)
    return evaluator.budget.spent
