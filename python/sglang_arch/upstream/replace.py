"""Replace, don't guard: the edits that delete SGLang's capability checks at a call site.

Each edit finds its code by what it computes (a read of a platform fact, of a
capability-keyed table, of a local bound from one), never by the name of a helper that
comes and goes between releases, and puts one read of the registry in its place:

- ``ReplaceBody``: a function whose whole body is the per-GPU decision becomes
  ``return <glue call>`` (its docstring stays);
- ``ReplaceOperands``: in the condition of a top-level ``if``/``return`` of a function,
  the ``and`` operands that read a platform fact become one glue call;
- ``ReplaceArms``: the ``if``/``elif`` arms whose test reads a platform fact are deleted
  and one branch that asks the glue is inserted after an anchor statement;
- ``ReplaceSpan``: the statements that read a capability-keyed table, and those that
  read the local it was bound to, become the given statements;
- ``AndCondition``: an ``if`` whose test reads an attribute gets ``and <glue call>``;
- ``ReplaceCall``: every call of a probe a function binds to a local (``get_device_sm =
  self._get_device_sm`` ... ``get_device_sm()``, or ``from ... import is_sm100_supported``
  in its body), or of a dotted read (``torch.cuda.get_device_capability``), becomes one glue call, and the binding or the local import, read by
  nothing else, goes (``any_args``: its calls with arguments too, which the glue call drops);
- ``ReplaceFact``: every inline read of one platform fact (``get_platform().is_blackwell``)
  in a function becomes one glue call; with a ``marker``, only the read in the test of the
  one conditional (an ``if`` at any depth, or ``a if c else b``) that holds that string
  literal (a decision written inline in a larger function, such as a model override's arm);
- ``ReplaceName``: every read of one module-level name in a function (a value SGLang bound
  at import from a probe, such as ``_AUTO_BACKEND``), or call of it without arguments (a
  probe the module defines), becomes one glue call;
- ``ReplaceValue``: a module-level value SGLang computes at import from the device and reads
  where no Python runs (a Triton ``constexpr`` read inside ``@triton.jit`` code) gets one
  glue call as its value (``within``: the value is ``tl.constexpr(<expression>)``, and the
  expression is replaced);
- ``Delete``: module-level or class-level definitions (tables, flags, helpers) that no
  code reads any more; a module left without code is removed.

Every edit is checked before anything is written: what it replaces must be there (else
``Mismatch`` with the reason, and the module stays as it is); an edit whose replacement
is already in place reports ``already routed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from .nodes import Mismatch, call_lines, dotted_name, find_function, is_docstring, param_names, replace_function

# The platform facts SGLang's capability checks read (``get_platform().is_sm90`` ...), and
# the helpers that compute them (``is_sm90_supported()`` ...): an expression that reads one
# of them, directly or through a module-level flag bound from one, is a capability check.
FACTS = frozenset({"is_sm90", "is_sm100", "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell",
                   "is_hopper_with_cuda_12_3"})
FACT_HELPERS = frozenset({"is_sm90_supported", "is_sm100_supported", "is_sm100_or_sm110_supported",
                          "is_sm110_supported", "is_sm120_supported", "is_blackwell_supported", "is_blackwell",
                          "is_hopper_with_cuda_12_3"})


class _Labelled:
    """A site named in the report as ``qualname (what)``."""

    @property
    def label(self) -> str:
        return f"{self.qualname} ({self.what})"  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ReplaceBody(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    call: str
    args: Tuple[str, ...]
    reads: Tuple[str, ...]  # names or attributes the body must read (what it computes)
    what: str = "body"



@dataclass(frozen=True)
class ReplaceOperands(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    call: str
    args: Tuple[str, ...]
    what: str = "capability condition"



@dataclass(frozen=True)
class ReplaceArms(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    code: str  # the statements inserted after the anchor, at column 0
    anchor: str  # the inserted code goes after the first top-level ``if`` whose test calls this
    call: str  # the glue function ``code`` calls (to recognise it)
    what: str = "capability branches"



@dataclass(frozen=True)
class ReplaceSpan(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    table: str  # the capability-keyed table the span reads
    code: str  # the statements that replace it, at column 0
    call: str
    what: str = "capability table"



@dataclass(frozen=True)
class AndCondition(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    attribute: str  # the top-level ``if`` whose test reads this attribute
    call: str
    args: Tuple[str, ...]
    what: str = "condition"



@dataclass(frozen=True)
class ReplaceCall(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    name: str  # the local the function calls (a probe bound to it), or a dotted read (torch.cuda....)
    call: str
    args: Tuple[str, ...]
    what: str = "probe call"
    # also calls of ``name`` with arguments (a probe of the device index): the registry
    # answers for the machine, so the arguments the probe took are dropped
    any_args: bool = False


@dataclass(frozen=True)
class ReplaceFact(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    fact: str  # the platform fact read as ``get_platform().<fact>``
    call: str
    args: Tuple[str, ...]
    what: str = "platform fact"
    # a string literal the one conditional whose test is replaced holds (it tells that one
    # from the others reading the fact); None: every read of the fact in the function
    marker: Optional[str] = None


@dataclass(frozen=True)
class ReplaceName(_Labelled):
    qualname: str
    params: Tuple[str, ...]
    name: str  # the module-level name the function reads (bound at import)
    call: str
    args: Tuple[str, ...]
    what: str = "import-time value"


@dataclass(frozen=True)
class ReplaceValue(_Labelled):
    qualname: str  # the module-level name bound at import
    call: str
    args: Tuple[str, ...]
    within: Optional[str] = None  # the value is a call of this (``tl.constexpr``) with the replaced argument
    what: str = "import-time value"
    params: Tuple[str, ...] = ()  # a value has none (the plugin's value target's ``params``)


@dataclass(frozen=True)
class Delete:
    names: Tuple[str, ...]  # module-level names, or ``Class.attr``: must be gone afterwards
    unused: Tuple[str, ...] = ()  # deleted only where present and no longer read (dead after the step)
    what: str = "deleted"

    @property
    def label(self) -> str:
        return f"{', '.join(self.names + self.unused)} ({self.what})"


Edit = Union[ReplaceBody, ReplaceOperands, ReplaceArms, ReplaceSpan, AndCondition, ReplaceCall, ReplaceFact,
             ReplaceName, ReplaceValue, Delete]
EDITS = (ReplaceBody, ReplaceOperands, ReplaceArms, ReplaceSpan, AndCondition, ReplaceCall, ReplaceFact, ReplaceName,
         ReplaceValue, Delete)


def calls_glue(edit: Edit) -> bool:
    return not isinstance(edit, Delete)


# --- reading -----------------------------------------------------------------------------

class _Reads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: Set[str] = set()
        self.attrs: Set[str] = set()
        self.calls: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.attrs.add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        dotted = dotted_name(node.func)
        if dotted:
            self.calls.add(dotted)


def reads(node: cst.CSTNode) -> _Reads:
    collector = _Reads()
    node.visit(collector)
    return collector


def fact_flags(module: cst.Module) -> Set[str]:
    """Module-level names bound from a platform fact (``_is_sm90_supported = ... is_sm90``)."""
    flags: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and reads_fact(small.value, flags):
                        for target in small.targets:
                            if isinstance(target.target, cst.Name) and target.target.value not in flags:
                                flags.add(target.target.value)
                                changed = True
    return flags


def reads_fact(node: cst.CSTNode, flags: Set[str]) -> bool:
    r = reads(node)
    return bool(r.attrs & FACTS or {c.split(".")[-1] for c in r.calls} & FACT_HELPERS or r.names & flags)


def _check_params(fn: cst.FunctionDef, params: Tuple[str, ...]) -> None:
    found = param_names(fn)
    if found != params:
        raise Mismatch(f"parameters are ({', '.join(found)}), expected ({', '.join(params)})")


def _body(fn: cst.FunctionDef) -> List[cst.BaseStatement]:
    if not isinstance(fn.body, cst.IndentedBlock):
        raise Mismatch("its body is on the def line")
    return list(fn.body.body)


def _calls(node: cst.CSTNode, alias: str, call: str) -> bool:
    return f"{alias}.{call}" in reads(node).calls


def _statements(code: str, indent: int) -> List[cst.BaseStatement]:
    """``code`` (column 0) parsed as the statements of a block (``indent``: where they go)."""
    import textwrap

    wrapper = cst.parse_module("def _():\n" + textwrap.indent(code, "    "))
    fn = wrapper.body[0]
    assert isinstance(fn, cst.FunctionDef) and isinstance(fn.body, cst.IndentedBlock)
    return list(fn.body.body)


def _with_body(module: cst.Module, qualname: str, fn: cst.FunctionDef,
               body: Sequence[cst.BaseStatement]) -> cst.Module:
    return replace_function(module, qualname, fn.with_changes(body=fn.body.with_changes(body=list(body))))


def _indent_of(module: cst.Module, qualname: str) -> int:
    return (qualname.count(".") + 1) * len(module.default_indent.expandtabs())


# --- applying ----------------------------------------------------------------------------

def apply(module: cst.Module, edit: Edit, alias: str) -> Tuple[cst.Module, bool]:
    """(the module with ``edit`` made, whether it was already made); Mismatch when it cannot be."""
    if isinstance(edit, Delete):
        return _delete(module, edit)
    if isinstance(edit, ReplaceValue):
        return _replace_value(module, edit, alias)
    fn = find_function(module, edit.qualname)
    _check_params(fn, edit.params)
    if isinstance(edit, ReplaceBody):
        return _replace_body(module, fn, edit, alias)
    if isinstance(edit, ReplaceOperands):
        return _replace_operands(module, fn, edit, alias)
    if isinstance(edit, ReplaceArms):
        return _replace_arms(module, fn, edit, alias)
    if isinstance(edit, ReplaceSpan):
        return _replace_span(module, fn, edit, alias)
    if isinstance(edit, ReplaceCall):
        return _replace_call(module, fn, edit, alias)
    if isinstance(edit, ReplaceFact):
        return _replace_fact(module, fn, edit, alias)
    if isinstance(edit, ReplaceName):
        return _replace_name(module, fn, edit, alias)
    return _and_condition(module, fn, edit, alias)


class _Conditionals(cst.CSTVisitor):
    """The ``if`` statements and ``a if c else b`` expressions whose test reads ``fact`` and
    which hold the string literal ``marker``."""

    def __init__(self, fact: str, marker: Optional[str]) -> None:
        super().__init__()
        self.fact, self.marker, self.found = fact, marker, []

    def _visit(self, node: Union[cst.If, cst.IfExp]) -> None:
        if self.fact in reads(node.test).attrs and (self.marker is None or self.marker in _literals(node)):
            self.found.append(node)

    def visit_If(self, node: cst.If) -> None:
        self._visit(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._visit(node)


def _literals(node: cst.CSTNode) -> Set[str]:
    class _Strings(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.values: Set[str] = set()

        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            value = string.evaluated_value
            if isinstance(value, str):
                self.values.add(value)

    strings = _Strings()
    node.visit(strings)
    return strings.values


class _SwapCalls(cst.CSTTransformer):
    """``name()`` (no arguments; with ``any_args``, any) -> ``call``."""

    def __init__(self, name: str, call: cst.BaseExpression, any_args: bool = False) -> None:
        super().__init__()
        self.name, self.call, self.any_args, self.swapped = name, call, any_args, 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted_name(updated.func) == self.name and (self.any_args or not updated.args):
            self.swapped += 1
            return self.call
        return updated


def _binds(stmt: cst.BaseStatement, name: str) -> bool:
    """``stmt`` is ``name = <expression>`` (one target, one statement)."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1
            and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and stmt.body[0].targets[0].target.value == name)


