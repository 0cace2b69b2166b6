"""``oars-infer`` never loses an input or an output, whatever the input form and the mode:

1. ``-i 'imgs/*.png' -o imgs`` (a glob, or a ``.txt`` list) is refused like ``-i imgs -o imgs``, in plain and
   ``--ray`` mode, before anything is read (it once replaced the photos by label maps);
2. two inputs never write the same output file: ``twins/a/x.png`` and ``twins/b/x.png`` (``--ray`` over
   ``twins/**``) keep their subfolders, ``x.png`` beside ``x.jpg`` get their suffix appended, a collision left is
   refused naming both inputs;
3. ``--ray`` resumes on the resolved path: ``-i ./respell``, ``-i respell``, ``a/../respell``, a link, an absolute
   path are one input (it once predicted everything twice).

The rules are pure functions (:func:`oars_deploy.output_paths.check_output_folder`, :func:`output_stems`,
:mod:`oars_deploy.serve.ray_data`'s resume keys), tested here without Ray; one ``--ray`` run joins the session's Ray
instance (the ``server`` fixture) for the three together, run as a user runs it (relative paths, its own folder).
"""

from __future__ import annotations

import json
import os
import os.path as osp
import re
import subprocess
import sys

import cv2
import numpy as np
import pytest
from file_digests import digest
from serve_cases import write_images, write_tiny_segmentor

from oars_deploy.cli import run as infer_main
from oars_deploy.output_paths import OutputPathError, check_output_folder, output_stems
from oars_deploy.predictors.semantic_labels import SemanticLabels
from oars_deploy.records import RESULTS_FILE, read_results
from oars_deploy.serve.ray_data import RESOLVED_KEY, done_inputs, plan_inputs, resume_key


@pytest.fixture()
def user(tmp_path, monkeypatch):
    """A user's folder (the cwd): ``imgs/`` with two photos, ``lists/l.txt`` naming them, a tiny export."""
    monkeypatch.chdir(tmp_path)
    write_images("imgs", [(20, 30), (16, 16)], seed=1)
    os.makedirs("lists")
    with open("lists/l.txt", "w") as f:
        f.write("# my photos\n../imgs/img0.png\n\n../imgs/img1.png\n")
    write_tiny_segmentor("export")
    return tmp_path


# ----------------------------------------------------------------------------- 1. a glob or a list: the folder rule
@pytest.mark.parametrize("output, relation", [("imgs", "is"), ("imgs/sub", "is inside"), (".", "holds")])
@pytest.mark.parametrize("spec, form", [("imgs/*.png", "(-i 'imgs/*.png' (a glob pattern))"),
                                        ("lists/l.txt", "(-i lists/l.txt (a list of files))")])
def test_output_folder_rule_covers_the_files_of_a_glob_or_a_list(user, spec, form, output, relation):
    with pytest.raises(OutputPathError) as err:
        check_output_folder(output, spec)
    message = str(err.value)
    assert message.startswith(f"-o {output} {relation} the folder of the input file "), message
    assert "img0.png" in message and form in message and "choose an output folder outside" in message
    assert check_output_folder("out", spec) == "out"  # beside the inputs: fine
    assert check_output_folder("imgs", "nothing/*.png") == "imgs"  # a pattern matching nothing protects nothing


@pytest.mark.parametrize("mode", [[], ["--ray"]], ids=["plain", "ray"])
def test_cli_refuses_a_glob_into_its_own_folder_before_reading_anything(user, mode):
    before = digest(user / "imgs")
    for spec in ("imgs/*.png", "lists/l.txt"):
        with pytest.raises(OutputPathError, match=r"-o imgs is the folder of the input file (lists/../)?imgs/img0"):
            infer_main(["--model-dir", "export", "-i", spec, "-o", "imgs", *mode])
    assert digest(user / "imgs") == before


# ----------------------------------------------------------------------------- 2. unique output names
def test_output_stems_keep_the_path_below_the_common_folder():
    twins = ["twins/a/x.png", "twins/b/x.png", "twins/b/c/y.png"]
    assert output_stems(twins) == {"twins/a/x.png": "a/x", "twins/b/x.png": "b/x", "twins/b/c/y.png": "b/c/y"}
    assert output_stems(["imgs/x.png", "imgs/y.jpg"]) == {"imgs/x.png": "x", "imgs/y.jpg": "y"}
    assert output_stems(["one/x.png"]) == {"one/x.png": "x"}
    assert output_stems(["a/x.png", "./a/x.png", "a/x.png"]) == {"a/x.png": "x", "./a/x.png": "x"}  # one file


def test_output_stems_of_files_differing_only_in_their_suffix():
    names = SemanticLabels.output_names
    assert output_stems(["f/x.png", "f/x.jpg", "f/y.png"], names) == {"f/x.png": "x_png", "f/x.jpg": "x_jpg",
                                                                      "f/y.png": "y"}
    with pytest.raises(OutputPathError, match=r"-i: the inputs f/x\.png and f/x_png\.bmp would both be written as "
                                              r"x_png_vis\.png"):
        output_stems(["f/x.png", "f/x.jpg", "f/x_png.bmp"], names)
    with pytest.raises(OutputPathError, match=r"the inputs f/x_vis\.png and f/x\.png would both be written as "
                                              r"x_vis\.png"):
        output_stems(["f/x_vis.png", "f/x.png"], names)
    assert output_stems(["f/x_vis.png", "f/x.png"], ("{stem}_vis.png",))  # a detector writes no <stem>.png
    with pytest.raises(OutputPathError, match=r"a/x\.png and b/x\.png would both be written as x"):
        output_stems(["a/x.png", "b/x.png"], ("{stem}",), nested=False)  # a plug-in naming files by stem only


