"""tools/convert.py cvat2coco: CVAT for images 1.1 XML and CVAT COCO 1.0 json -> COCO json that CocoDataset reads;
hand-computed boxes, areas and segmentations; every bad file names the file and the XML line or json entry."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from demo_utils import ROOT
from PIL import Image

from detection.datasets import CocoDataset
from detection.datasets.cvat import coco_json_to_coco, cvat_to_coco, image_size, xml_to_coco
from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.output_paths import OutputPathError

META = """<?xml version="1.0" encoding="utf-8"?>
<annotations>
  <version>1.1</version>
  <meta>
    <task>
      <labels>
        <label><name>car</name><color>#ff0000</color><attributes/></label>
        <label><name>person</name></label>
        <label><name>tree</name></label>
      </labels>
    </task>
  </meta>
"""
IMAGES = """  <image id="0" name="a.png" width="20" height="10">
    <box label="car" occluded="0" source="manual" xtl="1" ytl="2" xbr="5" ybr="6" z_order="0">
      <attribute name="colour">red</attribute>
    </box>
    <polygon label="person" occluded="1" points="10,1;14,1;14,5" z_order="0"/>
    <polyline label="car" points="0,0;1,1"/>
    <points label="car" points="3,3"/>
    <box label="car" occluded="0" xtl="18" ytl="8" xbr="25" ybr="12"/>
  </image>
  <image id="1" name="sub/b.png" width="8" height="6">
    <tag label="tree"/>
  </image>
