"""What ``oars.Model(x)`` was given, resolved to a config (+ weights) or an export folder.

``x`` may be, in this order: ``oars://NAME`` (a registered checkpoint and its config); an export folder (a folder
holding ``deploy.yaml``: predicted by the torch-free runtime); a checkpoint (``.pth``/``.pt``: the config stored in
it, ``meta.config_yaml``, which every checkpoint oars writes holds); a config file; a config NAME
(``fcos_r50_fpn_1x_coco`` or ``detection/fcos/fcos_r50_fpn_1x_coco``, with or without ``.yaml``) among the configs
shipped inside the installed package (:func:`shipped_config_dirs`), then in the current folder. An unknown name is
refused with the closest shipped names.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import os.path as osp
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from oars.errors import OarsError

LOCAL_SCHEME = "oars://"  # oars.hub.local.LOCAL_SCHEME, spelled here so that importing this module stays light
CONFIGS_PACKAGE = "oars_configs"  # the repository's configs/ folder, installed as package data (pyproject.toml)
DEPLOY_FILE = "deploy.yaml"  # oars_deploy.deploy_config.DEPLOY_FILE
CHECKPOINT_SUFFIXES = (".pth", ".pt")


@dataclass
class ModelSource:
    """Where a Model's model comes from.

    Attributes:
        config: the YAML config file (None for an export folder). weights: the checkpoint, or None.
        export_dir: the export folder (None otherwise). registered: ``oars://NAME`` when the weights are a
            registered hub entry's (their hash is checked again before each use).
    """

    config: str | None
    weights: str | None
    export_dir: str | None = None
    registered: str | None = None


def resolve_model_source(source: str | os.PathLike, weights: str | None = None) -> ModelSource:
    """``Model(source, weights)`` resolved (see the module docstring).

    Raises:
        OarsError: nothing of that name (with did-you-mean), a checkpoint without a stored config, an export
            folder given ``weights``.
        WeightsHashError: ``oars://NAME``'s file changed since it was registered.
    """
    text = os.fspath(source)
    if text.startswith(LOCAL_SCHEME):
        config, found = registered_config(text, weights)
        return ModelSource(config, found, registered=None if weights else text)
    if osp.isdir(text):
        if not osp.isfile(osp.join(text, DEPLOY_FILE)):
            raise OarsError(f"Model: {text} is a folder without {DEPLOY_FILE}; expected an export folder "
                            "(tools/export.py's output), a config, a config name or a checkpoint")
        if weights:
            raise OarsError(f"Model({text!r}, weights=...): an export folder holds its model; give no weights")
        return ModelSource(None, None, export_dir=text)
    if text.lower().endswith(CHECKPOINT_SUFFIXES):
        if not osp.isfile(text):
            raise OarsError(f"Model: checkpoint not found: {text}")
        if weights:
            raise OarsError(f"Model({text!r}, weights=...): the checkpoint is the weights; give Model(CONFIG, "
                            f"weights={text!r}) to use another config with it")
        return ModelSource(checkpoint_config(text), text)
    if osp.isfile(text):
        return ModelSource(text, weights)
    return ModelSource(config_by_name(text), weights)


def registered_config(name: str, weights: str | None) -> tuple[str, str]:
    """``oars://NAME``'s config and (unless ``weights`` is given) its weights, their sha256 checked.

    Raises:
        OarsError: the name has no config recorded, or that config is gone.
    """
    from oars.hub.entries import local_entry
    from oars.hub.local import local_file, read_registry

    short = name[len(LOCAL_SCHEME):]
    local_entry(short)  # an unknown name: HubError listing the close ones
    registered = read_registry()[short].get("config")
    if not registered:
        raise OarsError(f"{name}: registered without a config; register it again with --config CFG, or give "
                        "Model(CONFIG_FILE, weights=...)")
    if not osp.isfile(registered):
        raise OarsError(f"{name}: its config {registered} no longer exists; register it again with --config")
    return registered, weights or local_file(short)


def checkpoint_config(checkpoint: str) -> str:
    """The config stored in ``checkpoint`` (``meta.config_yaml``, written by every oars training run) as a file:
    ``<temp>/oars-checkpoint-configs/<hash>/<run folder name>.yaml``, so the default work dir of ``val`` is
    ``work_dirs/<run folder name>`` as for the config it was trained with.

    Raises:
        OarsError: the file is no readable checkpoint, or holds no config (not written by oars training).
    """
    from oars.checkpoint_file import checkpoint_meta

    meta = checkpoint_meta(checkpoint)
    if meta is None:
        raise OarsError(f"Model: {checkpoint} is not a readable PyTorch checkpoint")
    text = meta.get("config_yaml")
    if not isinstance(text, str):
        raise OarsError(f"Model: {checkpoint} stores no config (meta.config_yaml; it was not saved by an oars "
                        f"training run); give its config: Model(CONFIG, weights={checkpoint!r})")
    digest = hashlib.sha256(f"{osp.abspath(checkpoint)}\n{text}".encode()).hexdigest()[:16]
    folder = osp.join(tempfile.gettempdir(), "oars-checkpoint-configs", digest)
    run_name = osp.basename(osp.dirname(osp.abspath(checkpoint))) or "checkpoint"
    path = osp.join(folder, f"{run_name}.yaml")
    if not osp.isfile(path):
        from oars_deploy.atomic import atomic_write

        os.makedirs(folder, exist_ok=True)
        atomic_write(path, text.encode())
    return path


def shipped_config_dirs() -> list[str]:
    """The folders of the configs installed with oars (the package ``oars_configs``: the repository's configs/ in
    an editable install, package data in a wheel); [] when it is not installed."""
    spec = importlib.util.find_spec(CONFIGS_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return []
    # a namespace package's path may carry an editable install's placeholder entry: keep the real folders
    return [p for p in spec.submodule_search_locations if osp.isdir(p)]


@lru_cache(maxsize=1)
def shipped_configs() -> dict[str, str]:
    """``{relative name without .yaml: file}`` of every shipped config (``_base_`` fragments left out)."""
    out: dict[str, str] = {}
    for root in shipped_config_dirs():
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "_base_" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".yaml"):
                    rel = osp.relpath(osp.join(folder, name), root)[: -len(".yaml")].replace(os.sep, "/")
                    out.setdefault(rel, osp.join(folder, name))
    return out


def config_by_name(name: str) -> str:
    """The config file a NAME means: a shipped config whose path (``detection/fcos/fcos_r50_fpn_1x_coco``) or file
    name (``fcos_r50_fpn_1x_coco``) it is, else ``NAME``/``NAME.yaml`` in the current folder.

    Raises:
        OarsError: none of these, naming the closest shipped configs; or a bare name two shipped configs share.
    """
    bare = name[: -len(".yaml")] if name.endswith(".yaml") else name
    bare = bare.replace("\\", "/").strip("/")
    shipped = shipped_configs()
    if bare in shipped:
        return shipped[bare]
    by_stem = [rel for rel in shipped if rel.rsplit("/", 1)[-1] == bare]
    if len(by_stem) == 1:
        return shipped[by_stem[0]]
    if len(by_stem) > 1:
        raise OarsError(f"Model({name!r}): several shipped configs have that name: {', '.join(by_stem)}; give one "
                        "of these paths")
    local = bare + ".yaml"
    if osp.isfile(local):
        return local
    stems = {rel.rsplit("/", 1)[-1]: rel for rel in shipped}
    close = difflib.get_close_matches(bare.rsplit("/", 1)[-1], list(stems), n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else (
        "" if shipped else " (no configs are installed with oars here: give a config file's path)")
    raise OarsError(f"Model({name!r}): not found as a config file, a checkpoint, an export folder or a config name "
                    f"(among the {len(shipped)} configs shipped with oars, or {local} here).{hint}")