def _replace_call(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceCall, alias: str):
    body = _body(fn)
    swap = _SwapCalls(edit.name, cst.parse_expression(_glue_call(alias, edit.call, edit.args)), edit.any_args)
    body = [stmt.visit(swap) for stmt in body]
    if not swap.swapped:
        if _calls(cst.Module(body=body), alias, edit.call):
            return module, True
        raise Mismatch(f"it no longer calls {edit.name}() (what the registry replaces)")
    rest = []
    for stmt in body:
        if _binds(stmt, edit.name):
            continue
        kept, _ = _drop_import(stmt, edit.name)  # a local ``from ... import <name>``
        if kept is not None:
            rest.append(kept)
    if edit.name not in reads(cst.Module(body=rest)).names:
        if rest and rest[0] is not body[0]:  # the first statement went: no blank line after the def
            rest[0] = rest[0].with_changes(leading_lines=body[0].leading_lines)
        body = rest
    return _with_body(module, edit.qualname, fn, body), False


class _SwapFact(cst.CSTTransformer):
    """``get_platform().<fact>`` -> ``call`` (only the nodes in ``within``, where given)."""

    def __init__(self, fact: str, call: cst.BaseExpression, within: Optional[Set[int]] = None) -> None:
        super().__init__()
        self.fact, self.call, self.within, self.swapped = fact, call, within, 0

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        value = updated.value
        if (updated.attr.value == self.fact and isinstance(value, cst.Call) and not value.args
                and (dotted_name(value.func) or "").split(".")[-1] == "get_platform"
                and (self.within is None or id(original) in self.within)):
            self.swapped += 1
            return self.call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated


class _SwapName(cst.CSTTransformer):
    """Each read of the name ``name``, or call of it without arguments, -> ``call`` (an
    attribute of that name is not a read of it)."""

    def __init__(self, name: str, call: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.call, self.swapped = name, call, 0

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if updated.value == self.name:
            self.swapped += 1
            return self.call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if isinstance(original.func, cst.Name) and original.func.value == self.name and not original.args:
            return self.call.with_changes(lpar=updated.lpar, rpar=updated.rpar)  # ``<name>()``: the call
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if original.attr.value == self.name:  # ``x.<name>``: put the attribute back
            self.swapped -= 1
            return updated.with_changes(attr=original.attr)
        return updated


def _swap_in_body(module: cst.Module, fn: cst.FunctionDef, edit: Union[ReplaceName, ReplaceFact], alias: str,
                  swap: Union[_SwapName, _SwapFact], missing: str) -> Tuple[cst.Module, bool]:
    """``fn``'s body with ``swap`` applied; already made where nothing was swapped and the
    body calls the edit's glue, else Mismatch(``missing``)."""
    body = [stmt.visit(swap) for stmt in _body(fn)]
    if not swap.swapped:
        if _calls(cst.Module(body=body), alias, edit.call):
            return module, True
        raise Mismatch(missing)
    return _with_body(module, edit.qualname, fn, body), False


def _replace_name(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceName, alias: str):
    if edit.name in param_names(fn):
        raise Mismatch(f"{edit.name} is a parameter of it, not a module-level value")
    swap = _SwapName(edit.name, cst.parse_expression(_glue_call(alias, edit.call, edit.args)))
    return _swap_in_body(module, fn, edit, alias, swap, f"it no longer reads {edit.name} (what the registry replaces)")


def _nodes(node: cst.CSTNode) -> List[cst.CSTNode]:
    out: List[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            out.append(n)
            return True

    node.visit(_All())
    return out


def _marked_test(fn: cst.FunctionDef, fact: str, marker: str) -> cst.BaseExpression:
    """The test of the one innermost conditional of ``fn`` that reads ``fact`` and holds
    the string literal ``marker``; Mismatch where there is none or more than one."""
    finder = _Conditionals(fact, marker)
    fn.visit(finder)
    found = finder.found
    # the innermost: an enclosing conditional holds the marker too only through this one
    found = [n for n in found if not any(o is not n and any(o is m for m in _nodes(n)) for o in found)]
    if len(found) != 1:
        raise Mismatch(f"{len(found)} conditionals of it test .{fact} and hold {marker!r}, expected 1")
    return found[0].test


def _replace_fact(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceFact, alias: str):
    call = cst.parse_expression(_glue_call(alias, edit.call, edit.args))
    within = None
    if edit.marker is not None:
        try:
            within = {id(n) for n in _nodes(_marked_test(fn, edit.fact, edit.marker))}
        except Mismatch:
            if _calls(fn, alias, edit.call):  # made already: its test reads the glue now
                return module, True
            raise
    return _swap_in_body(module, fn, edit, alias, _SwapFact(edit.fact, call, within),
                         f"it no longer reads get_platform().{edit.fact} (what the registry replaces)")


def _reads_device(node: cst.CSTNode) -> bool:
    r = reads(node)
    return bool(r.attrs & (FACTS | {"get_device_capability"}) or {c.split(".")[-1] for c in r.calls} & FACT_HELPERS)


def _replace_value(module: cst.Module, edit: ReplaceValue, alias: str) -> Tuple[cst.Module, bool]:
    hits = [i for i, stmt in enumerate(module.body) if edit.qualname in _assigned(stmt)]
    if len(hits) != 1:
        raise Mismatch(f"{edit.qualname} is {'not bound at module level' if not hits else 'bound more than once'}")
    stmt = module.body[hits[0]]
    if not _binds(stmt, edit.qualname):
        raise Mismatch(f"{edit.qualname} is no longer bound alone ({edit.qualname} = ...)")
    assign = cst.ensure_type(cst.ensure_type(stmt, cst.SimpleStatementLine).body[0], cst.Assign)
    value = assign.value
    if edit.within is not None:
        if not (isinstance(value, cst.Call) and dotted_name(value.func) == edit.within and len(value.args) == 1
                and value.args[0].keyword is None):
            raise Mismatch(f"{edit.qualname} is no longer {edit.within}(<one argument>)")
        inner = value.args[0].value
    else:
        inner = value
    if _calls(inner, alias, edit.call):
        return module, True
    if not _reads_device(inner):
        raise Mismatch(f"{edit.qualname}'s value no longer reads the device (what the registry replaces)")
    call = cst.parse_expression(_glue_call(alias, edit.call, edit.args))
    if edit.within is not None:
        call = value.with_changes(args=[value.args[0].with_changes(value=call)])
    body = list(module.body)
    body[hits[0]] = stmt.with_changes(body=[assign.with_changes(value=call)])
    return module.with_changes(body=body), False


def _glue_call(alias: str, call: str, args: Sequence[str]) -> str:
    return f"{alias}.{call}({', '.join(args)})"


def _replace_body(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceBody, alias: str):
    body = _body(fn)
    head = body[:1] if body and is_docstring(body[0]) else []
    rest = body[len(head):]
    if len(rest) == 1 and _calls(rest[0], alias, edit.call):
        return module, True
    found = reads(cst.Module(body=rest))
    missing = [name for name in edit.reads if name not in found.names | found.attrs]
    if missing:
        raise Mismatch(f"its body no longer reads {', '.join(missing)} (what the registry replaces)")
    indent = _indent_of(module, edit.qualname)
    code = "return " + call_lines("", f"{alias}.{edit.call}", edit.args, indent + 7) + "\n"
    return _with_body(module, edit.qualname, fn, head + _statements(code, indent)), False


def _flatten_and(node: cst.BaseExpression):
    """``a and b and c`` -> ([a, b, c], [and, and]) for an unparenthesized left-nested chain."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        operands, ops = _flatten_and(node.left)
        return operands + [node.right], ops + [node.operator]
    return [node], []


def _and_chain(node: cst.BaseExpression) -> Optional[Tuple[cst.BooleanOperation, list, list]]:
    if not (isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And)):
        return None
    inner = node.with_changes(lpar=[], rpar=[])
    operands, ops = _flatten_and(inner)
    return node, operands, ops


def _rebuild_and(outer: cst.BooleanOperation, operands: list, ops: list) -> cst.BaseExpression:
    expr = operands[0]
    for op, operand in zip(ops, operands[1:]):
        expr = cst.BooleanOperation(left=expr, operator=op, right=operand)
    if isinstance(expr, cst.BooleanOperation):
        return expr.with_changes(lpar=outer.lpar, rpar=outer.rpar)
    return expr


def _replace_operands(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceOperands, alias: str):
    flags = fact_flags(module)
    call = cst.parse_expression(_glue_call(alias, edit.call, edit.args))
    body = _body(fn)
    done = already = False
    for i, stmt in enumerate(body):
        expr, rebuild = _condition_of(stmt)
        chain = _and_chain(expr) if expr is not None else None
        if chain is None:
            continue
        outer, operands, ops = chain
        if any(_calls(o, alias, edit.call) for o in operands):
            already = True
            continue
        hits = [k for k, o in enumerate(operands) if reads_fact(o, flags)]
        if not hits:
            continue
        keep_operands, keep_ops = [], []
        for k, operand in enumerate(operands):
            if k == hits[0]:
                operand = call
            elif k in hits:
                continue
            if keep_operands:
                keep_ops.append(ops[k - 1])
            keep_operands.append(operand)
        body[i] = rebuild(_rebuild_and(outer, keep_operands, keep_ops))
        done = True
    if done:
        return _with_body(module, edit.qualname, fn, body), False
    if already:
        return module, True
    raise Mismatch("no top-level condition of it reads a platform fact (is_sm90, is_sm100, ...) any more")


def _condition_of(stmt: cst.BaseStatement):
    """(the condition of a top-level ``if`` or ``return``, a function putting a new one back)."""
    if isinstance(stmt, cst.If):
        return stmt.test, lambda test: stmt.with_changes(test=test)
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Return)
            and stmt.body[0].value is not None):
        ret = stmt.body[0]
        return ret.value, lambda value: stmt.with_changes(body=[ret.with_changes(value=value)])
    return None, None


class _DropArms(cst.CSTTransformer):
    """Delete the ``if``/``elif`` arms whose test reads a platform fact."""

    def __init__(self, flags: Set[str]) -> None:
        super().__init__()
        self.flags = flags
        self.dropped = 0
        self.elifs: Set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def leave_If(self, original: cst.If, updated: cst.If):
        if id(original) in self.elifs:
            return updated
        arms = []
        node: Union[cst.If, cst.Else, None] = updated
        while isinstance(node, cst.If):
            arms.append(node)
            node = node.orelse
        kept = [arm for arm in arms if not reads_fact(arm.test, self.flags)]
        if len(kept) == len(arms):
            return updated
        if not kept:
            raise Mismatch("every arm of an if/elif chain reads a platform fact; nothing would be left")
        self.dropped += len(arms) - len(kept)
        chain: Union[cst.If, cst.Else, None] = node  # the final else (or None)
        for arm in reversed(kept):
            chain = arm.with_changes(orelse=chain)
        assert isinstance(chain, cst.If)
        return chain.with_changes(leading_lines=updated.leading_lines)


def _replace_arms(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceArms, alias: str):
    body = _body(fn)
    anchors = [i for i, stmt in enumerate(body) if isinstance(stmt, cst.If)
               and any(c.split(".")[-1] == edit.anchor for c in reads(stmt.test).calls)]
    if not anchors:
        raise Mismatch(f"no top-level if that calls {edit.anchor}() (where the registry's branch goes)")
    at = anchors[0] + 1
    inserted = any(_calls(stmt, alias, edit.call) for stmt in body)
    dropper = _DropArms(fact_flags(module))
    new_fn = cst.ensure_type(fn.visit(dropper), cst.FunctionDef)
    if inserted:
        if dropper.dropped:
            raise Mismatch("the registry's branch is there but capability branches are back")
        return module, True
    if not dropper.dropped:
        raise Mismatch("no if/elif arm of it reads a platform fact (is_sm90, is_sm100, ...) any more")
    new_body = list(cst.ensure_type(new_fn.body, cst.IndentedBlock).body)
    new_body[at:at] = _statements(edit.code.format(alias=alias), _indent_of(module, edit.qualname))
    return _with_body(module, edit.qualname, fn, new_body), False


def _replace_span(module: cst.Module, fn: cst.FunctionDef, edit: ReplaceSpan, alias: str):
    body = _body(fn)
    first = [i for i, stmt in enumerate(body) if edit.table in reads(stmt).names]
    if not first:
        if any(_calls(stmt, alias, edit.call) for stmt in body):
            return module, True
        raise Mismatch(f"it no longer reads {edit.table}")
    start = first[0]
    stmt = body[start]
    local = None
    if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign):
        target = stmt.body[0].targets[0].target
        local = target.value if isinstance(target, cst.Name) else None
    if local is None:
        raise Mismatch(f"{edit.table} is not read into a local any more")
    end = max(i for i, s in enumerate(body) if local in reads(s).names or edit.table in reads(s).names)
    new = _statements(edit.code.format(alias=alias), _indent_of(module, edit.qualname))
    new[0] = new[0].with_changes(leading_lines=stmt.leading_lines)
    return _with_body(module, edit.qualname, fn, body[:start] + new + body[end + 1:]), False


def _and_condition(module: cst.Module, fn: cst.FunctionDef, edit: AndCondition, alias: str):
    body = _body(fn)
    hits = [i for i, stmt in enumerate(body) if isinstance(stmt, cst.If) and edit.attribute in reads(stmt.test).attrs]
    if len(hits) != 1:
        raise Mismatch(f"{len(hits)} top-level ifs test .{edit.attribute}, expected 1")
    stmt = cst.ensure_type(body[hits[0]], cst.If)
    if _calls(stmt.test, alias, edit.call):
        return module, True
    call = cst.parse_expression(_glue_call(alias, edit.call, edit.args))
    body[hits[0]] = stmt.with_changes(test=cst.BooleanOperation(left=stmt.test, operator=cst.And(), right=call))
    return _with_body(module, edit.qualname, fn, body), False


def _delete(module: cst.Module, edit: Delete) -> Tuple[cst.Module, bool]:
    module, gone = _delete_names(module, edit.names)
    names_read = _NamesRead()
    if gone:
        left = names_read(module)
        still = [n for n in edit.names if "." not in n and n in left]
        if still:
            raise Mismatch(f"{', '.join(still)} is still read after the edit (the module uses it elsewhere)")
    for name in edit.unused:
        candidate, dropped = _delete_names(module, (name,))
        if dropped and name not in names_read(candidate):
            module, gone = candidate, gone + dropped
    return module, not gone


class _NamesRead:
    """The names a module reads, visiting each top-level statement once: the modules asked
    about here differ by a few deleted statements and share every other statement object."""

    def __init__(self) -> None:
        self._seen: Dict[int, Tuple[cst.CSTNode, Set[str]]] = {}  # the node is kept: its id stays its own

    def __call__(self, module: cst.Module) -> Set[str]:
        names: Set[str] = set()
        for stmt in module.body:
            if id(stmt) not in self._seen:
                self._seen[id(stmt)] = (stmt, reads(stmt).names)
            names |= self._seen[id(stmt)][1]
        return names


def _delete_names(module: cst.Module, names: Sequence[str]) -> Tuple[cst.Module, int]:
    body = list(module.body)
    gone = 0
    for name in names:
        if "." in name:
            cls_name, attr = name.split(".", 1)
            classes = [i for i, s in enumerate(body) if isinstance(s, cst.ClassDef) and s.name.value == cls_name]
            if len(classes) != 1:
                raise Mismatch(f"class {cls_name} is {'missing' if not classes else 'defined more than once'}")
            cls = cst.ensure_type(body[classes[0]], cst.ClassDef)
            inner = list(cst.ensure_type(cls.body, cst.IndentedBlock).body)
            kept = [s for s in inner if attr not in _assigned(s)]
            gone += len(inner) - len(kept)
            body[classes[0]] = cls.with_changes(body=cls.body.with_changes(body=kept))
            continue
        for i, stmt in enumerate(body):  # a value bound in a module-level ``try:`` (an optional import's)
            if isinstance(stmt, cst.Try):
                inner = list(cst.ensure_type(stmt.body, cst.IndentedBlock).body)
                kept_inner = [s for s in inner if name not in _assigned(s)]
                if kept_inner and len(kept_inner) < len(inner):
                    gone += len(inner) - len(kept_inner)
                    body[i] = stmt.with_changes(body=stmt.body.with_changes(body=kept_inner))
        new_body: List[cst.BaseStatement] = []
        carry: List[cst.EmptyLine] = []
        spacing: List[cst.EmptyLine] = []
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == name:
                gone += 1
                continue
            if name in _assigned(stmt):
                gone += 1
                # the next statement keeps the blank lines that separated the deleted one (after a
                # class or function, two): only blank lines, and only where it has fewer
                spacing = [line for line in stmt.leading_lines if line.comment is None]
                continue
            kept, dropped = _drop_import(stmt, name)
            gone += dropped
            if kept is None:  # the next statement keeps the blank line that separated the sections
                carry = [line for line in stmt.leading_lines if line.comment is None]
                continue
            if carry and not kept.leading_lines:
                kept = kept.with_changes(leading_lines=carry)
            if spacing and len(kept.leading_lines) < len(spacing) and all(
                    line.comment is None for line in kept.leading_lines):
                kept = kept.with_changes(leading_lines=spacing)
            carry, spacing = [], []
            new_body.append(kept)
        body = new_body
    return module.with_changes(body=body), gone


def _assigned(stmt: cst.CSTNode) -> Set[str]:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    names = set()
    for small in stmt.body:
        targets = small.targets if isinstance(small, cst.Assign) else (
            [small] if isinstance(small, (cst.AnnAssign,)) else [])
        for t in targets:
            if isinstance(t.target, cst.Name):
                names.add(t.target.value)
    return names


def _drop_import(stmt: cst.BaseStatement, name: str):
    """(``stmt`` without the import of ``name`` or None when nothing is left, how many were dropped)."""
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Import)
            and len(stmt.body[0].names) == 1 and stmt.body[0].names[0].asname is None
            and dotted_name(stmt.body[0].names[0].name) == name):
        return None, 1  # ``import torch``, read by nothing any more
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.ImportFrom) and not isinstance(stmt.body[0].names, cst.ImportStar)):
        return stmt, 0
    imp = stmt.body[0]
    names = list(imp.names)
    kept = [a for a in names if (a.asname.name.value if a.asname else dotted_name(a.name)) != name]
    if len(kept) == len(names):
        return stmt, 0
    if not kept:
        return None, 1
    if kept[-1] is not names[-1]:  # the last went: the new last takes its comma (a trailing one, or none)
        kept[-1] = kept[-1].with_changes(comma=names[-1].comma)
    return stmt.with_changes(body=[imp.with_changes(names=kept)]), 1


def is_empty(module: cst.Module) -> bool:
    """Nothing but a docstring and comments left."""
    return all(is_docstring(s) for s in module.body)
