"""Read every sample of a config's datasets once, in DataLoader workers, and report every bad file at once
(what ``tools/check_data.py`` runs).

Why: a run finds a bad file only at the iteration that reads it, loses the epoch in progress, and stops at the
first of many. Here each split's dataset is built as the config says (``-o`` overrides included) and each
sample goes through the split's whole pipeline; a sample that raises is recorded with its files and the reason,
and the next one is read. A dataset whose loading stops at its first bad annotation (a missing image under
``on_bad_annotation: fail``) is loaded again with ``on_bad_annotation: skip``, so the problems it drops are listed
too and its other samples are still read: one run reports every problem of every split.

On object storage (a ``data_root`` or annotation file given as a URL: ``s3://``, ``gs://``, ``memory://`` ...) the
same checks run through ``oars.data.storage``; ``data_root`` and ``storage_options`` can be set for every dataset of
the config at once (:func:`with_storage`), and ``sample`` reads a seeded random sample of N samples per dataset
instead of all (a bucket of a million images is checked in minutes; the report says how many of how many, and the
seed, so that a second run checks the same ones).
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from mmengine.config import Config
from mmengine.registry import DATASETS, DefaultScope
from torch.utils.data import DataLoader, Dataset, Subset

from oars.data import storage
from oars.data.dataset import every_problem_named, sample_files
from oars.errors import DataError, OarsError

SPLITS = ('train', 'val', 'test')
WRAPPER_KEYS = ('dataset', 'datasets')  # MultiImageMixDataset / RepeatDataset, ConcatDataset
POLICY_KEY = 'on_bad_annotation'  # a dataset argument: 'fail' (default) stops loading at the first bad annotation
SKIP_MARK = f'{POLICY_KEY}: skip'  # in the warning such a dataset gives for what it dropped under 'skip'


@dataclass
class SplitReport:
    """What checking one split found: ``failures`` are ``(files, reason)`` pairs; ``filtered`` counts samples
    the pipeline dropped on purpose (returned None, e.g. ``FilterAnnotations(keep_empty=False)``). With a random
    sample (``seed`` set), ``num_samples`` are those read and ``num_total`` those the datasets hold."""

    split: str
    dataset: str
    num_samples: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    filtered: int = 0
    same_as: str | None = None
    num_total: int = 0
    seed: int | None = None


def leaf_dataset_configs(ds_cfg: dict) -> list[dict]:
    """The datasets that read files: a wrapper's inner dataset(s) (its own pipeline mixes samples that the
    inner datasets have read, so checking those reads every file once)."""
    for key in WRAPPER_KEYS:
        inner = ds_cfg.get(key)
        if isinstance(inner, dict):
            return leaf_dataset_configs(inner)
        if isinstance(inner, list | tuple):
            return [leaf for d in inner for leaf in leaf_dataset_configs(d)]
    return [ds_cfg]


class _Reader(Dataset):
    """Runs ``dataset``'s pipeline on one sample; returns None when it worked, else ``(files, reason)``.

    The pipeline is called directly (not ``dataset[i]``) so that no other sample stands in for a bad one."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: int) -> tuple[str, str] | str | None:
        try:
            info = self.dataset.get_data_info(idx)
        except Exception as err:  # noqa: BLE001 - every failure is reported, none stops the check
            return f'sample {idx}', _reason(err)
        try:
            out = self.dataset.pipeline(info)
        except Exception as err:  # noqa: BLE001
            return ' + '.join(sample_files(info)) or f'sample {idx}', _reason(err)
        return 'filtered' if out is None else None


def _reason(err: Exception) -> str:
    """The message of an oars error (it says what is wrong), else the exception type and message."""
    return str(err) if isinstance(err, OarsError) else f'{type(err).__name__}: {err}'


def _first(batch: list):
    return batch[0]


def sample_indices(length: int, sample: int | None, seed: int) -> list[int]:
    """The indices to read: all of ``range(length)``, or ``sample`` of them drawn without replacement by
    ``numpy.random.default_rng(seed)`` (sorted; all when ``sample >= length``), the same for the same seed."""
    if sample is None or sample >= length:
        return list(range(length))
    return sorted(int(i) for i in np.random.default_rng(seed).choice(length, size=sample, replace=False))