</annotations>
"""


def write(path, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    return str(path)


def make_images(folder) -> None:
    os.makedirs(folder / 'sub', exist_ok=True)
    Image.new('RGB', (20, 10)).save(folder / 'a.png')
    Image.new('RGB', (8, 6)).save(folder / 'sub' / 'b.png')


EXPECTED_XML_ANNOTATIONS = [
    dict(id=1, image_id=1, category_id=1, bbox=[1.0, 2.0, 4.0, 4.0], area=16.0, iscrowd=0, segmentation=[],
         attributes={'occluded': False, 'colour': 'red'}),
    # the triangle (10,1) (14,1) (14,5): bbox of its extent, area 4 * 4 / 2
    dict(id=2, image_id=1, category_id=2, bbox=[10.0, 1.0, 4.0, 4.0], area=8.0, iscrowd=0,
         segmentation=[[10.0, 1.0, 14.0, 1.0, 14.0, 5.0]], attributes={'occluded': True}),
    # (18, 8)-(25, 12) clipped to the 20 x 10 image
    dict(id=3, image_id=1, category_id=1, bbox=[18.0, 8.0, 2.0, 2.0], area=4.0, iscrowd=0, segmentation=[],
         attributes={'occluded': False}),
]


@pytest.mark.slow  # a subprocess that imports the tasks (5-8 s of CPU)
def test_cli_converts_cvat_xml_and_coco_dataset_reads_it(tmp_path):
    write(tmp_path / 'export' / 'annotations.xml', META + IMAGES)
    make_images(tmp_path / 'export' / 'images')
    cmd = [sys.executable, os.path.join(ROOT, 'tools', 'convert.py'), 'cvat2coco', '--input',
           'export/annotations.xml', '--img-dir', 'export/images', '--out', 'ann.json']
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=ROOT))  # this checkout's tasks
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote ann.json: 2 images, 3 annotations, 3 categories ['car', 'person', 'tree']" in proc.stdout
    assert 'left out or changed: clipped to the image: 1, points: 1, polyline: 1, tag: 1' in proc.stdout
    with open(tmp_path / 'ann.json') as f:
        coco = json.load(f)
    assert coco['annotations'] == EXPECTED_XML_ANNOTATIONS
    assert coco['images'] == [dict(id=1, file_name='a.png', width=20, height=10),
                              dict(id=2, file_name='sub/b.png', width=8, height=6)]
    ds = CocoDataset(data_root=str(tmp_path), ann_file='ann.json', data_prefix=dict(img='export/images'),
                     classes=['car', 'person'], test_mode=True, serialize_data=False)
    assert len(ds) == 2
    insts = ds.get_data_info(0)['instances']
    assert [i['bbox'] for i in insts] == [[1, 2, 5, 6], [10, 1, 14, 5], [18, 8, 20, 10]]
    assert [i['bbox_label'] for i in insts] == [0, 1, 0]


def test_xml_classes_select_and_reorder(tmp_path):
    path = write(tmp_path / 'annotations.xml', META + IMAGES)
    coco, counts = xml_to_coco(path, classes=['person', 'car'])
    assert [c['name'] for c in coco['categories']] == ['person', 'car']
    assert [a['category_id'] for a in coco['annotations']] == [2, 1, 2]
    coco, counts = xml_to_coco(path, classes=['tree'])
    assert coco['annotations'] == [] and counts['label not in --classes'] == 3
    with pytest.raises(DataError, match=r"--classes \['bike'\] are not labels of .*annotations\.xml; its labels are "
                                        r"\['car', 'person', 'tree'\]"):
        xml_to_coco(path, classes=['car', 'bike'])


def image_xml(body: str, attrs: str = 'name="a.png" width="20" height="10"') -> str:
    return META + f'  <image id="0" {attrs}>\n{body}\n  </image>\n</annotations>\n'


@pytest.mark.parametrize('text,pattern', [
    (META + '  <image id="0" name="a.png" width="20" height="10">\n  </imag>\n</annotations>',
     r'annotations\.xml line 14 column \d+: not well-formed XML \(mismatched tag\)'),
    ('<?xml version="1.0"?>\n<dataset/>\n', r'annotations\.xml line 2: root element <dataset>; expected <annotations>'),
    (META + '  <track id="0" label="car"/>\n</annotations>\n', r'line 13: <track> elements: this is a "CVAT for video'),
    (META + '</annotations>\n', r'annotations\.xml: no <image> elements'),
    (image_xml('', 'width="20" height="10"'), r'annotations\.xml line 13: <image> has no name attribute'),
    (image_xml('', 'name="a.png" width="20" height="0"'), r'line 13: attribute height is \'0\'; expected a positive'),
    (image_xml('', 'name="a.png" height="10"'), r'line 13: attribute width is missing; expected a finite number'),
    (META + '<image name="a.png" width="2" height="2"/>\n<image name="a.png" width="2" height="2"/>\n</annotations>',
     r"line 14: image name 'a.png' appears again \(first at line 13\)"),
    (image_xml('<box xtl="1" ytl="2" xbr="5" ybr="6"/>'), r'line 14: <box> has no label attribute'),
    (image_xml('<box label="car" xtl="1" ytl="two" xbr="5" ybr="6"/>'),
     r"line 14: attribute ytl is 'two'; expected a finite number"),
    (image_xml('\n<box label="car" xtl="5" ytl="2" xbr="5" ybr="6"/>'),
     r'line 15: box \(car\) xtl=5 ytl=2 xbr=5 ybr=6 has no area; expected xbr > xtl'),
    (image_xml('<polygon label="car" points="1,2;3,4"/>'),
     r"line 14: <polygon> \(car\): polygon has 2 point\(s\) '1,2;3,4'; expected at least 3"),
    (image_xml('<polygon label="car" points="1,2;3;5,6"/>'), r'line 14: <polygon> \(car\): points .* are not'),
    (image_xml('<polygon label="car" points="1,2;nan,4;5,6"/>'), r'line 14: <polygon> \(car\): points .* are not'),
    (image_xml('<box label="bike" xtl="1" ytl="2" xbr="5" ybr="6"/>'),
     r"line 14: label 'bike' is not one of the labels in <meta>"),
    (image_xml('<box label="car" xtl="30" ytl="2" xbr="35" ybr="6"/>'),
     r'line 14: box \[x1, y1, x2, y2\] = \[30, 2, 35, 6\] has no area inside the 20x10 \(WxH\) image'),
    (image_xml('<polygon label="car" points="30,1;34,1;34,5"/>'), r'line 14: box .* has no area inside'),
])
def test_bad_xml_names_the_file_and_line(tmp_path, text, pattern):
    path = write(tmp_path / 'annotations.xml', text)
    with pytest.raises(DataError, match=pattern):
        xml_to_coco(path)


def coco_export() -> dict:
    """What CVAT's COCO 1.0 export writes (categories 1..3, attributes, one polygon, one RLE crowd)."""
    return {
        'licenses': [{'name': '', 'id': 0, 'url': ''}], 'info': {'description': 'cvat'},
        'categories': [{'id': 1, 'name': 'car', 'supercategory': ''}, {'id': 2, 'name': 'person', 'supercategory': ''},
                       {'id': 3, 'name': 'tree', 'supercategory': ''}],
        'images': [{'id': 1, 'width': 20, 'height': 10, 'file_name': 'a.png', 'license': 0},
                   {'id': 2, 'width': 8, 'height': 6, 'file_name': 'sub/b.png', 'license': 0}],
        'annotations': [
            {'id': 1, 'image_id': 1, 'category_id': 2, 'segmentation': [[10.0, 1.0, 14.0, 1.0, 14.0, 5.0]],
             'area': 8.0, 'bbox': [10.0, 1.0, 4.0, 4.0], 'iscrowd': 0, 'attributes': {'occluded': True}},
            {'id': 2, 'image_id': 1, 'category_id': 1, 'segmentation': [], 'area': 0,
             'bbox': [17.0, -1.0, 5.0, 3.0], 'iscrowd': 0, 'attributes': {'occluded': False}},
            {'id': 3, 'image_id': 2, 'category_id': 3, 'segmentation': {'size': [6, 8], 'counts': [0, 48]},
             'area': 48.0, 'bbox': [0.0, 0.0, 8.0, 6.0], 'iscrowd': 1}]}


