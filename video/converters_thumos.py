"""``tools/convert.py thumos2activitynet``: THUMOS14 temporal annotations -> the ActivityNet v1.3 JSON that
:class:`video.datasets.ActivityNetFeatureDataset` reads.

THUMOS14 ships one text file per class and subset, ``<ClassName>_val.txt`` / ``<ClassName>_test.txt``, each line
``<video_id> <start_seconds> <end_seconds>``, and ``Ambiguous_<subset>.txt`` for regions where the action is
unclear. Those files hold no durations, which the dataset (and BMN's boundary targets) need, so they come from
``tools/extract_features.py``'s ``videos.json`` (``--features-index``: ``duration_second`` and the frame counts
that give the seconds the features cover) or from the video files themselves (``--videos``, probed with the
training decoder, :func:`video.features.frames.probe`).

What is written, and why:

- only the videos with at least one class segment: THUMOS14 evaluates the 200 validation / 213 test videos that have
  temporal annotations, and a video without ground truth in a ``test_mode`` dataset would be scored as all false
  positives; the duration source's other videos are counted in the summary;
- ``subset``: ``validation`` for ``*_val.txt``, ``testing`` for ``*_test.txt`` (ActivityNet's names; THUMOS14
  trains on validation: set ``subset: validation`` in the training dataset);
- ambiguous regions are skipped (the JSON has no such notion) and counted; exact duplicate segments are dropped and
  counted; a segment ending past its video (within ``--tolerance``) is clipped to the duration and counted;
- classes: the sorted class-file names (the dataset's own default order), optionally written to ``--classes-out``.

Every line is checked before anything is written; each error names the file and the line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import os.path as osp
from dataclasses import dataclass, field

from oars.errors import DataError, DataFileNotFoundError

SUBSET_SUFFIXES = {"validation": "_val.txt", "test": "_test.txt"}  # --subset -> class-file suffix
ANET_SUBSETS = {"validation": "validation", "test": "testing"}  # --subset -> the JSON's subset field
AMBIGUOUS = "Ambiguous"
INDEX_FIELDS = ("duration_frame", "feature_frame", "fps")  # videos.json fields the dataset reads, copied as given


@dataclass
class Segment:
    """One line of a class file: ``video`` from ``start`` to ``end`` seconds, at ``where`` (``FILE line N``)."""

    video: str
    start: float
    end: float
    where: str


@dataclass
class Conversion:
    """The result of :func:`convert_thumos`: the JSON document, the classes and the counts for the summary."""

    doc: dict
    classes: list[str]
    ambiguous: int = 0
    clipped: int = 0
    duplicates: int = 0
    unannotated: int = 0
    per_subset: dict[str, int] = field(default_factory=dict)
    segments: int = 0


def annotation_files(ann_dir: str, subsets: list[str] | None = None) -> dict[str, dict[str, str]]:
    """The class files of ``ann_dir`` per subset (the names only; nothing is read).

    Args:
        ann_dir: THUMOS14's annotation folder (``annotation/`` or ``TH14_Temporal_Annotations_Test/annotations/
            annotation/``).
        subsets: keys of :data:`SUBSET_SUFFIXES` to look for; None: every subset that has files.

    Returns:
        ``{subset: {class_name: path}}``; the class ``Ambiguous`` included (the caller skips it).

    Raises:
        DataFileNotFoundError: ``ann_dir`` is not a folder.
        DataError: no class file for a requested subset (or none at all).
    """
    if not osp.isdir(ann_dir):
        raise DataFileNotFoundError(f"--ann-dir {ann_dir}: not a folder")
    found: dict[str, dict[str, str]] = {}
    for name in sorted(os.listdir(ann_dir)):
        for subset, suffix in SUBSET_SUFFIXES.items():
            if name.endswith(suffix) and len(name) > len(suffix) and osp.isfile(osp.join(ann_dir, name)):
                found.setdefault(subset, {})[name[:-len(suffix)]] = osp.join(ann_dir, name)
    has_classes = [s for s in SUBSET_SUFFIXES if set(found.get(s, {})) - {AMBIGUOUS}]
    for subset in subsets or []:
        if subset not in has_classes:
            raise DataError(f"--ann-dir {ann_dir} holds no THUMOS14 class file <ClassName>{SUBSET_SUFFIXES[subset]}")
    if not has_classes:
        raise DataError(f"--ann-dir {ann_dir} holds no THUMOS14 class file (<ClassName>_val.txt or "
                        "<ClassName>_test.txt)")
    return {s: found[s] for s in subsets or has_classes}


def read_segment_file(path: str) -> list[Segment]:
    """The segments of one class file: ``<video_id> <start> <end>`` per line (blank lines skipped).

    Raises:
        DataError: unreadable file, a line without exactly three fields, a start or end that is not a finite
            number, a negative start, or end <= start; the message names the file and the line.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable text file ({err})") from None
    out = []
    for num, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        where = f"{path} line {num}"
        if len(fields) != 3:
            raise DataError(f"{where}: {line.strip()!r}; expected '<video_id> <start_seconds> <end_seconds>'")
        try:
            start, end = float(fields[1]), float(fields[2])
        except ValueError:
            raise DataError(f"{where}: {line.strip()!r}; start and end must be numbers of seconds") from None
        if not (math.isfinite(start) and math.isfinite(end)):
            raise DataError(f"{where}: start and end must be finite, got {fields[1]} {fields[2]}")
        if start < 0:
            raise DataError(f"{where}: video {fields[0]} segment starts at {start} s, before the video")
        if end <= start:
            raise DataError(f"{where}: video {fields[0]} segment [{start}, {end}] ends before it starts "
                            "(end <= start)")
        out.append(Segment(fields[0], start, end, where))
    return out


