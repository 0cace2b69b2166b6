"""Which config dict was being built when a class raised, so a wrong value names its key.

A value of the wrong type reaches a constructor and fails with Python's words, far from the config:
``-o model.backbone.base_channels=sixteen`` ends in "not all arguments converted during string
formatting" from ``torch.nn.Conv2d``. mmengine builds every registered class in ``build_from_cfg``,
whose frame holds the dict it was building (``cfg``) and the class (``obj_cls``); the innermost such
frame whose dict is in the config gives the key path, and the class's defaults say which values have
the wrong type.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import Any

from oars.config.registry_map import Path_, _key_text, _typed_nodes

_BUILD_FILE = ("mmengine", "registry", "build_functions.py")


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from, outermost first."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _build_frames(err: BaseException) -> list[FrameType]:
    """The ``build_from_cfg`` frames the error passed through, innermost first."""
    frames: list[FrameType] = []
    for exc in _chain(err):
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_name == "build_from_cfg" and code.co_filename.replace("\\", "/").endswith("/".join(_BUILD_FILE)):
                if tb.tb_frame not in frames:
                    frames.append(tb.tb_frame)
            tb = tb.tb_next
    return frames[::-1]


def _matches(node: Mapping, built: Mapping) -> bool:
    """``node`` (from the config) is the dict ``built`` was made from: same type, and every key it sets is
    there with the same value (builders add defaults, never change what the config says)."""
    return all(k in built and built[k] == v for k, v in node.items() if k != "_scope_")


def _config_path(data: Mapping, built: Mapping) -> Path_ | None:
    for path, node, _ in _typed_nodes(data, (), data.get("default_scope")):
        if node.get("type") == built.get("type") and _matches(node, built):
            return path
    return None


def _type_hints(obj_cls: Any, node: Mapping) -> list[tuple[str, str]]:
    """(argument, hint) for each value whose type differs from the type of the class's default."""
    try:
        params = inspect.signature(obj_cls).parameters
    except (TypeError, ValueError):
        return []
    hints = []
    for name, value in node.items():
        param = params.get(name)
        if param is None or param.default is inspect.Parameter.empty or param.default is None or value is None:
            continue
        default = param.default
        if isinstance(default, bool) or isinstance(value, bool):
            wrong = isinstance(default, bool) != isinstance(value, bool)
            expected = "true or false" if isinstance(default, bool) else f"a {type(default).__name__}"
        elif isinstance(default, (int, float)):
            wrong = not isinstance(value, (int, float)) or (isinstance(default, int) and isinstance(value, float)
                                                            and not value.is_integer())
            expected = "an integer" if isinstance(default, int) else "a number"
        else:
            continue
        if wrong:
            hints.append((name, f"expected {expected} (the default is {default!r}), got {value!r}"))
    return hints


def describe_build_error(data: Mapping, err: BaseException, describe) -> str | None:
    """A message naming the config dict being built when ``err`` was raised, or None when no built dict of
    the config is on the error's path.

    Args:
        data: the plain config dict.
        err: the exception raised while the run was being set up.
        describe: key path -> (file that set it, key text).
    """
    for frame in _build_frames(err):
        built, obj_cls = frame.f_locals.get("cfg"), frame.f_locals.get("obj_cls")
        if not isinstance(built, Mapping):
            continue
        path = _config_path(data, built)
        if path is None:
            continue
        node = _node_at(data, path)
        name = getattr(obj_cls, "__name__", node.get("type"))
        hints = _type_hints(obj_cls, node) if obj_cls is not None else []
        if hints:
            lines = []
            for arg, hint in hints:
                where, key = describe((*path, arg))
                lines.append(f"{where}: {key}: {hint}")
            return (f"{'; '.join(lines)} (building {_key_text(path)}, a {name}, failed: "
                    f"{type(err).__name__}: {err})")
        named = _keys_named_in(node, str(err))
        if len(named) == 1:  # "ResNet: depth=19 is not supported": the message names the key
            where, key = describe((*path, named[0]))
            return f"{where}: {key}: building {_key_text(path)} (a {name}) failed: {type(err).__name__}: {err}"
        where, key = describe(path)
        return f"{where}: {key}: building {name} failed: {type(err).__name__}: {err}; check the values of {key}"
    return None


def _keys_named_in(node: Mapping, text: str) -> list[str]:
    """The keys of ``node`` (other than ``type``) that ``text`` names as a whole word."""
    return [k for k in node if isinstance(k, str) and k not in ("type", "_scope_")
            and re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", text)]


def _node_at(data: Any, path: Path_) -> Any:
    for part in path:
        data = data[part]
    return data