def test_coco_export_is_checked_renumbered_and_kept(tmp_path):
    path = write(tmp_path / 'annotations' / 'instances_default.json', json.dumps(coco_export()))
    coco, counts = coco_json_to_coco(path, classes=['person', 'car'])
    assert coco['categories'] == [{'id': 1, 'name': 'person', 'supercategory': ''},
                                  {'id': 2, 'name': 'car', 'supercategory': ''}]
    first, second = coco['annotations']
    assert first == {**coco_export()['annotations'][0], 'category_id': 1}  # segmentation and attributes kept
    # (17, -1, 5, 3) clipped to the 20 x 10 image: x 17..20, y 0..2; the area 0 recomputed from the box
    assert second['bbox'] == [17.0, 0.0, 3.0, 2.0] and second['area'] == 6.0 and second['category_id'] == 2
    assert counts == {'category not in --classes': 1, 'clipped to the image': 1}
    assert coco['images'] == coco_export()['images'] and coco['licenses'] == coco_export()['licenses']
    everything, _ = coco_json_to_coco(path)
    assert [c['name'] for c in everything['categories']] == ['car', 'person', 'tree']
    assert everything['annotations'][2]['segmentation'] == {'size': [6, 8], 'counts': [0, 48]}
    write(tmp_path / 'out.json', json.dumps(coco))  # what the CLI writes (write_coco_json: the same json.dumps)
    make_images(tmp_path / 'images')
    ds = CocoDataset(ann_file=str(tmp_path / 'out.json'), data_prefix=dict(img=str(tmp_path / 'images')),
                     classes=['person', 'car'], test_mode=True, serialize_data=False)
    insts = ds.get_data_info(0)['instances']
    assert [(i['bbox'], i['bbox_label']) for i in insts] == [([10, 1, 14, 5], 0), ([17, 0, 20, 2], 1)]


def broken(change) -> dict:
    doc = coco_export()
    change(doc)
    return doc