def index_durations(index_files: list[str]) -> dict[str, tuple[dict, str]]:
    """Durations from ``tools/extract_features.py``'s ``videos.json`` file(s).

    Returns:
        ``{video_id: (fields, source)}``: ``fields`` holds ``duration_second`` and those of :data:`INDEX_FIELDS`
        the index has; ``source`` is ``'INDEX video ID'`` for messages. Entries are checked when used
        (:func:`video_fields`).

    Raises:
        DataFileNotFoundError / DataError: a missing or unreadable index, one that is not a JSON object, or a video
            listed in two of them.
    """
    out: dict[str, tuple[dict, str]] = {}
    for path in index_files:
        if not osp.isfile(path):
            raise DataFileNotFoundError(f"--features-index {path}: file not found (tools/extract_features.py writes "
                                        "OUT/videos.json)")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(f"--features-index {path} is not a readable JSON file ({err})") from None
        if not isinstance(data, dict):
            raise DataError(f"--features-index {path}: expected {{video_id: {{\"duration_second\", ...}}}} as "
                            "tools/extract_features.py writes it")
        for vid, info in data.items():
            if vid in out:
                raise DataError(f"--features-index: video {vid} is in both {out[vid][1].split(' video ')[0]} and "
                                f"{path}; give each video once")
            out[vid] = (info, f"{path} video {vid}")
    return out


