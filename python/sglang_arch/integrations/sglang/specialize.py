"""The functions a settled target binds (``routing.settle``): SGLang's own, or SGLang's body
with one module global answered by a per-process constant.

A per-call target whose answer depends on the machine alone is decided once per process
(its hook's ``specialize``).  Where the registry answers as SGLang's own code does on this
machine, the name SGLang calls is a copy of SGLang's function (the same code, globals,
defaults and closure: the same cost, and a new object that carries the routing mark).
Where it differs, the name is SGLang's function with one global it reads renamed:

    use_hopper_bf16_gemv: ``if _is_sm12x(): ...``  ->  ``if _sglang_arch_..._is_sm12x(): ...``

The copy's code object names ``_sglang_arch_<function>_<probe>`` where SGLang's names the
probe; that name is set in SGLang's module to the registry's constant.  The copy keeps the
module's own globals dict, so every other global it reads, assigns, or that changes later
is the module's (a copy of the dict, or a dict subclass answering the probe, would miss
later changes or make every global read slower).  Renamed only where every use of the name
in the function (its nested code too) is a global read: an attribute or an import of the
same name would change with it, so such a function keeps the hook.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any, Callable, Optional, Tuple

from .glue import KEEP, Answers, Constants  # noqa: F401  (KEEP: the hook stays)

_GLOBAL_READS = {"LOAD_GLOBAL"}


def copy_function(fn: Any, code: Optional[types.CodeType] = None) -> Optional[types.FunctionType]:
    """A new function object of ``fn``'s code (or ``code``) over ``fn``'s own globals, defaults,
    closure and attributes; None where ``fn`` is not a Python function."""
    if not isinstance(fn, types.FunctionType):
        return None
    new = types.FunctionType(code or fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__annotations__ = dict(getattr(fn, "__annotations__", {}) or {})
    new.__dict__.update(fn.__dict__)
    return new


def _only_global_reads(code: types.CodeType, name: str) -> bool:
    for instruction in dis.get_instructions(code):
        if instruction.argval == name and instruction.opname not in _GLOBAL_READS and instruction.opcode in dis.hasname:
            return False
    return all(_only_global_reads(const, name) for const in code.co_consts if isinstance(const, types.CodeType))


def _renamed(code: types.CodeType, name: str, new_name: str) -> types.CodeType:
    names = tuple(new_name if n == name else n for n in code.co_names)
    consts = tuple(_renamed(c, name, new_name) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_names=names, co_consts=consts)


def global_name(fn: Any, name: str) -> str:
    """The module global a specialized ``fn`` reads in place of ``name``."""
    return "_sglang_arch_" + fn.__qualname__.replace(".", "_").replace("<", "_").replace(">", "_") + "_" + name


def reads_global(fn: Any, name: str) -> bool:
    """Whether ``fn`` reads ``name`` as a global and uses it in no other way."""
    if not isinstance(fn, types.FunctionType):
        return False
    return _uses(fn.__code__, name) and _only_global_reads(fn.__code__, name)


def _uses(code: types.CodeType, name: str) -> bool:
    return name in code.co_names or any(_uses(c, name) for c in code.co_consts if isinstance(c, types.CodeType))


def with_global(fn: Any, name: str, value: Any) -> Optional[types.FunctionType]:
    """``fn`` whose global ``name`` reads ``value`` (set in its module as
    :func:`global_name`); None where ``fn`` does not only read ``name`` as a global."""
    if not reads_global(fn, name):
        return None
    new_name = global_name(fn, name)
    fn.__globals__[new_name] = value
    return copy_function(fn, _renamed(fn.__code__, name, new_name))


_ATTRIBUTE_READS = {"LOAD_ATTR", "LOAD_METHOD"}


def _reads_only_as(code: types.CodeType, chain: Tuple[str, ...], name: str) -> bool:
    """Whether every use of ``name`` in ``code`` (its nested code too) is the attribute read
    ``<chain[0]>.<chain[1]>...<name>`` with ``chain[0]`` a global, and ``name`` is no string
    constant (a ``getattr(..., "name")`` would miss the rename)."""
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opcode not in dis.hasname or instruction.argval != name:
            continue
        before = instructions[max(0, i - len(chain)):i]
        if (instruction.opname not in _ATTRIBUTE_READS or len(before) != len(chain)
                or before[0].opname != "LOAD_GLOBAL" or before[0].argval != chain[0]
                or any(b.opname not in _ATTRIBUTE_READS or b.argval != a for b, a in zip(before[1:], chain[1:]))
                # one straight line: no jump lands inside it (``(x or torch).cuda...`` does)
                or any(b.is_jump_target for b in before[1:] + [instruction])):
            return False
    if _in_constants(code.co_consts, name):
        return False
    return all(_reads_only_as(c, chain, name) for c in code.co_consts if isinstance(c, types.CodeType))


def _in_constants(consts: Any, name: str) -> bool:
    """Whether ``name`` is a string constant, in a tuple or frozenset constant too."""
    return any(c == name if isinstance(c, str) else
               isinstance(c, (tuple, frozenset)) and _in_constants(c, name) for c in consts)


def with_attribute(fn: Any, chain: Tuple[str, ...], name: str, owner: Any, new_name: str,
                   value: Any) -> Optional[types.FunctionType]:
    """``fn`` whose reads of ``<chain>.<name>`` (e.g. ``torch.cuda.get_device_capability``)
    read ``<chain>.<new_name>``, set on ``owner`` (the object ``<chain>`` names) to ``value``;
    None where ``fn`` reads ``name`` in any other way.  Every other attribute of the chain
    is read as SGLang's body reads it: no view of the module, no per-call cost."""
    if not isinstance(fn, types.FunctionType) or not _uses(fn.__code__, name):
        return None
    if not _reads_only_as(fn.__code__, chain, name):
        return None
    setattr(owner, new_name, value)
    return copy_function(fn, _renamed(fn.__code__, name, new_name))