def test_folder_with_same_stems_writes_one_label_map_per_image(user):
    """Plain mode over a folder: x.png and x.jpg once wrote one x.png label map, the second over the first."""
    os.makedirs("mix")
    cv2.imwrite("mix/x.png", np.zeros((10, 14, 3), np.uint8))
    cv2.imwrite("mix/x.jpg", np.full((12, 12, 3), 255, np.uint8))
    infer_main(["--model-dir", "export", "-i", "mix", "-o", "out"])
    assert sorted(os.listdir("out")) == [RESULTS_FILE, "x_jpg.png", "x_jpg_vis.png", "x_png.png", "x_png_vis.png"]
    for record in read_results("out"):
        h, w = record["image_size"]
        assert cv2.imread(osp.join("out", record["label_png"]), cv2.IMREAD_UNCHANGED).shape[:2] == (h, w)
        assert record["label_png"] == osp.basename(record["input"]).replace(".", "_") + ".png"


# ----------------------------------------------------------------------------- 3. resume on the resolved path
def test_resume_key_is_the_resolved_path_whatever_the_spelling(user):
    os.symlink("imgs", "link")
    spellings = ["imgs/img0.png", "./imgs/img0.png", "imgs/../imgs/img0.png", "link/img0.png",
                 str(user / "imgs" / "img0.png")]
    assert {resume_key(p) for p in spellings} == {osp.realpath(user / "imgs" / "img0.png")}
    os.makedirs("out")
    with open("out/results.jsonl", "w") as f:  # one record of this version (the key), one of an older run (none)
        f.write(json.dumps({"input": "x/img0.png", RESOLVED_KEY: resume_key("imgs/img0.png")}) + "\n")
        f.write(json.dumps({"input": "./imgs/img1.png"}) + "\n")
    done = done_inputs("out")
    keys, todo, skipped = plan_inputs(["link/img0.png", "imgs/img1.png", "imgs/../imgs/img1.png", "imgs/new.png"],
                                      done)
    assert todo == ["imgs/new.png"] and skipped == 2
    assert list(keys) == ["link/img0.png", "imgs/img1.png", "imgs/new.png"]  # one file listed twice: once


# ----------------------------------------------------------------------------- the three through --ray
def test_ray_run_keeps_twins_apart_and_resumes_any_spelling(server, tmp_path):
    """``oars-infer --ray`` as a user runs it, joining the session's Ray instance: twins/a/x.png and twins/b/x.png
    keep their own label maps and records; re-runs spelled ``./twins``, through a link or absolutely predict
    nothing again; ``-o twins`` is refused."""
    write_images(str(tmp_path / "twins" / "a"), [(20, 30), (16, 16)], seed=2)
    write_images(str(tmp_path / "twins" / "b"), [(24, 18)], seed=3)  # b/img0.png: a's namesake, another picture
    os.symlink("twins", tmp_path / "tlink")
    address = re.search(r"Ray address (\S+)", open(server.log).read()).group(1)

    def oars_infer(spec: str, out: str = "out") -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "oars_deploy.cli", "--model-dir", server.model_dir, "-i", spec, "-o", out,
               "--ray", "--ray-address", address, "--num-workers", "1", "--worker-cpus", "0.5"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=str(tmp_path))

    before = digest(tmp_path / "twins")
    refused = oars_infer("twins/**/*.png", "twins")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert "-o twins holds the folder of the input file twins/a/img0.png (-i 'twins/**/*.png' (a glob pattern))" \
        in refused.stderr
    first = oars_infer("twins/**/*.png")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "wrote 3 records" in first.stdout
    records = {r["input"]: r for r in read_results(str(tmp_path / "out"))}
    assert sorted(records) == ["twins/a/img0.png", "twins/a/img1.png", "twins/b/img0.png"]
    for spelled, record in records.items():
        assert record["label_png"] == osp.relpath(spelled, "twins")[:-4] + ".png"  # a/img0.png, b/img0.png
        assert record[RESOLVED_KEY] == osp.realpath(tmp_path / spelled)
        label = cv2.imread(str(tmp_path / "out" / record["label_png"]), cv2.IMREAD_UNCHANGED)
        assert label.shape[:2] == tuple(record["image_size"])  # each record matches the file on disk
        assert (tmp_path / "out" / record["label_png"].replace(".png", "_vis.png")).is_file()
    for spec in ("./twins/**/*.png", "twins/a/../**/*.png", "tlink/**/*.png", str(tmp_path / "twins/**/*.png")):
        again = oars_infer(spec)
        assert again.returncode == 0 and "wrote 0 records" in again.stdout and "(3 done before" in again.stdout, \
            (spec, again.stdout, again.stderr[-2000:])
    assert len(read_results(str(tmp_path / "out"))) == 3
    assert digest(tmp_path / "twins") == before


def test_a_plugin_naming_files_itself_gets_its_collisions_refused():
    """A plug-in written before ``write`` took the output name (the test suite's extra task has one) names files by
    the input's stem: two inputs sharing a stem are refused, naming both, rather than one overwriting the other."""

    class Legacy(SemanticLabels):
        def write(self, out_dir, path, img, result, predictor, args):
            raise AssertionError("not called here")

    assert not Legacy().takes_stem() and SemanticLabels().takes_stem()
    assert Legacy().output_stems(["f/x.png", "f/y.png"]) == {"f/x.png": "x", "f/y.png": "y"}
    with pytest.raises(OutputPathError, match=r"the inputs f/x\.png and f/x\.jpg would both be written as x"):
        Legacy().output_stems(["f/x.png", "f/x.jpg"])
