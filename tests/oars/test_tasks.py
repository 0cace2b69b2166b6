"""The task contract (oars.tasks): the registry filled from the ``oars.tasks`` entry points, one clear error for a
scope no task serves, tasks registered in code, the tools reaching the tasks only through it, and the core and the
tools importing no task package and probing no module names."""

from __future__ import annotations

import argparse
import ast
import os
import sys
from importlib.metadata import entry_points

import pytest
from demo_utils import DEMO_CFG, ROOT, load_tool
from mmengine.config import Config

from oars.errors import OarsError
from oars.tasks import (
    ENTRY_POINT_GROUP,
    TASKS,
    Commands,
    Exporter,
    ModelKind,
    Predictor,
    Subcommand,
    Task,
    UnknownTaskError,
    find_task,
    get_task,
    tool_command,
    tool_commands,
)

TASK_PACKAGES = ("detection", "segmentation", "video", "gan")
PROBES = ("import_module", "find_spec", "__import__")
CGAN_CFG = os.path.join(ROOT, "configs/gan/cgan/cgan_demo_digits.yaml")


class ToyExporter(Exporter):
    def build_export_spec(self, model, cfg, options):
        raise NotImplementedError


class ToyPredictor(Predictor):
    def infer_arguments(self, parser) -> None:
        parser.add_argument("--toy-flag", type=int, default=None)

    def infer(self, cfg, weights, inputs, output, *, device, failures, args) -> list[str]:
        return []


class ToyCommands(Commands):
    def subcommands(self) -> list[Subcommand]:
        return [Subcommand("toy_tool", "toy_tool", "does nothing", lambda p: p.add_argument("--n", type=int),
                           lambda args: args.n)]


class ToyTask(Task):
    """A task defined here, registered in code (no entry point)."""

    scope = "toy_task_for_tests"
    kinds = (ModelKind("toy", ToyExporter(), ToyPredictor()),)
    commands = ToyCommands()

    def import_registries(self) -> None:
        return None


@pytest.fixture
def toy():
    task = TASKS.register(ToyTask())
    try:
        yield task
    finally:
        TASKS.unregister(task.scope)



# ----------------------------------------------------------------------------------------------- the registry
def test_the_four_tasks_come_from_entry_points():
    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert set(TASK_PACKAGES) <= names, "reinstall (pip install -e .) to register the oars.tasks entry points"
    assert TASKS.broken() == {}
    for scope in TASK_PACKAGES:
        task = TASKS[scope]
        assert isinstance(task, Task) and task.scope == scope
        assert type(task).__module__ == f"{scope}.task"  # pyproject.toml: <scope> = "<scope>.task:TASK"
    assert set(TASK_PACKAGES) <= set(TASKS)


def test_unknown_scope_is_one_clear_error():
    with pytest.raises(UnknownTaskError) as err:
        get_task("no_such_task", where="cfg.yaml")
    message = str(err.value)
    assert message.startswith("cfg.yaml: default_scope 'no_such_task' is not a registered task")
    assert "known tasks: detection, gan, segmentation, video" in message and ENTRY_POINT_GROUP in message
    assert isinstance(err.value, OarsError)  # the tools print it without a traceback
    with pytest.raises(UnknownTaskError, match="no default_scope"):
        get_task(None)
    assert find_task("no_such_task") is None and find_task(None) is None


def test_a_task_registered_in_code_is_found(toy):
    assert get_task(toy.scope) is toy and toy.scope in TASKS
    assert tool_command("toy_tool").run(argparse.Namespace(n=3)) == 3
    with pytest.raises(OarsError, match="registered already"):
        TASKS.register(ToyTask())
    with pytest.raises(OarsError, match="expected an instance of oars.tasks.Task"):
        TASKS.register(object())  # type: ignore[arg-type]
    # the defaults of the contract: the core's image export, no checks, input required
    assert toy.predictor(Config({})).requires_input(Config({}))
    assert toy.exporter(Config({})).check_export(Config({}), fmt="tensorrt", precision="int8") is None
    probe = argparse.ArgumentParser()
    toy.default_kind.exporter.export_arguments(probe)
    assert len(probe._actions) == 1  # only -h: no export flags by default


def test_a_broken_entry_point_is_reported_for_its_scope(monkeypatch):
    from oars import tasks

    class EntryPoint:
        name, value = "broken_task", "broken_pkg.task:TASK"

        def load(self):
            raise ImportError("No module named 'broken_pkg'")

    monkeypatch.setattr(tasks, "entry_points", lambda group: [EntryPoint()])
    registry = tasks.TaskRegistry()
    assert list(registry) == [] and "No module named 'broken_pkg'" in registry.broken()["broken_task"]
    monkeypatch.setattr(tasks, "TASKS", registry)
    with pytest.raises(UnknownTaskError, match="the task of default_scope 'broken_task' cannot be loaded: "
                                               "loading broken_pkg.task:TASK failed: ImportError"):
        tasks.get_task("broken_task")


