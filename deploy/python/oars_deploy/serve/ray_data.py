"""``oars-infer --ray [--num-workers N] [--ray-address ADDR]``: batch inference over many files with Ray Data.

The inputs (a file, a folder, a glob pattern such as ``'imgs/*.jpg'``, or a ``.txt`` list of paths, one per line)
become a Ray dataset of paths; a pool of ``--num-workers`` actors (:class:`RecordMaker`, Ray Data's stateful
``map_batches`` with ``concurrency``) loads the export once each and turns batches of paths into results.jsonl
records, the same ones ``oars-infer`` writes plus ``resolved_input`` (below) (image models: the plug-in's own
``write``, pictures included; video / feature models: the :class:`~oars_deploy.serve.models.ServedModel` record).
The actors read each file by its absolute path (an actor of a running cluster, ``--ray-address``, does not share
the driver's folder); the record keeps ``input`` as the user spelled it.

Resumable: each record is appended to OUT_DIR/results.jsonl as soon as it arrives (in completion order, not input
order), and a file whose record is there already is not predicted again, so a killed run continues where it
stopped. "Already there" is decided on the resolved path (:func:`resume_key`, ``os.path.realpath``), the same for
every spelling of the input (``./imgs``, ``imgs``, ``a/../imgs``, an absolute path, a link to the folder): each
record keeps ``input`` as the user spelled it and adds ``resolved_input`` (:data:`RESOLVED_KEY`), the key the next
run compares (a record without it, from an older run, is resolved from ``input`` against the current folder). A
file that cannot be read is listed with its reason at the end (exit status 2) and never stops the others; it is
tried again by the next run.

Output names are unique (:meth:`~oars_deploy.predictors.images.ImagePlugin.output_stems`): ``-i 'twins/**/*.png'``
over ``twins/a/x.png`` and ``twins/b/x.png`` writes ``a/x.png``, ``a/x_vis.png``, ``b/x.png``, ``b/x_vis.png``, and
each record's ``label_png`` names its own file. The names are made from every listed input, done or not, so a
resumed run names its files as the first run did.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp

import numpy as np

from oars_deploy.atomic import atomic_write
from oars_deploy.errors import DeployError, UserError
from oars_deploy.extras import check_extra
from oars_deploy.failures import Failures
from oars_deploy.image_files import input_form, listed_files
from oars_deploy.plugins import PredictorPlugin
from oars_deploy.records import RESULTS_FILE

#: the key each --ray record adds: the input's resolved path (:func:`resume_key`), what a resumed run compares
RESOLVED_KEY = "resolved_input"
#: what --ray imports from the serve extra (ray first: a missing Ray is named as such, not as its pyarrow)
RAY_DATA_MODULES = ("ray", "pandas", "pyarrow")


def list_inputs(spec: str, plugin: PredictorPlugin) -> list[str]:
    """The input files of ``-i``: a glob pattern (``*?[``), a ``.txt``/``.lst`` list (one path a line, relative
    to the list's folder), else the plug-in's own listing of a file or a folder (as ``oars-infer``).

    Raises:
        UserError: nothing matches, or the list file cannot be read.
    """
    files = listed_files(spec)
    if files is not None:
        if not files:
            raise UserError(f"-i {spec}: the list names no file" if input_form(spec) == "list" else
                            f"-i {spec!r}: the pattern matches no file")
        return files
    return plugin.list_inputs(spec)


def resume_key(path: str) -> str:
    """The key that says a file is done: its absolute path with links resolved (``os.path.realpath``), so every
    spelling of one file (``./imgs/x.png``, ``imgs/x.png``, ``a/../imgs/x.png``, through a link) is the same."""
    return osp.realpath(osp.abspath(path))


def record_key(record: dict) -> str | None:
    """The resume key of a results.jsonl record: its :data:`RESOLVED_KEY`, else (a record of an older run) its
    ``input`` resolved against the current folder; None for a record without an input path."""
    key = record.get(RESOLVED_KEY)
    if isinstance(key, str) and key:
        return key
    spelled = record.get("input")
    return resume_key(spelled) if isinstance(spelled, str) and spelled else None


def done_inputs(out_dir: str) -> set[str]:
    """The resume keys (:func:`record_key`) of every record already in ``out_dir``/results.jsonl. A last line cut
    by a killed run is dropped (the file is rewritten atomically without it), so appending continues on a clean
    line."""
    path = osp.join(out_dir, RESULTS_FILE)
    if not osp.isfile(path):
        return set()
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    good, done = [], set()
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if line.endswith("\n") and isinstance(record, dict):
            good.append(line)
            done.add(record_key(record))
    done.discard(None)
    if len(good) != len(lines):
        atomic_write(path, "".join(good))
    return done


def plan_inputs(paths: list[str], done: set[str]) -> tuple[dict[str, str], list[str], int]:
    """Which inputs to predict now.

    Args:
        paths: the listed inputs, as spelled. done: the keys of the records already written (:func:`done_inputs`).

    Returns:
        ``(keys, todo, skipped)``: ``{path: resume key}`` of each distinct file (the first spelling of a file
        listed twice), the paths not done yet, and how many distinct files were done before.
    """
    keys: dict[str, str] = {}
    seen: set[str] = set()
    for path in paths:
        key = resume_key(path)
        if key not in seen:
            seen.add(key)
            keys[path] = key
    todo = [p for p, key in keys.items() if key not in done]
    return keys, todo, len(keys) - len(todo)


class RecordMaker:
    """A Ray Data actor: the export loaded once; a batch of paths -> their records or why they failed.

    Args:
        model_dir / device / backend / topk: as ``oars-infer``.
        out_dir: where an image plug-in's ``write`` puts its pictures.
        draw_threshold: the detection pictures' threshold (None: the plug-in's default).
    """

    def __init__(self, model_dir: str, device: str, backend: str, out_dir: str, topk: int,
                 draw_threshold: float | None) -> None:
        from oars_deploy.serve.models import ImageModel, load_served

        self.model = load_served(model_dir, device, backend)
        if hasattr(self.model, "topk"):
            self.model.topk = topk
        self.out_dir = out_dir
        self.write_pictures = isinstance(self.model, ImageModel)
        self.args = argparse.Namespace(draw_threshold=draw_threshold)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[str]]:
        """``{'path': [N], 'file': [N], 'stem': [N]}`` -> ``{'path', 'record' (JSON line or ''), 'error' ('' or
        why)}``, N each. ``path``: as the user spelled it (the record's ``input``); ``file``: its absolute path, which
        is read (an actor of a running cluster does not share the driver's folder); ``stem``: the output name
        :meth:`~oars_deploy.predictors.images.ImagePlugin.output_stems` gave it."""
        paths = [str(p) for p in batch["path"]]
        files = [str(f) for f in batch["file"]]
        stems = [str(s) for s in batch["stem"]]
        records, errors, loaded = [""] * len(paths), [""] * len(paths), []
        for i, file in enumerate(files):
            try:
                loaded.append((i, self.model.load_path(file)))
            except UserError as err:
                errors[i] = str(err)
        if loaded:
            try:
                results = self.model.predict([item for _, item in loaded])
                for (i, item), result in zip(loaded, results):
                    records[i] = json.dumps(self.record(paths[i], stems[i], item, result))
            except Exception as err:  # noqa: BLE001  (a failed batch is listed, the run goes on)
                for i, _ in loaded:
                    errors[i] = f"prediction failed: {type(err).__name__}: {err}"
        return {"path": paths, "record": records, "error": errors}

    def record(self, path: str, stem: str, item, result) -> dict:
        """The record of one input; image models through their plug-in's ``write`` (pictures and record, as
        ``oars-infer``) under the output name ``stem``."""
        if self.write_pictures:
            _, record = self.model.plugin.write_named(self.out_dir, path, stem, item, result, self.model.predictor,
                                                      self.args)
            return record.to_json()
        return self.model.record(path, item, result)


def start_ray(address: str | None, num_workers: int) -> None:
    """Connect to ``address`` (with Ray's token authentication when a Ray token is at hand, as the instances Ray
    2.60 starts locally require), or start a local Ray instance listening on the loopback interface only."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # node address = loopback (see serve.cli)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    token_file = os.environ.get("RAY_AUTH_TOKEN_PATH", osp.expanduser("~/.ray/auth_token"))
    if address and "RAY_AUTH_MODE" not in os.environ and ("RAY_AUTH_TOKEN" in os.environ or osp.isfile(token_file)):
        os.environ["RAY_AUTH_MODE"] = "token"  # before Ray is imported: its config reads it once
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(address="local", include_dashboard=False, num_cpus=num_workers + 1, _node_ip_address="127.0.0.1",
                 log_to_driver=False, configure_logging=False)


def run_ray(args: argparse.Namespace, deploy: dict, plugin: PredictorPlugin) -> tuple[int, int, Failures]:
    """Predict ``args.input`` with Ray Data, appending records to ``args.output_dir``/results.jsonl.

    Returns:
        (records written now, files skipped as done before, the failures).

    Raises:
        DeployError: Ray Data is not installed (the serve extra), a predictor kind batch inference does not run
            (GAN generators), a bad ``--num-workers``.
    """
    from oars_deploy.serve.models import served_models

    # before any output is written: one line naming the extra, not a traceback; checked, not imported: Ray reads
    # RAY_AUTH_MODE (start_ray) when it is first imported
    check_extra(RAY_DATA_MODULES, "oars-infer --ray")

    batchable = [name for name, cls in served_models().items() if cls.batch_inference]
    if plugin.name not in batchable:
        raise DeployError(f"--ray runs {', '.join(batchable)} models, not {plugin.name!r}; run it without --ray")
    if args.num_workers < 1:
        raise DeployError(f"--num-workers must be >= 1, got {args.num_workers}")
    paths = list_inputs(args.input, plugin)
    os.makedirs(args.output_dir, exist_ok=True)
    keys, todo, skipped = plan_inputs(paths, done_inputs(args.output_dir))
    stems = output_names(plugin, list(keys))  # from every input, done or not: a resumed run names files the same
    failures = Failures()
    if not todo:
        return 0, skipped, failures
    start_ray(args.ray_address, args.num_workers)
    import ray

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    batch = args.batch_size or 8
    ds = ray.data.from_items([{"path": p, "file": osp.abspath(p), "stem": stems.get(p, "")} for p in todo],
                             override_num_blocks=max(1, -(-len(todo) // batch)))
    ds = ds.map_batches(RecordMaker, batch_size=batch, num_cpus=args.worker_cpus,
                        compute=ray.data.ActorPoolStrategy(size=args.num_workers),
                        fn_constructor_kwargs=dict(model_dir=osp.abspath(args.model_dir), device=args.device,
                                                   backend=args.backend, out_dir=osp.abspath(args.output_dir),
                                                   topk=getattr(args, "topk", 5),
                                                   draw_threshold=getattr(args, "draw_threshold", None)))
    written = 0
    with open(osp.join(args.output_dir, RESULTS_FILE), "a", encoding="utf-8") as out:
        try:
            for row in ds.iter_rows():
                if row["error"]:
                    failures.add(row["path"], row["error"])
                    continue
                out.write(json.dumps({**json.loads(row["record"]), RESOLVED_KEY: keys[row["path"]]}) + "\n")
                out.flush()
                written += 1
        except Exception as err:  # noqa: BLE001  (Ray's errors carry remote tracebacks: say it in one line)
            why = next((line for line in reversed(str(err).splitlines()) if line.strip()), type(err).__name__)
            raise DeployError(f"the Ray Data run stopped after {written} new records (kept in "
                              f"{osp.join(args.output_dir, RESULTS_FILE)}; run again to resume): {why}") from None
    return written, skipped, failures


def output_names(plugin: PredictorPlugin, paths: list[str]) -> dict[str, str]:
    """``{path: output stem}`` for a plug-in that writes pictures named after its inputs (an image plug-in's
    :meth:`~oars_deploy.plugins.PredictorPlugin.output_stems`); ``{}`` for the others (their records name no
    file)."""
    return plugin.output_stems(paths)