def check_dataset(dataset, num_workers: int, desc: str, report: SplitReport, sample: int | None = None,
                  seed: int = 0) -> None:
    """Read every sample of a built dataset (or a seeded random ``sample`` of them, :func:`sample_indices`)
    through its pipeline in ``num_workers`` workers, with a tqdm progress bar over what is read."""
    from tqdm import tqdm

    full = _Reader(dataset)
    reader = full if sample is None else Subset(full, sample_indices(len(full), sample, seed))
    loader = DataLoader(reader, batch_size=1, shuffle=False, num_workers=num_workers, collate_fn=_first)
    report.num_samples += len(reader)
    report.num_total += len(full)
    if sample is not None:
        report.seed = seed
        desc = f'{desc}, {len(reader)} of {len(full)} (seed {seed})'
    for result in tqdm(loader, total=len(reader), desc=desc, unit='sample', dynamic_ncols=True):
        if result == 'filtered':
            report.filtered += 1
        elif result is not None:
            report.failures.append(result)


def parse_storage_options(items: Sequence[str], flag: str = '--storage-option') -> dict:
    """``KEY=VALUE`` strings -> ``storage_options`` (values parsed as YAML: ``anon=true`` is a bool; a dotted key
    ``config_kwargs.read_timeout=5`` nests), checked by ``oars.data.storage.check_options`` (a credential is
    refused: it comes from the environment or the standard files).

    Raises:
        DataError: an item without ``=`` or with an empty key, or a refused option, naming ``flag`` and the item.
    """
    import yaml  # noqa: PLC0415

    options: dict = {}
    for item in items:
        key, sep, value = item.partition('=')
        if not sep or not key.strip() or any(not part for part in key.strip().split('.')):
            raise DataError(f'{flag} {item!r}: expected KEY=VALUE, e.g. {flag} endpoint_url=http://127.0.0.1:9000')
        *parents, last = key.strip().split('.')
        node = options
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise DataError(f'{flag} {item!r}: {part} is given both as a value and as a group of options')
        try:
            node[last] = yaml.safe_load(value) if value else ''
        except yaml.YAMLError:
            node[last] = value
    return storage.check_options(options, flag)


def with_storage(leaf: dict, data_root: str | None = None, storage_options: Mapping | None = None) -> dict:
    """A dataset config with ``data_root`` replaced (when given) and ``storage_options`` merged over its own
    (the command line's win), as ``tools/check_data.py --data-root URL --storage-option KEY=VALUE`` applies them
    to every dataset of the config."""
    out = dict(leaf)
    if data_root:
        out['data_root'] = data_root
    if storage_options:
        out['storage_options'] = {**(out.get('storage_options') or {}), **storage_options}
    return out


def check_config(cfg: Config, splits: Sequence[str] = SPLITS, num_workers: int | None = None,
                 sample: int | None = None, seed: int = 0, data_root: str | None = None,
                 storage_options: Mapping | None = None) -> list[SplitReport]:
    """Build each split's dataset(s) of ``cfg`` and read every sample (see the module docstring). A dataset that
    cannot be built is one failure of its split. A split whose dataset config equals an earlier one's is not read
    twice (``same_as``). ``num_workers`` defaults to the split's ``num_workers`` (at least 1).

    Args:
        sample: read a random sample of this many samples per dataset (:func:`sample_indices`, ``seed``) instead
            of all.
        data_root, storage_options: set on every dataset read (:func:`with_storage`): e.g. a bucket's URL and its
            ``endpoint_url``.
    """
    reports: list[SplitReport] = []
    seen: dict[str, str] = {}
    for split in splits:
        loader_cfg = cfg.get(f'{split}_dataloader')
        if not loader_cfg or not isinstance(loader_cfg.get('dataset'), dict):
            continue
        ds_cfg = copy.deepcopy(loader_cfg['dataset'])
        report = SplitReport(split, str(ds_cfg.get('type')))
        reports.append(report)
        key = repr(ds_cfg)
        if key in seen:
            report.same_as = seen[key]
            continue
        seen[key] = split
        workers = num_workers if num_workers is not None else max(1, int(loader_cfg.get('num_workers') or 0))
        for leaf in leaf_dataset_configs(ds_cfg):
            leaf = with_storage(leaf, data_root, storage_options)
            dataset = build_collecting(leaf, cfg.get('default_scope'), f'{split} dataset {leaf.get("type")}', report)
            if dataset is not None:
                check_dataset(dataset, workers, f'{split} ({leaf.get("type")})', report, sample, seed)
    return reports