@pytest.mark.parametrize('doc,pattern', [
    (broken(lambda d: d['annotations'][1].update(image_id=9)),
     r'instances_default\.json: annotations\[1\] \(id 2\): image_id 9 is not the id of an image'),
    (broken(lambda d: d['annotations'][0].update(category_id=7)),
     r'annotations\[0\] \(id 1\): category_id 7 is not the id of a category'),
    (broken(lambda d: d['annotations'][1].update(bbox=[1, 2, 3])), r'annotations\[1\] \(id 2\): bbox is \[1, 2, 3\]'),
    (broken(lambda d: d['annotations'][1].update(bbox=[1, 2, float('nan'), 3])), r'annotations\[1\] .*: bbox is'),
    (broken(lambda d: d['annotations'][1].update(bbox=[25, 2, 3, 3])), r'annotations\[1\] .*: box .* has no area'),
    (broken(lambda d: d['annotations'][0].update(segmentation=[[1, 2, 3, 4]])),
     r'annotations\[0\] \(id 1\): segmentation polygon 0 is \[1, 2, 3, 4\]; expected .* at least 3 points'),
    (broken(lambda d: d['annotations'][0].update(segmentation=[[10, 1, float('nan'), 1, 14, 5]])),
     r'annotations\[0\] \(id 1\): segmentation polygon 0 is \[10, 1, nan, 1, 14, 5\]'),  # pycocotools: segfault
    (broken(lambda d: d['annotations'][2].update(segmentation={'size': [10, 20], 'counts': [0, 200]})),
     r"annotations\[2\] \(id 3\): RLE 'size' \[height, width\] = \[10, 20\] but the image is 8x6"),
    (broken(lambda d: d['images'][1].pop('height')), r"images\[1\] \(id 2\): 'height' is None; expected a positive"),
    (broken(lambda d: d['categories'][2].update(name='car')), r"categories \['car'\] appear more than once"),
    (broken(lambda d: d['annotations'][2].update(id=1)),  # load_coco's unique-id check
     r'instances_default\.json: annotations\[0\] and annotations\[2\] both have id 1'),
    (broken(lambda d: d.pop('categories')), r"has no 'categories' list"),
])
def test_bad_coco_export_names_the_entry(tmp_path, doc, pattern):
    path = write(tmp_path / 'annotations' / 'instances_default.json', json.dumps(doc))
    with pytest.raises(DataError, match=pattern):
        coco_json_to_coco(path)


def test_image_folder_check_sizes_exif_and_missing(tmp_path):
    path = write(tmp_path / 'annotations.xml', META + IMAGES)
    make_images(tmp_path / 'images')
    coco, _ = cvat_to_coco(path, img_dir=str(tmp_path / 'images'))
    assert len(coco['images']) == 2
    exif = Image.Exif()
    exif[0x0112] = 6  # stored 6 x 8, shown turned by 90 degrees: 8 x 6, what CVAT showed and oars reads
    Image.new('RGB', (6, 8)).save(tmp_path / 'images' / 'sub' / 'b.png', exif=exif)
    assert image_size(str(tmp_path / 'images' / 'sub' / 'b.png')) == (8, 6)
    cvat_to_coco(path, img_dir=str(tmp_path / 'images'))
    Image.new('RGB', (21, 10)).save(tmp_path / 'images' / 'a.png')
    with pytest.raises(DataError, match=r'1 of 2 image\(s\) differ from .*annotations\.xml .*a\.png is 21x10 but '
                                        r'.* says 20x10'):
        cvat_to_coco(path, img_dir=str(tmp_path / 'images'))
    os.remove(tmp_path / 'images' / 'a.png')
    with pytest.raises(DataFileNotFoundError, match=r'1 of 2 image\(s\) of .* not found under --img-dir .*a\.png'):
        cvat_to_coco(path, img_dir=str(tmp_path / 'images'))
    with pytest.raises(DataError, match=r'expected the annotations\.xml of a "CVAT for images 1\.1" export'):
        cvat_to_coco(write(tmp_path / 'export.zip', 'PK'))


def test_existing_output_is_kept_unless_overwrite(tmp_path):
    """Through tools/convert.py's main (in-process)."""
    spec = importlib.util.spec_from_file_location('convert_tool', os.path.join(ROOT, 'tools', 'convert.py'))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    src = write(tmp_path / 'annotations.xml', META + IMAGES)
    out = tmp_path / 'ann.json'
    out.write_text('precious')
    argv = ['cvat2coco', '--input', src, '--out', str(out)]
    with pytest.raises(OutputPathError, match=r'ann\.json exists already; nothing was written \(pass --overwrite'):
        tool.main(argv)
    assert out.read_text() == 'precious'
    with pytest.raises(OutputPathError, match='is an input of this conversion'):
        tool.main(['cvat2coco', '--input', src, '--out', src, '--overwrite'])
    tool.main([*argv, '--overwrite'])
    assert json.loads(out.read_text())['annotations'] == EXPECTED_XML_ANNOTATIONS