def test_export_finds_the_task_through_the_registry(toy):
    from oars.export.errors import ExportError
    from oars.export.onnx_export import export_task as _export_task

    assert _export_task(Config({"default_scope": toy.scope})) is toy
    with pytest.raises(ExportError, match=r"default_scope 'nope' has no export support .*known tasks: detection"):
        _export_task(Config({"default_scope": "nope"}))


# ------------------------------------------------------------------------------------------------- the tools
def test_every_convert_command_follows_the_output_rule():
    commands = tool_commands("convert")
    assert list(commands) == ["voc2coco", "labelme2coco", "torchvision2oars", "yolo2coco", "coco2yolo", "cvat2coco",
                              "labelme2seg", "cityscapes2seg", "videos2list", "thumos2activitynet"]
    for name, command in commands.items():
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        flags = {s for a in parser._actions for s in a.option_strings}
        assert {"--out", "--overwrite"} <= flags, name
        assert command.check_outputs is not None and command.usage.startswith(f"python tools/convert.py {name} ")


def test_convert_help_lists_every_command(capsys):
    tool = load_tool("convert")
    with pytest.raises(SystemExit) as exit_:
        tool.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in tool_commands("convert"):
        assert f"python tools/convert.py {name} " in out
    assert "--overwrite" in out and "never writes over its input" in out


def test_single_command_tools_find_their_task():
    # each task's commands live in its commands module (task.py holds the contract object only)
    assert tool_command("check_videos").run.__module__ == "video.commands"
    assert tool_command("class_weights").run.__module__ == "segmentation.commands"
    assert tool_command("optimize_anchors").run.__module__ == "detection.commands"
    assert tool_command("extract_features").run.__module__ == "video.commands"
    with pytest.raises(OarsError, match=r"tools/nothing\.py: the registered tasks give no command for it"):
        tool_command("nothing")


def test_infer_help_without_a_config_lists_the_common_flags(capsys):
    tool = load_tool("infer")
    with pytest.raises(SystemExit):
        tool.main(["--help"])
    out = capsys.readouterr().out
    assert "--weights" in out and "--device" in out and "tasks: detection, gan, segmentation, video" in out
    assert "--draw-threshold" not in out  # a task's flag: listed with -c


def test_infer_takes_the_flags_of_the_configs_task(capsys):
    tool = load_tool("infer")
    with pytest.raises(SystemExit):
        tool.main(["-c", CGAN_CFG, "--help"])
    out = capsys.readouterr().out
    assert "gan flags" in out and "--seed" in out and "--weights" in out
    # another task's flag: one clear error naming the scope, before the checkpoint is read
    with pytest.raises(OarsError, match=r"--draw-threshold does not apply to default_scope 'segmentation' \(it is "
                                        r"a flag of detection"):
        tool.main(["-c", DEMO_CFG, "-w", "missing.pth", "-i", "x.png", "-o", "out", "--draw-threshold", "0.5"])
    with pytest.raises(SystemExit):  # no task's flag: argparse's own message
        tool.main(["-c", DEMO_CFG, "-w", "missing.pth", "-i", "x.png", "-o", "out", "--nonsense"])
    assert "unrecognized arguments: --nonsense" in capsys.readouterr().err


def test_infer_passes_the_task_flags_to_the_task(tmp_path, capsys):
    """A noise GAN through tools/infer.py: no -i (the GAN task does not require it), --seed/--num/--label given."""
    from demo_utils import random_checkpoint

    ckpt = random_checkpoint(CGAN_CFG, [], tmp_path)
    out = tmp_path / "out"
    load_tool("infer").main(["-c", CGAN_CFG, "-w", ckpt, "-o", str(out), "--seed", "1", "--num", "2", "--label", "3"])
    assert sorted(n for n in os.listdir(out) if n.endswith(".png")) == ["grid.png", "sample_000.png", "sample_001.png"]
    assert f"wrote 3 pictures to {out}" in capsys.readouterr().out
    with pytest.raises(OarsError, match="-i/--input is required"):  # a task that needs it
        load_tool("infer").main(["-c", DEMO_CFG, "-w", ckpt, "-o", str(tmp_path / "seg")])


