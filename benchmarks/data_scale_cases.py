"""The synthetic annotation files and the memory readings of benchmarks/data_scale.py (also used by the tests that
build large COCO files): kept apart so that the benchmark's script holds the measuring and the tables only."""

from __future__ import annotations

import json
import os
import resource

import numpy as np

BOXES_PER_IMAGE = 8
NUM_CATEGORIES = 80


# ---- synthetic files ---------------------------------------------------------------------------------------------
def write_coco(path: str, img_dir: str, num_boxes: int, seed: int = 0, polygons: bool = True) -> None:
    """A COCO instances file of ``num_boxes`` boxes on ``num_boxes / 8`` 640x480 images (empty image files)."""
    rng = np.random.default_rng(seed)
    num_images = max(1, num_boxes // BOXES_PER_IMAGE)
    os.makedirs(img_dir, exist_ok=True)
    images = []
    for i in range(num_images):
        name = f'{i:08d}.jpg'
        open(os.path.join(img_dir, name), 'wb').close()
        images.append({'id': i + 1, 'file_name': name, 'height': 480, 'width': 640})
    xy = (rng.random((num_boxes, 2)) * [560, 400]).round(2)
    wh = rng.uniform(4, 80, (num_boxes, 2)).round(2)
    img_of = rng.integers(1, num_images + 1, num_boxes).tolist()
    cat_of = rng.integers(1, NUM_CATEGORIES + 1, num_boxes).tolist()
    crowd = (rng.random(num_boxes) < 0.03).tolist()
    anns = []
    for k, ((x, y), (w, h)) in enumerate(zip(xy.tolist(), wh.tolist())):
        ann = {'id': k + 1, 'image_id': img_of[k], 'category_id': cat_of[k], 'bbox': [x, y, w, h],
               'area': round(w * h, 2), 'iscrowd': int(crowd[k])}
        if polygons:
            ann['segmentation'] = [[x, y, x + w, y, x + w, y + h, x, y + h]]
        anns.append(ann)
    cats = [{'id': c, 'name': f'class{c}', 'supercategory': 'thing'} for c in range(1, NUM_CATEGORIES + 1)]
    with open(path, 'w') as f:
        json.dump({'images': images, 'annotations': anns, 'categories': cats}, f)


def write_video_list(path: str, lines: int, num_classes: int = 400) -> None:
    """A Kinetics-style list: ``class/video_000001.mp4 label``."""
    with open(path, 'w') as f:
        for i in range(lines):
            label = i % num_classes
            f.write(f'class{label:03d}/video_{i:07d}.mp4 {label}\n')


def write_activitynet(path: str, videos: int, num_classes: int = 200, seed: int = 0) -> None:
    """An ActivityNet v1.3-style json: ``database`` of ``videos`` videos, 1-3 segments each."""
    rng = np.random.default_rng(seed)
    db = {}
    for i in range(videos):
        duration = float(rng.uniform(30, 200))
        anns = []
        for _ in range(int(rng.integers(1, 4))):
            start = float(rng.uniform(0, duration - 5))
            anns.append({'segment': [round(start, 2), round(min(duration, start + rng.uniform(1, 30)), 2)],
                         'label': f'action{int(rng.integers(num_classes))}'})
        db[f'v_{i:07d}'] = {'duration': round(duration, 2), 'subset': 'training', 'annotations': anns}
    with open(path, 'w') as f:
        json.dump({'version': 'VERSION 1.3', 'database': db}, f)


# ---- memory of this process --------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2 ** 20


def _peak_mb() -> float:
    """Peak RSS of this process (VmHWM: the high-water mark of its own memory map; ``ru_maxrss`` would carry the
    parent's peak over ``exec``), ``ru_maxrss`` where /proc is missing."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _smaps() -> dict[str, float]:
    """``{'uss', 'pss'}`` MB of this process (private pages, proportional share), from smaps_rollup."""
    out = {'uss': 0.0, 'pss': 0.0}
    try:
        with open('/proc/self/smaps_rollup') as f:
            for line in f:
                key, _, rest = line.partition(':')
                kb = float(rest.split()[0]) if rest.split() else 0.0
                if key in ('Private_Clean', 'Private_Dirty'):
                    out['uss'] += kb / 1024
                elif key == 'Pss':
                    out['pss'] += kb / 1024
    except OSError:
        pass
    return out


def load_average() -> str:
    """The machine's load average, printed beside a measurement (the benchmarks run on shared cores)."""
    try:
        one, five, _ = os.getloadavg()
        return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"
    except OSError:
        return "load average unknown"
