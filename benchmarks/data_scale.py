"""Annotation files at scale: load time and peak memory of oars' loaders against pycocotools alone, DataLoader
workers' memory, COCO evaluation against COCOeval alone, mIoU over many label maps, video lists and ActivityNet.

Usage (from the repository root)::

    python benchmarks/data_scale.py                                # 10k / 100k / 1M boxes, the other parts at size
    python benchmarks/data_scale.py --boxes 2000 20000 --eval-images 200 --video-list 5000 --activitynet 500 \\
        --seg-maps 100 --json out.json                             # a quick run

For each synthetic COCO file (``--boxes``: 8 boxes per image, a polygon each, 3 % crowd boxes, 80 categories; the
images are empty files: only their listing is read) every load runs in a fresh subprocess and reports wall time and
the rise of peak RSS over the process before the load (``ru_maxrss``): ``pycocotools.COCO(file)`` alone, then
``CocoDataset`` (checks, index, serialisation; ``test_mode: false``). Ratios are oars / pycocotools (goal <= 1.5 for
both); the exponent is the slope of log time against log boxes (1 = linear). ``workers`` forks 4 processes (what a
DataLoader with 4 workers does on Linux) that each read every 4th sample's data info and report the private memory
(USS, from /proc/self/smaps_rollup) that reading added: the parent's pages they had to copy plus their own allocations;
a few MB (the idle forked control's figure) means they share the parent's index rather than copy it.

COCO evaluation (``--eval-images`` x 100 detections): ``COCO(gt) + loadRes + COCOeval`` (evaluate, accumulate,
summarize) against ``CocoMetric.process`` + ``compute_metrics`` on the same detections (goal <= 1.1).
mIoU: ``IoUMetric`` over ``--seg-maps`` label maps: time per map and the number of matrices it keeps.
Video list (``--video-list`` lines) and ActivityNet json (``--activitynet`` videos): load time and peak RSS rise in a
fresh subprocess, beside the bare read (lines split / ``json.load``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.data_scale_cases import (  # noqa: E402 - after the repository root is importable
    BOXES_PER_IMAGE,
    NUM_CATEGORIES,
    _peak_mb,
    _rss_mb,
    _smaps,
    load_average,
    write_activitynet,
    write_coco,
    write_video_list,
)

WORKERS = 4


# ---- child processes: one load each --------------------------------------------------------------------------------
def _worker(ds, k: int, queue) -> None:
    """A forked worker: read every ``WORKERS``-th data info (what its share of an epoch reads; ``k`` < 0: read
    nothing, the control) and report the private memory (USS) this added: the pages of the parent's it had to
    copy, plus its own allocations. No ``gc.collect()`` here: a full collection writes into every object of the
    process (torch's included) and copies their pages whatever the dataset holds (``gc.freeze()`` before the fork
    avoids that)."""
    before = _smaps()
    if k >= 0:
        for i in range(k, len(ds), WORKERS):
            ds.get_data_info(i)
    else:
        time.sleep(0.2)
    after = _smaps()
    queue.put((k, {'uss_mb': after['uss'] - before['uss'], 'pss_mb': after['pss']}))


def _fork_workers(ds) -> dict:
    """``{'workers': [per worker], 'control': an idle forked process}``."""
    import multiprocessing as mp

    ctx = mp.get_context('fork')
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(ds, k, queue)) for k in [*range(WORKERS), -1]]
    for p in procs:
        p.start()
    got = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    return {'workers': [got[k] for k in range(WORKERS)], 'control': got[-1]}


def child(args: argparse.Namespace) -> None:
    """Run one load (``--child KIND``) and print one json line: seconds, peak RSS rise, retained RSS."""
    import warnings
    warnings.simplefilter('ignore')
    if args.child in ('oars', 'oars_workers'):
        from detection.datasets.coco import CocoDataset
        classes = [f'class{c}' for c in range(1, NUM_CATEGORIES + 1)]
    elif args.child == 'pycocotools':
        import contextlib
        import io

        from pycocotools.coco import COCO
    elif args.child == 'video_list':
        from video.datasets import VideoDataset
    elif args.child == 'activitynet':
        from video.datasets.activitynet import ActivityNetFeatureDataset
    gc.collect()
    base = _rss_mb()
    start = time.perf_counter()
    extra: dict = {}
    if args.child in ('oars', 'oars_workers'):
        obj = CocoDataset(ann_file=args.file, data_prefix={'img': args.img_dir}, classes=classes)
        extra['samples'] = len(obj)
        index = getattr(obj, '_index', None)
        extra['index_mb'] = ((index.nbytes if index is not None else 0) + obj.data_bytes.nbytes
                             + obj.data_address.nbytes) / 2 ** 20
    elif args.child == 'pycocotools':
        with contextlib.redirect_stdout(io.StringIO()):
            obj = COCO(args.file)
    elif args.child == 'lines':
        with open(args.file) as f:
            obj = [line.split() for line in f]
    elif args.child == 'json':
        with open(args.file) as f:
            obj = json.load(f)
    elif args.child == 'video_list':
        obj = VideoDataset(ann_file=args.file, classes=[f'c{i}' for i in range(400)])
        extra['samples'] = len(obj)
    elif args.child == 'activitynet':
        obj = ActivityNetFeatureDataset(ann_file=args.file, subset='training')
        extra['samples'] = len(obj)
    seconds = time.perf_counter() - start
    peak = _peak_mb() - base
    gc.collect()
    extra['retained_mb'] = _rss_mb() - base
    if args.child == 'oars_workers':
        extra.update(_fork_workers(obj))
    print(json.dumps({'seconds': seconds, 'peak_mb': max(peak, 0.0), **extra}))


def _run_child(kind: str, file: str, img_dir: str = '') -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), '--child', kind, '--file', file, '--img-dir', img_dir]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if res.returncode != 0:
        raise SystemExit(f'data_scale: the {kind} load of {file} failed:\n{res.stderr[-3000:]}')
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---- parts -------------------------------------------------------------------------------------------------------
def coco_rows(sizes: list[int], tmp: str, workers: bool) -> list[dict]:
    rows = []
    for n in sizes:
        path, img_dir = os.path.join(tmp, f'coco_{n}.json'), os.path.join(tmp, f'images_{n}')
        write_coco(path, img_dir, n)
        ref = _run_child('pycocotools', path)
        ours = _run_child('oars_workers' if workers else 'oars', path, img_dir)
        row = {'boxes': n, 'file_mb': os.path.getsize(path) / 2 ** 20, 'pycocotools_s': ref['seconds'],
               'pycocotools_peak_mb': ref['peak_mb'], 'oars_s': ours['seconds'], 'oars_peak_mb': ours['peak_mb'],
               'oars_retained_mb': ours['retained_mb'], 'index_mb': ours['index_mb'],
               'time_ratio': ours['seconds'] / ref['seconds'],
               'memory_ratio': ours['peak_mb'] / max(ref['peak_mb'], 1e-9)}
        if workers:
            row['worker_uss_mb'] = [w['uss_mb'] for w in ours['workers']]
            row['worker_pss_mb'] = [w['pss_mb'] for w in ours['workers']]
            row['idle_worker_uss_mb'] = ours['control']['uss_mb']
        rows.append(row)
        print(f"  {n} boxes: pycocotools {ref['seconds']:.2f} s, +{ref['peak_mb']:.0f} MB; oars {ours['seconds']:.2f}"
              f" s, +{ours['peak_mb']:.0f} MB", flush=True)
        os.remove(path)
    return rows


def exponent(xs: list[float], ys: list[float]) -> float | None:
    """Slope of log y against log x (None with fewer than two sizes)."""
    if len(xs) < 2:
        return None
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def eval_rows(num_images: int, tmp: str, repeats: int = 1, dets_per_image: int = 100) -> dict:
    """COCOeval alone vs CocoMetric on ``num_images`` x ``dets_per_image`` detections."""
    import contextlib
    import io

    from mmengine.logging import MMLogger
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from detection.evaluation.coco_metric import CocoMetric, xyxy_to_xywh

    MMLogger.get_instance('data_scale', log_level='WARNING')
    path, img_dir = os.path.join(tmp, 'eval_gt.json'), os.path.join(tmp, 'eval_images')
    write_coco(path, img_dir, num_images * BOXES_PER_IMAGE, seed=1, polygons=False)
    rng = np.random.default_rng(2)
    samples = []
    for i in range(num_images):
        xy = rng.random((dets_per_image, 2)) * [560, 400]
        wh = rng.uniform(4, 80, (dets_per_image, 2))
        samples.append({'img_id': i + 1, 'img_path': f'{i:08d}.jpg', 'ori_shape': (480, 640),
                        'pred_instances': {'bboxes': np.concatenate([xy, xy + wh], 1),
                                           'scores': rng.random(dets_per_image),
                                           'labels': rng.integers(0, NUM_CATEGORIES, dets_per_image)}})
    cat_ids = list(range(1, NUM_CATEGORIES + 1))
    dets = [{'image_id': s['img_id'], 'bbox': b, 'score': float(sc), 'category_id': cat_ids[int(lb)]}
            for s in samples for b, sc, lb in zip(xyxy_to_xywh(s['pred_instances']['bboxes']).tolist(),
                                                  s['pred_instances']['scores'], s['pred_instances']['labels'])]

    def bare() -> float:
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            gt = COCO(path)
            ev = COCOeval(gt, gt.loadRes(dets), 'bbox')
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        return time.perf_counter() - start

    def metric() -> tuple[float, float]:
        m = CocoMetric(ann_file=path, classwise=True)
        m.dataset_meta = {'classes': [f'class{c}' for c in cat_ids], 'cat_ids': cat_ids}
        start = time.perf_counter()
        for k in range(0, len(samples), 8):
            m.process({}, samples[k:k + 8])
        processed = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            m.compute_metrics(m.results)
        return time.perf_counter() - start, processed - start

    gc.collect()
    t_bare, (t_metric, t_process) = bare(), metric()
    for _ in range(repeats - 1):  # best of ``repeats`` each, alternated
        t_bare = min(t_bare, bare())
        t2, p2 = metric()
        t_metric, t_process = min(t_metric, t2), min(t_process, p2)
    return {'images': num_images, 'detections': num_images * dets_per_image, 'cocoeval_s': t_bare,
            'metric_s': t_metric, 'metric_process_s': t_process, 'ratio': t_metric / t_bare}


def seg_row(num_maps: int, size: int = 128, num_classes: int = 19) -> dict:
    """IoUMetric over ``num_maps`` label maps: seconds per map, matrices kept."""
    import torch

    from segmentation.evaluation.iou_metric import IoUMetric

    metric = IoUMetric()
    metric.dataset_meta = {'classes': [f'c{i}' for i in range(num_classes)]}
    gen = torch.Generator().manual_seed(0)
    gt = torch.randint(0, num_classes, (1, size, size), generator=gen)
    pred = torch.randint(0, num_classes, (1, size, size), generator=gen)
    sample = {'pred_sem_seg': {'data': pred}, 'gt_sem_seg': {'data': gt}}
    kept = 0
    start = time.perf_counter()
    for _ in range(num_maps):
        metric.process({}, [sample])
        kept = max(kept, len(metric.results))
    seconds = time.perf_counter() - start
    metric.evaluate(num_maps)
    return {'maps': num_maps, 'size': size, 'ms_per_map': seconds / num_maps * 1000, 'matrices_kept': kept}


def video_rows(lines: int, videos: int, tmp: str) -> list[dict]:
    rows = []
    if lines:
        path = os.path.join(tmp, 'videos.txt')
        write_video_list(path, lines)
        bare, ours = _run_child('lines', path), _run_child('video_list', path)
        rows.append({'what': f'video list, {lines} lines', 'bare': 'lines split', 'bare_s': bare['seconds'],
                     'bare_peak_mb': bare['peak_mb'], 'oars_s': ours['seconds'], 'oars_peak_mb': ours['peak_mb'],
                     'oars_retained_mb': ours['retained_mb']})
    if videos:
        path = os.path.join(tmp, 'activitynet.json')
        write_activitynet(path, videos)
        bare, ours = _run_child('json', path), _run_child('activitynet', path)
        rows.append({'what': f'ActivityNet json, {videos} videos', 'bare': 'json.load', 'bare_s': bare['seconds'],
                     'bare_peak_mb': bare['peak_mb'], 'oars_s': ours['seconds'], 'oars_peak_mb': ours['peak_mb'],
                     'oars_retained_mb': ours['retained_mb']})
    return rows


def print_tables(result: dict) -> None:
    print(f"\ndata_scale: {result['date']}, {result['machine']}, {result['load']}\n")
    print('| boxes | file MB | pycocotools s | oars s | time ratio | pycocotools peak MB | oars peak MB | '
          'memory ratio | oars retained MB | index MB | worker USS MB (4) | idle worker USS MB |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for r in result['coco']:
        uss = ', '.join(f'{v:.1f}' for v in r.get('worker_uss_mb', [])) or '-'
        print(f"| {r['boxes']} | {r['file_mb']:.1f} | {r['pycocotools_s']:.2f} | {r['oars_s']:.2f} | "
              f"{r['time_ratio']:.2f} | {r['pycocotools_peak_mb']:.0f} | {r['oars_peak_mb']:.0f} | "
              f"{r['memory_ratio']:.2f} | {r['oars_retained_mb']:.0f} | {r['index_mb']:.1f} | {uss} | "
              f"{r.get('idle_worker_uss_mb', float('nan')):.1f} |")
    exp = result['exponents']
    if exp['oars'] is not None:
        print(f"\nfitted exponent of time vs boxes: oars {exp['oars']:.2f}, pycocotools {exp['pycocotools']:.2f} "
              '(1 = linear)')
    if result.get('eval'):
        e = result['eval']
        print(f"\nCOCO evaluation, {e['images']} images x {e['detections'] // e['images']} detections: COCOeval alone "
              f"{e['cocoeval_s']:.2f} s, CocoMetric {e['metric_s']:.2f} s (of which process() "
              f"{e['metric_process_s']:.2f} s), ratio {e['ratio']:.2f} (goal <= 1.1)")
    if result.get('seg'):
        s = result['seg']
        print(f"mIoU: {s['maps']} label maps of {s['size']}x{s['size']}: {s['ms_per_map']:.2f} ms per map, at most "
              f"{s['matrices_kept']} summed matrix kept")
    if result.get('video'):
        print('\n| annotations | bare read | bare s | oars s | bare peak MB | oars peak MB | oars retained MB |')
        print('|---|---|---|---|---|---|---|')
        for r in result['video']:
            print(f"| {r['what']} | {r['bare']} | {r['bare_s']:.2f} | {r['oars_s']:.2f} | {r['bare_peak_mb']:.0f} | "
                  f"{r['oars_peak_mb']:.0f} | {r['oars_retained_mb']:.0f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--boxes', type=int, nargs='*', default=[10_000, 100_000, 1_000_000],
                        help='sizes of the synthetic COCO files (boxes)')
    parser.add_argument('--no-workers', action='store_true', help='skip the 4-worker memory measure')
    parser.add_argument('--eval-images', type=int, default=5000, help='images of the COCO evaluation (0: skip)')
    parser.add_argument('--eval-repeats', type=int, default=1, help='best of this many runs of each evaluation')
    parser.add_argument('--seg-maps', type=int, default=5000, help='label maps of the mIoU part (0: skip)')
    parser.add_argument('--video-list', type=int, default=650_000, help='lines of the video list (0: skip)')
    parser.add_argument('--activitynet', type=int, default=20_000, help='videos of the ActivityNet json (0: skip)')
    parser.add_argument('--json', default=None, help='also write the results to this json file')
    parser.add_argument('--child', default=None, help=argparse.SUPPRESS)
    parser.add_argument('--file', default='', help=argparse.SUPPRESS)
    parser.add_argument('--img-dir', default='', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if any(n < 1 for n in args.boxes):
        parser.error(f'--boxes must be positive numbers of boxes, got {args.boxes}')
    result = {'date': time.strftime('%Y-%m-%d %H:%M'), 'load': load_average(),
              'machine': f'{platform.processor() or platform.machine()}, {os.cpu_count()} cores, '
                         f'Python {platform.python_version()}, numpy {np.__version__}'}
    with tempfile.TemporaryDirectory(prefix='oars-data-scale-') as tmp:
        result['coco'] = coco_rows(sorted(args.boxes), tmp, workers=not args.no_workers)
        boxes = [r['boxes'] for r in result['coco']]
        result['exponents'] = {'oars': exponent(boxes, [r['oars_s'] for r in result['coco']]),
                               'pycocotools': exponent(boxes, [r['pycocotools_s'] for r in result['coco']])}
        result['eval'] = eval_rows(args.eval_images, tmp, max(1, args.eval_repeats)) if args.eval_images else None
        result['seg'] = seg_row(args.seg_maps) if args.seg_maps else None
        result['video'] = video_rows(args.video_list, args.activitynet, tmp)
    print_tables(result)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