def probe_durations(video_dirs: list[str], needed: set[str]) -> dict[str, tuple[dict, str]]:
    """Durations of the ``needed`` videos, probed from ``<DIR>/<video_id>.<ext>`` (any video suffix, each folder of
    ``video_dirs`` searched, flat); only those are opened (THUMOS14's folders also hold the unannotated videos).

    Returns:
        As :func:`index_durations`, with ``duration_second``, ``duration_frame`` and ``fps`` per found video; a
        needed video without a file is absent (reported by :func:`video_fields`).

    Raises:
        DataFileNotFoundError: a folder that does not exist.
        DataError: a video id with two files, or a file the decoder cannot read.
    """
    from video.datasets.build_file_list import VIDEO_EXTENSIONS
    from video.features.frames import probe

    suffixes = {e.lower() for e in VIDEO_EXTENSIONS}
    paths: dict[str, str] = {}
    for folder in video_dirs:
        if not osp.isdir(folder):
            raise DataFileNotFoundError(f"--videos {folder}: not a folder")
        for name in sorted(os.listdir(folder)):
            stem, ext = osp.splitext(name)
            if stem in needed and ext.lower() in suffixes:
                if stem in paths:
                    raise DataError(f"--videos: video {stem} has two files, {paths[stem]} and "
                                    f"{osp.join(folder, name)}; keep one")
                paths[stem] = osp.join(folder, name)
    out: dict[str, tuple[dict, str]] = {}
    for vid, path in sorted(paths.items()):
        info = probe(path)
        out[vid] = ({"duration_second": info.duration_second, "duration_frame": info.total_frames,
                     "fps": info.fps}, path)
    return out


def video_fields(vid: str, durations: dict[str, tuple[dict, str]], where: str, source: str) -> tuple[dict, str]:
    """The JSON fields of video ``vid`` (``duration_second`` checked positive, :data:`INDEX_FIELDS` copied).

    Raises:
        DataError: the video is not in the duration source (``where``: the annotation line naming it; ``source``:
            ``--features-index ...`` or ``--videos ...``) or has no positive finite ``duration_second``.
    """
    if vid not in durations:
        raise DataError(f"{where}: video {vid} has no duration: it is not in {source}")
    info, origin = durations[vid]
    value = info.get("duration_second") if isinstance(info, dict) else None
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if not (math.isfinite(seconds) and seconds > 0):
        raise DataError(f"{origin}: 'duration_second' must be a positive number of seconds, got {value!r} "
                        f"(video {vid} is annotated at {where})")
    fields = {"duration_second": seconds}
    fields.update({k: info[k] for k in INDEX_FIELDS if info.get(k) is not None})
    return fields, origin


def convert_thumos(ann_dir: str, subsets: list[str] | None, durations: dict[str, tuple[dict, str]], source: str,
                   tolerance: float = 1.0) -> Conversion:
    """Read every class file of ``ann_dir`` and build the ActivityNet v1.3 document (nothing is written).

    Args:
        ann_dir: the THUMOS14 annotation folder.
        subsets: ``['validation']``, ``['test']``, both, or None (every subset with class files).
        durations: per video id its fields and their origin (:func:`index_durations` / :func:`probe_durations`).
        source: the duration source as the user gave it, for messages.
        tolerance: seconds a segment may end past its video (or 1 % of the duration, whichever is larger) before
            it is an error; such a segment is clipped to the duration.

    Returns:
        A :class:`Conversion`: ``doc`` = ``{"version", "taxonomy", "database": {video_id: {"subset",
        "duration_second", ["duration_frame", "feature_frame", "fps"], "annotations": [{"segment": [start, end],
        "label"}, ...]}}}`` with each video's segments sorted by start (seconds, float).

    Raises:
        DataError: any bad line, a video in two subsets, a video without a duration, a segment starting at or
            after its video's end or ending more than the tolerance past it; each names the file and line.
    """
    files = annotation_files(ann_dir, subsets)
    result = Conversion(doc={}, classes=sorted({c for per in files.values() for c in per if c != AMBIGUOUS}))
    database: dict[str, dict] = {}
    first_seen: dict[str, tuple[str, str]] = {}  # video -> (subset, where), to refuse a video in two subsets
    for subset, per_class in files.items():
        anet_subset = ANET_SUBSETS[subset]
        for label, path in per_class.items():
            segments = read_segment_file(path)
            if label == AMBIGUOUS:
                result.ambiguous += len(segments)
                continue
            for seg in segments:
                seen = first_seen.setdefault(seg.video, (subset, seg.where))
                if seen[0] != subset:
                    raise DataError(f"{seg.where}: video {seg.video} is also annotated in the {seen[0]} subset "
                                    f"({seen[1]}); a video belongs to one subset")
                entry = database.get(seg.video)
                if entry is None:
                    fields, origin = video_fields(seg.video, durations, seg.where, source)
                    entry = database[seg.video] = {"subset": anet_subset, **fields, "annotations": [],
                                                   "_origin": origin}
                duration = entry["duration_second"]
                end = _check_end(seg, duration, tolerance, entry["_origin"])
                result.clipped += end < seg.end
                entry["annotations"].append({"segment": [seg.start, end], "label": label})
    for entry in database.values():
        del entry["_origin"]
        unique = {(a["segment"][0], a["segment"][1], a["label"]): a for a in entry["annotations"]}
        result.duplicates += len(entry["annotations"]) - len(unique)
        entry["annotations"] = [unique[k] for k in sorted(unique)]
        result.segments += len(unique)
        result.per_subset[entry["subset"]] = result.per_subset.get(entry["subset"], 0) + 1
    result.unannotated = len(set(durations) - set(database))
    result.doc = {"version": "VERSION 1.3 (converted from THUMOS14 by tools/convert.py thumos2activitynet)",
                  "taxonomy": [{"nodeName": c, "nodeId": i, "parentId": None, "parentName": None}
                               for i, c in enumerate(result.classes)],
                  "database": dict(sorted(database.items()))}
    return result


