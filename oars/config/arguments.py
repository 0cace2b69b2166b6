"""Which keyword arguments a registered class accepts, found by introspection.

A class whose ``**kwargs`` only go to ``super().__init__`` is followed up its MRO (read from its
source with ``ast``), so typos in base-class arguments are caught; anything less certain is treated
as "accepts anything" so the check never rejects a valid config.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _param_names(fn: Any, drop_first: bool) -> tuple[list[str], str | None]:
    """Keyword-passable parameter names of ``fn`` and the name of its ``**kwargs`` (or None)."""
    params = list(inspect.signature(fn).parameters.values())
    if drop_first and params:
        params = params[1:]
    var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    return [p.name for p in params if p.kind in _KEYWORD_KINDS], var_kw


def _is_super_init(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")


def _forwards_only_to_super(init: Any, var_kw: str) -> bool:
    """True when ``**var_kw`` is used only as ``super().__init__(..., **var_kw)`` (the mmseg head pattern)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return False
    func = tree.body[0] if tree.body else None
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    nodes = [n for stmt in func.body for n in ast.walk(stmt)]
    uses = sum(isinstance(n, ast.Name) and n.id == var_kw for n in nodes)
    forwarded = sum(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == var_kw
                    for n in nodes if isinstance(n, ast.Call) and _is_super_init(n.func) for k in n.keywords)
    return forwarded > 0 and forwarded == uses


def _rejects_unknown_kwargs(klass: type) -> bool:
    """``object`` and ``torch.nn.Module`` take ``**kwargs`` in their signature but reject any given."""
    return klass is object or (klass.__module__ == "torch.nn.modules.module" and klass.__name__ == "Module")


def accepted_arguments(obj: Any) -> list[str] | None:
    """The keyword arguments ``obj(**cfg)`` accepts; ``None`` when it takes any or cannot be inspected.

    A class whose ``**kwargs`` only go to ``super().__init__`` accepts its own arguments plus those of
    the next ``__init__`` in its MRO, so a typo in a head's base-class argument is still caught.
    """
    try:
        names, var_kw = _param_names(obj, drop_first=False)
    except (TypeError, ValueError):
        return None
    if var_kw is None:
        return names
    if not inspect.isclass(obj):
        return None
    accepted: list[str] = []
    for klass in obj.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if _rejects_unknown_kwargs(klass):
            return accepted
        try:
            names, var_kw = _param_names(init, drop_first=True)
        except (TypeError, ValueError):
            return None
        accepted.extend(n for n in names if n not in accepted)
        if var_kw is None:
            return accepted
        if not _forwards_only_to_super(init, var_kw):
            return None
    return None