def constant_probe(value: Any, cached: bool = True) -> Callable:
    """A probe answering ``value`` whatever it is asked: ``lru_cache``d (a C-level call on a hit,
    as SGLang's own cached probes; their arguments are hashable) or a plain function."""
    def probe(*args: Any, **kwargs: Any) -> Any:
        return value

    return functools.lru_cache(maxsize=None)(probe) if cached else probe


class PlatformFacts:
    """SGLang's platform with some facts answered by constants: each fact a plain attribute,
    every other attribute read anew from the module's ``get_platform()``."""

    def __init__(self, module: Any, facts: dict) -> None:
        self.__dict__.update(facts)
        self.__dict__["_module"] = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_module"].get_platform(), name)


_NOT_PLAIN = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _parameters(code: types.CodeType) -> Optional[str]:
    """``code``'s parameter list as source (names and kinds, no defaults), read from the code
    object itself (not ``inspect.signature``, which follows ``__wrapped__`` and
    ``__signature__`` to another function's parameters); None where a name could shadow
    the answer."""
    names, flags = code.co_varnames, code.co_flags
    positional = list(names[:code.co_argcount])
    keyword = list(names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    rest = code.co_argcount + code.co_kwonlyargcount
    star = names[rest] if flags & inspect.CO_VARARGS else None
    stars = names[rest + (1 if star else 0)] if flags & inspect.CO_VARKEYWORDS else None
    every = positional + keyword + [n for n in (star, stars) if n]
    if any(n.startswith("_sglang_arch_") for n in every):
        return None
    parts = positional[:]
    if code.co_posonlyargcount:
        parts.insert(code.co_posonlyargcount, "/")
    if star or keyword:
        parts.append(f"*{star}" if star else "*")
    parts += keyword
    if stars:
        parts.append(f"**{stars}")
    return ", ".join(parts)


def answering(fn: Any, value: Any) -> Optional[types.FunctionType]:
    """A function with ``fn``'s parameters (their kinds and defaults, as its code declares
    them: a call SGLang's function refuses, this one refuses alike), name and attributes that
    answers ``value``; None where ``fn`` is not a plain Python function (a coroutine or
    generator function answers no plain value)."""
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_flags & _NOT_PLAIN:
        return None
    parameters = _parameters(fn.__code__)
    if parameters is None:
        return None
    namespace: dict = {}
    exec(f"def _sglang_arch_answering({parameters}):\n    return _sglang_arch_answer\n",
         {"_sglang_arch_answer": value}, namespace)
    new = namespace["_sglang_arch_answering"]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    new.__name__, new.__qualname__, new.__module__, new.__doc__ = fn.__name__, fn.__qualname__, fn.__module__, fn.__doc__
    new.__annotations__ = dict(getattr(fn, "__annotations__", {}) or {})
    new.__dict__.update(fn.__dict__)
    return new


def from_glue(original: Any, chosen: Any) -> Any:
    """A glue ``specialize``'s answer as the function to bind: ``Constants`` become SGLang's
    function with those globals renamed to them, ``Answers`` a function with its parameters
    answering that value (KEEP where either cannot be)."""
    if isinstance(chosen, Answers):
        found = answering(original, chosen.value)
        return KEEP if found is None else found
    if not isinstance(chosen, Constants):
        return chosen
    fn = original
    for name, value in chosen.items():
        fn = with_global(fn, name, value)
        if fn is None:
            return KEEP
    return fn


def glue_specialize(specialize: Optional[Callable]) -> Optional[Callable]:
    if specialize is None:
        return None

    def settle(original: Any) -> Any:
        return from_glue(original, specialize(original))

    return settle