def test_export_takes_the_flags_of_the_configs_task(capsys):
    """tools/export.py adds the config's task's flags (Exporter.export_arguments); another task's flag is refused by
    name before the checkpoint is read, and the given values reach the exporter as task options."""
    from oars.config import load_config
    from oars.task_flags import parse_task_command_line

    tool = load_tool("export")
    with pytest.raises(SystemExit):
        tool.main(["-c", DEMO_CFG, "--help"])
    out = capsys.readouterr().out
    assert "segmentation flags" in out and "--output-op" in out and "--no-nms" not in out
    with pytest.raises(OarsError, match=r"--no-nms does not apply to default_scope 'segmentation' \(it is a flag "
                                        r"of detection; see tools/export\.py -c"):
        tool.main(["-c", DEMO_CFG, "-w", "missing.pth", "--no-nms"])
    def parse(argv: list[str]):
        parser = argparse.ArgumentParser()
        parser.add_argument("-c", "--config", required=True)
        parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[])
        return parse_task_command_line(parser, argv,
                                       lambda task, group: task.default_kind.exporter.export_arguments(group),
                                       "export", load_config)

    line = parse(["-c", DEMO_CFG, "--output-op", "softmax"])
    assert line.task.scope == "segmentation" and line.task_values == {"output_op": "softmax"}
    assert parse(["-c", DEMO_CFG]).task_values == {}  # not given: cfg.export decides
    det = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
    assert parse(["-c", det, "--no-nms"]).task_values == {"postprocess": False}
    assert parse(["-c", det, "--raw-heads"]).task_values == {"postprocess": "raw"}  # the graph ncnn can hold


def test_demo_data_sets_come_from_the_core_and_the_tasks(tmp_path, capsys):
    tool = load_tool("demo_data")
    sets = tool.commands()
    assert list(sets) == ["shapes", "digits", "pairs", "figures", "videos", "long-videos"]
    assert sets["videos"].run.__module__ == "video.commands" and sets["digits"].run.__module__ == "gan.commands"
    with pytest.raises(SystemExit):
        tool.main(["--help"])
    assert "tools/demo_data.py videos --out data/demo_videos" in capsys.readouterr().out
    (tmp_path / "mine.txt").write_text("a user's file")
    with pytest.raises(OarsError, match="is not empty"):  # a folder holding other files is refused, not filled
        tool.main(["digits", "--out", str(tmp_path), "--num-per-class-train", "1", "--num-per-class-val", "1"])
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]


def test_report_hook_comes_from_the_task():
    assert get_task("segmentation").data(Config({})).report_hook(Config({}), "/x/report.html") == {
        "type": "EvaluationReportHook", "out_file": "/x/report.html"}


def test_segmentation_checks_its_datasets_ignore_index():
    class Dataset:
        metainfo = {"ignore_index": 254}

    cfg = Config({"model": {"decode_head": {"type": "Head", "ignore_index": 255}}})
    with pytest.raises(OarsError, match=r"train_dataloader.dataset.ignore_index is 254 but "
                                        r"model.decode_head.ignore_index=255"):
        TASKS["segmentation"].data(cfg).check_dataset(cfg, "train_dataloader", Dataset())
    Dataset.metainfo = {"ignore_index": 255}
    TASKS["segmentation"].data(cfg).check_dataset(cfg, "train_dataloader", Dataset())
    TASKS["detection"].data(cfg).check_dataset(cfg, "train_dataloader", Dataset())  # the default checks nothing


# -------------------------------------------------------------------------- the core and the tools name no task
def _python_files(*folders: str) -> list[str]:
    found = []
    for folder in folders:
        for base, _, files in os.walk(os.path.join(ROOT, folder)):
            found += [os.path.join(base, f) for f in files if f.endswith(".py")]
    return sorted(found)


def _is_name_built_at_run_time(node: ast.expr) -> bool:
    """An f-string, a concatenation or a ``.format``/``%`` call: a module name made from a variable."""
    if isinstance(node, ast.JoinedStr | ast.BinOp):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"


def _seam_problems(path: str) -> list[str]:
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    where = os.path.relpath(path, ROOT)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        else:
            names = []
        problems += [f"{where}:{node.lineno}: imports {n}" for n in names if n.split(".")[0] in TASK_PACKAGES]
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in PROBES and _is_name_built_at_run_time(node.args[0]):
                problems.append(f"{where}:{node.lineno}: {name}() of a module name built at run time")
            first = node.args[0]
            if name in PROBES and isinstance(first, ast.Constant) and str(first.value).split(".")[0] in TASK_PACKAGES:
                problems.append(f"{where}:{node.lineno}: {name}({first.value!r})")
    return problems


def test_core_and_tools_import_no_task_and_probe_no_module_names():
    files = _python_files("oars", "tools")
    assert len(files) > 20 and any(f.endswith(os.path.join("tools", "infer.py")) for f in files)
    problems = [p for f in files for p in _seam_problems(f)]
    assert problems == [], "\n".join(problems)


def test_the_seam_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import importlib\nfrom detection.apis import run_inference\nimport video.export\n"
                   "importlib.import_module(f'{scope}.export')\nimportlib.util.find_spec(scope + '.apis')\n"
                   "__import__('gan.task')\nimportlib.import_module('{}.x'.format(s))\n")
    assert len(_seam_problems(str(bad))) == 6


def test_task_modules_import_nothing_heavy():
    """Loading the registry (every tool does) imports each task.py, which must not load torch."""
    import subprocess

    code = ("import sys; from oars.tasks import TASKS; assert len(TASKS) >= 4, list(TASKS); "
            "print(sorted(m for m in ('torch', 'mmengine', 'cv2') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