def _build(leaf: dict, scope: str | None):
    with DefaultScope.overwrite_default_scope(scope), every_problem_named():
        dataset = DATASETS.build(leaf)
    if hasattr(dataset, 'full_init'):
        dataset.full_init()
    return dataset


def build_collecting(leaf: dict, scope: str | None, what: str, report: SplitReport):
    """Build one dataset, recording in ``report`` every annotation it drops under ``on_bad_annotation: skip`` (its
    warnings). On failure, when the dataset stops at its first bad annotation (``on_bad_annotation`` unset or
    ``fail``), build it again under ``skip``: each problem it then drops is recorded instead of the first one alone,
    and the dataset is returned, so that its samples are still read.

    Args:
        leaf: the dataset's config. scope: the config's ``default_scope``. what: names the dataset in the report.
        report: the split's report, which receives the failures.

    Returns:
        The built dataset, or None when it cannot be built even under ``skip`` (the first failure is recorded).
    """
    try:
        return _build_recording(leaf, scope, what, report)
    except Exception as err:  # noqa: BLE001 - e.g. a bad annotation file: reported with the rest
        failure = (what, f'cannot be built: {_reason(err)}')
    if leaf.get(POLICY_KEY, 'fail') == 'fail':
        try:
            return _build_recording({**leaf, POLICY_KEY: 'skip'}, scope, what, report, fallback=failure)
        except Exception:  # noqa: BLE001 - not a dataset with that policy, or another problem: the first message
            pass
    report.failures.append(failure)
    return None


def _build_recording(leaf: dict, scope: str | None, what: str, report: SplitReport,
                     fallback: tuple[str, str] | None = None):
    """``_build`` with the skip warnings recorded as failures (``fallback`` when there is none: the retry under
    ``skip`` of a dataset that failed must not pass as clean)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        dataset = _build(leaf, scope)
    dropped = [problem for w in caught if SKIP_MARK in str(w.message) for problem in _problems(str(w.message))]
    report.failures += [(what, problem) for problem in dropped] or ([fallback] if fallback else [])
    for w in caught:  # any other warning is shown as it would have been
        if SKIP_MARK not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return dataset


def _problems(message: str) -> list[str]:
    """One entry per problem of a skip warning (``headline`` then ``  - example`` lines): each example; the
    headline too (its counts per kind) when it counts more problems than it lists."""
    lines = message.splitlines()
    examples = [line.strip()[2:] for line in lines[1:] if line.strip().startswith('- ')]
    counted = re.search(r'skipped (\d+) ', lines[0]) if lines else None
    if not examples or (counted and int(counted.group(1)) > len(examples)):
        examples.insert(0, lines[0] if examples else message)
    return examples


def format_reports(reports: Sequence[SplitReport]) -> str:
    """Every bad file with its reason, then one line per split."""
    lines = []
    for r in reports:
        for files, reason in r.failures:
            lines.append(f'{r.split}: {files}: {reason}')
    if lines:
        lines.append('')
    for r in reports:
        if r.same_as:
            lines.append(f'{r.split}: same dataset as {r.same_as}')
            continue
        extra = f', {r.filtered} dropped by the pipeline on purpose' if r.filtered else ''
        read = (f'{r.num_samples} of {r.num_total} sample(s) read (a random sample, seed {r.seed})'
                if r.seed is not None else f'{r.num_samples} sample(s) read')
        lines.append(f'{r.split} ({r.dataset}): {read}, {len(r.failures)} bad{extra}')
    return os.linesep.join(lines)