def _check_end(seg: Segment, duration: float, tolerance: float, origin: str) -> float:
    """``seg.end`` clipped to ``duration`` when within the tolerance; a DataError beyond it or for a start at or
    after the end."""
    if seg.start >= duration:
        raise DataError(f"{seg.where}: video {seg.video} segment [{seg.start}, {seg.end}] starts at or after the "
                        f"video's end ({duration:g} s, from {origin})")
    slack = max(tolerance, 0.01 * duration)
    if seg.end > duration + slack:
        raise DataError(f"{seg.where}: video {seg.video} segment [{seg.start}, {seg.end}] ends {seg.end - duration:g} "
                        f"s after the video's end ({duration:g} s, from {origin}), more than the tolerance "
                        f"{slack:g} s; check the duration source, or raise --tolerance to clip it")
    return min(seg.end, duration)


def summary(result: Conversion, out: str, classes_out: str | None, feature_dir: str | None) -> str:
    """What was written and what was left out, plus the dataset settings that read it."""
    subsets = ", ".join(f"{n} {s}" for s, n in sorted(result.per_subset.items()))
    lines = [f"wrote {out}: {len(result.doc['database'])} videos ({subsets}), {result.segments} segments of "
             f"{len(result.classes)} classes" + (f"; {classes_out} ({len(result.classes)} classes)"
                                                 if classes_out else "")]
    notes = [(result.ambiguous, "ambiguous region(s) skipped (Ambiguous_*.txt: ActivityNet JSON has no ambiguous "
                                "label)"),
             (result.clipped, "segment(s) ending past their video clipped to its duration"),
             (result.duplicates, "duplicate segment(s) dropped"),
             (result.unannotated, "video(s) of the duration source without a segment in the converted subset(s) "
                                  "left out")]
    lines += [f"  {n} {text}" for n, text in notes if n]
    used = {a["label"] for v in result.doc["database"].values() for a in v["annotations"]}
    empty = [c for c in result.classes if c not in used]
    if empty:
        lines.append(f"  class(es) without any segment: {', '.join(empty)} (give the dataset `classes` so that the "
                     "ids stay those of the class files)")
    first = "validation" if "validation" in result.per_subset else sorted(result.per_subset)[0]  # THUMOS trains on it
    settings = f"type: ActivityNetFeatureDataset, ann_file: {out}, subset: {first}"
    settings += f", data_prefix: {{feature: {feature_dir}}}" if feature_dir else ", data_prefix: {feature: FEATURES}"
    settings += f", classes: {classes_out}" if classes_out else ""
    lines.append(f"dataset: {{{settings}}}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags (``tools/convert.py thumos2activitynet --help``)."""
    parser.add_argument("--ann-dir", required=True, help="THUMOS14's temporal annotation folder: <ClassName>_val.txt "
                        "/ <ClassName>_test.txt, one '<video_id> <start_s> <end_s>' per line. Ambiguous_*.txt marks "
                        "ambiguous regions: not a class; skipped (ActivityNet JSON has no 'ambiguous') and counted")
    parser.add_argument("--out", required=True, help="the ActivityNet v1.3 JSON to write (only videos with at least "
                        "one segment; subset 'validation' or 'testing')")
    parser.add_argument("--subset", choices=list(SUBSET_SUFFIXES), default=None,
                        help="convert only *_val.txt or *_test.txt (default: every subset the folder has)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--videos", nargs="+", default=None, metavar="DIR", help="folder(s) of the video files "
                        "(<video_id>.mp4 ...): the durations are probed from the annotated ones")
    source.add_argument("--features-index", nargs="+", default=None, metavar="VIDEOS_JSON",
                        help="tools/extract_features.py's OUT/videos.json: durations and the frames the features "
                             "cover (duration_frame, feature_frame), copied into the JSON")
    parser.add_argument("--classes-out", default=None, help="also write the class names, sorted, one per line "
                        "(the dataset's `classes`)")
    parser.add_argument("--tolerance", type=float, default=1.0, help="seconds a segment may end past its video "
                        "(or 1%% of its duration if larger); it is clipped to the duration and counted (default 1)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files (default: stop)")


def check_outputs(args: argparse.Namespace) -> None:
    """Before reading: neither output replaces an input (a class file, an index) or, without ``--overwrite``, an
    existing file; the two outputs differ; neither would become a class file of ``--ann-dir`` next time."""
    from oars_deploy.output_paths import OutputPathError, check_new_file

    inputs = tuple(args.features_index or ())
    if osp.isdir(args.ann_dir):
        inputs += tuple(osp.join(args.ann_dir, n) for n in os.listdir(args.ann_dir))
    outputs = [("--out", args.out)] + ([("--classes-out", args.classes_out)] if args.classes_out else [])
    for flag, path in outputs:
        check_new_file(path, args.overwrite, flag=flag, inputs=inputs)
        if osp.realpath(osp.dirname(osp.abspath(path))) == osp.realpath(args.ann_dir) and \
                path.endswith(tuple(SUBSET_SUFFIXES.values())):
            raise OutputPathError(f"{flag} {path} would be read as a class file of --ann-dir next time; choose "
                                  "another name or folder")
    if args.classes_out and osp.realpath(args.classes_out) == osp.realpath(args.out):
        raise OutputPathError(f"--classes-out {args.classes_out} is --out; give two different files")
    if not args.tolerance >= 0:
        raise DataError(f"--tolerance must be >= 0 seconds, got {args.tolerance}")


def run(args: argparse.Namespace) -> Conversion:
    """Convert and write ``--out`` (and ``--classes-out``) atomically; prints the summary."""
    from oars_deploy.atomic import atomic_write

    subsets = [args.subset] if args.subset else None
    if args.features_index:
        durations, source = index_durations(args.features_index), f"--features-index {' '.join(args.features_index)}"
    else:
        needed = {s.video for per in annotation_files(args.ann_dir, subsets).values()
                  for label, path in per.items() if label != AMBIGUOUS for s in read_segment_file(path)}
        durations, source = probe_durations(args.videos, needed), f"--videos {' '.join(args.videos)}"
    result = convert_thumos(args.ann_dir, subsets, durations, source, args.tolerance)
    atomic_write(args.out, json.dumps(result.doc, indent=1) + "\n")
    if args.classes_out:
        atomic_write(args.classes_out, "".join(f"{c}\n" for c in result.classes))
    feature_dir = (osp.dirname(args.features_index[0]) or ".") if args.features_index else None
    print(summary(result, args.out, args.classes_out, feature_dir))
    return result
