"""Config check: unknown ``type`` names and unknown constructor arguments, reported with file and key."""

from __future__ import annotations

import os
import re
import textwrap

import pytest
import torch
from mmengine.registry import Registry

import oars.registry as core
from oars.config import ConfigError, load_config
from oars.config.check import (
    accepted_arguments,
    check_config,
    closest,
    config_problems,
    main,
    registry_kind,
    visible_names,
)

SCOPE = "oars_cfgcheck_test"
BROKEN_SCOPE = "oars_cfgcheck_broken"


def _child(parent: Registry, scope: str = SCOPE, locations: list[str] | None = None) -> Registry:
    """A throwaway child registry (a scope name can exist once per parent, so reuse it if present)."""
    if scope in parent.children:
        return parent.children[scope]
    return Registry(parent.name, parent=parent, scope=scope, locations=locations or [])


MODELS = _child(core.MODELS)
TRANSFORMS = _child(core.TRANSFORMS)
DATASETS = _child(core.DATASETS)
TASK_UTILS = _child(core.TASK_UTILS)
BROKEN_MODELS = _child(core.MODELS, BROKEN_SCOPE, ["oars_cfgcheck_no_such_module"])
OTHER_SCOPE = "oars_cfgcheck_other"
OTHER_MODELS = _child(core.MODELS, OTHER_SCOPE)  # a sibling scope that lacks the test classes


def _register(registry: Registry, cls: type) -> type:
    if cls.__name__ not in registry.module_dict:
        registry.register_module(module=cls)
    return registry.get(cls.__name__)


class CfgCheckNet:
    def __init__(self, depth: int = 50, width: int = 64, out_indices=(0, 1, 2, 3), norm="BN", init_cfg=None):
        self.depth = depth


class CfgCheckHead:
    def __init__(self, in_channels: int, num_classes: int, channels: int = 16, loss=None, norm_cfg=None):
        self.channels = channels


class CfgCheckLoss:
    def __init__(self, loss_weight: float = 1.0, *, reduction: str = "mean"):
        self.loss_weight = loss_weight


class CfgCheckSegmentor:
    def __init__(self, backbone, head, num_classes: int, neck=None, data_preprocessor=None, train_cfg=None,
                 init_cfg=None):
        self.backbone = backbone


class CfgCheckAnything:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class CfgCheckLoad:
    def __call__(self, results: dict) -> dict:
        return results


class CfgCheckFlip:
    def __init__(self, prob: float = 0.5):
        self.prob = prob


class CfgCheckAlbu:
    def __init__(self, transforms: list):
        self.transforms = transforms


class CfgCheckShapes:
    def __init__(self, data_root: str, pipeline=(), lazy_init: bool = False):
        self.data_root = data_root


class CfgCheckBaseHead:
    def __init__(self, in_channels: int, num_classes: int, dropout: float = 0.1, init_cfg=None):
        self.dropout = dropout


class CfgCheckKwHead(CfgCheckBaseHead):
    def __init__(self, in_channels: int, dilations=(1, 6), **kwargs):
        """``**kwargs`` only go to the base class: its arguments are accepted too."""
        super().__init__(in_channels, **kwargs)
        self.dilations = dilations


class CfgCheckKwOther(CfgCheckBaseHead):
    def __init__(self, extra: int = 1, **kwargs):
        super().__init__(1, 1)
        self.kwargs = kwargs  # used for something else: any key is accepted


class CfgCheckModule(torch.nn.Module):
    def __init__(self, width: int = 1, **kwargs):
        super().__init__(**kwargs)  # nn.Module rejects unknown keyword arguments
        self.width = width


CFG_CHECK_NORMS = {"BN": torch.nn.BatchNorm2d, "GN": torch.nn.GroupNorm}

for _cls in (CfgCheckNet, CfgCheckHead, CfgCheckLoss, CfgCheckSegmentor, CfgCheckAnything, CfgCheckKwHead,
             CfgCheckKwOther, CfgCheckModule):
    _register(MODELS, _cls)
for _cls in (CfgCheckLoad, CfgCheckFlip, CfgCheckAlbu):
    _register(TRANSFORMS, _cls)
_register(DATASETS, CfgCheckShapes)
_register(TASK_UTILS, CfgCheckAnything)


MODEL_BASE = """
model:
  type: CfgCheckSegmentor
  num_classes: 3
  data_preprocessor: {type: ImgDataPreprocessor, mean: [0, 0, 0], std: [1, 1, 1]}
  backbone:
    type: CfgCheckNet
    depth: 18
    init_cfg: {type: Pretrained, checkpoint: x.pth, prefix: backbone.}
  head: {type: CfgCheckHead, channels: 8, loss: {type: CfgCheckLoss, loss_weight: 0.4}}
  train_cfg: {sampler: {type: CfgCheckAnything, thresh: 0.7}}
"""

DATA_BASE = """
train_dataloader:
  batch_size: 2
  sampler: {type: DefaultSampler, shuffle: true}
  collate_fn: {type: pseudo_collate}
  dataset:
    type: CfgCheckShapes
    data_root: data/shapes
    pipeline:
      - {type: CfgCheckLoad}
      - {type: CfgCheckFlip, prob: 0.5}
      - type: CfgCheckAlbu
        transforms: [{type: HorizontalFlipp, p: 0.5}, {type: NotAnAlbumentationsName}]
val_evaluator: {type: DumpResults, out_file_path: results.pkl}
"""

RUNTIME_BASE = """
default_hooks:
  timer: {type: IterTimerHook}
  logger: {type: LoggerHook, interval: 10, priority: BELOW_NORMAL}
  checkpoint: {type: CheckpointHook, interval: 1, anything_goes_here: 1}
  visualization: null
custom_hooks:
  - {type: EMAHook, momentum: 0.01, priority: 49}
optim_wrapper:
  type: OptimWrapper
  optimizer: {type: SGD, lr: 0.01, momentum: 0.9}
  clip_grad: null
  paramwise_cfg: {norm_decay_mult: 0.0}
param_scheduler:
  - {type: MultiStepLR, milestones: [8, 11], by_epoch: true}
train_cfg: {type: EpochBasedTrainLoop, max_epochs: 2, val_interval: 1}
val_cfg: {type: ValLoop}
log_processor: {type: LogProcessor, window_size: 10}
visualizer: {type: Visualizer, vis_backends: [{type: LocalVisBackend}]}
"""


def write(root, rel: str, text: str) -> str:
    path = os.path.join(str(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


@pytest.fixture()
def cfg_files(tmp_path):
    """A three-part config (model, data, runtime bases) and its top file; returns the paths."""
    files = {
        "model": write(tmp_path, "_base_/model.yaml", MODEL_BASE),
        "data": write(tmp_path, "_base_/data.yaml", DATA_BASE),
        "runtime": write(tmp_path, "_base_/runtime.yaml", RUNTIME_BASE),
    }
    files["top"] = write(tmp_path, "algo/top.yaml", f"""
        _base_: [../_base_/model.yaml, ../_base_/data.yaml, ../_base_/runtime.yaml]
        default_scope: {SCOPE}
        model: {{backbone: {{width: 32}}}}
        """)
    return files


def problems_for(top: str, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        check_config(load_config(top, overrides))
    return str(err.value)


def test_valid_config_passes(cfg_files):
    cfg = load_config(cfg_files["top"])
    assert config_problems(cfg) == []
    check_config(cfg)


def test_unknown_model_type_names_file_key_and_closest(cfg_files):
    msg = problems_for(cfg_files["top"], ["model.backbone.type=CfgCheckNett"])
    assert msg.startswith("-o: model.backbone.type: unknown model type 'CfgCheckNett'. Did you mean: CfgCheckNet")
    assert f"scope '{SCOPE}'" in msg and "registered: " in msg and "--list model" in msg

    top = write(os.path.dirname(cfg_files["top"]), "typo.yaml", f"""
        _base_: [../_base_/model.yaml, ../_base_/runtime.yaml]
        default_scope: {SCOPE}
        model: {{head: {{loss: {{type: cfgcheckloss}}}}}}
        """)
    msg = problems_for(top)
    assert msg.startswith(f"{top}: model.head.loss.type: unknown model type 'cfgcheckloss'. "
                          "Did you mean: CfgCheckLoss?")


def test_unknown_type_in_a_base_names_the_base_file(cfg_files, tmp_path):
    write(tmp_path, "_base_/data.yaml", DATA_BASE.replace("{type: CfgCheckFlip, prob", "{type: CfgCheckFlipp, prob"))
    msg = problems_for(cfg_files["top"])
    assert msg.startswith(f"{cfg_files['data']}: train_dataloader.dataset.pipeline[1].type: "
                          "unknown transform type 'CfgCheckFlipp'. Did you mean: CfgCheckFlip?")


def test_unknown_types_of_mmengine_registries(cfg_files):
    msg = problems_for(cfg_files["top"], [
        "optim_wrapper.optimizer.type=SDG", "param_scheduler.0.type=MultiStepLRR",
        "default_hooks.timer.type=IterTimerHok", "visualizer.vis_backends.0.type=LocalVisBacknd",
        "train_dataloader.sampler.type=DefaultSamplr",
    ])
    assert msg.startswith("5 problems in the config:\n- ")
    for line in [
        "-o: optim_wrapper.optimizer.type: unknown optimizer type 'SDG'. Did you mean: SGD",
        "-o: param_scheduler[0].type: unknown parameter scheduler type 'MultiStepLRR'. Did you mean: MultiStepLR",
        "-o: default_hooks.timer.type: unknown hook type 'IterTimerHok'. Did you mean: IterTimerHook",
        "-o: visualizer.vis_backends[0].type: unknown vis_backend type 'LocalVisBacknd'. Did you mean: LocalVisBackend",
        "-o: train_dataloader.sampler.type: unknown data sampler type 'DefaultSamplr'. Did you mean: DefaultSampler",
    ]:
        assert line in msg


def test_unknown_argument_names_class_key_and_accepted_args(cfg_files):
    msg = problems_for(cfg_files["top"], ["model.backbone.dept=18"])
    assert msg == ("-o: model.backbone.dept: CfgCheckNet has no argument 'dept'. Did you mean: depth? "
                   "Accepted: depth, width, out_indices, norm, init_cfg")
    msg = problems_for(cfg_files["top"], ["model.head.loss.reductoin=sum"])
    assert "model.head.loss.reductoin: CfgCheckLoss has no argument 'reductoin'" in msg
    assert "Accepted: loss_weight, reduction" in msg


def test_unknown_argument_of_mmengine_classes_names_the_base_file(cfg_files, tmp_path):
    write(tmp_path, "_base_/runtime.yaml", RUNTIME_BASE.replace("lr: 0.01,", "lr: 0.01, mometum: 0.9,")
          .replace("interval: 10, priority", "intervall: 10, priority"))
    msg = problems_for(cfg_files["top"])
    runtime = cfg_files["runtime"]
    assert f"{runtime}: optim_wrapper.optimizer.mometum: SGD has no argument 'mometum'. Did you mean: momentum?" in msg
    assert "Accepted: params, lr, momentum, dampening, weight_decay, nesterov" in msg
    assert f"{runtime}: default_hooks.logger.intervall: LoggerHook has no argument 'intervall'" in msg


def test_wrong_scope_hint_and_scoped_names(cfg_files):
    cfg = load_config(cfg_files["top"], [f"default_scope={OTHER_SCOPE}"])
    problems = config_problems(cfg)
    assert any(f"model.backbone.type: unknown model type 'CfgCheckNet'. 'CfgCheckNet' is registered in scope "
               f"{SCOPE}: add `_scope_: {SCOPE}` to this dict" in p for p in problems)
    # _scope_ switches the registry for the dict and everything built inside it, as mmengine's build does
    cfg = load_config(cfg_files["top"], [f"default_scope={OTHER_SCOPE}", f"model._scope_={SCOPE}"])
    assert not any(p.split(": ")[1].startswith("model.") for p in config_problems(cfg))
    # a scope prefix on the name is resolved by Registry.get
    cfg = load_config(cfg_files["top"], [f"model.backbone.type={SCOPE}.CfgCheckNet"])
    assert config_problems(cfg) == []


def test_unknown_default_scope_and_broken_locations(cfg_files):
    msg = problems_for(cfg_files["top"], ["default_scope=no_such_scope_xyz"])
    assert "default_scope 'no_such_scope_xyz': no registries for this scope" in msg
    msg = problems_for(cfg_files["top"], [f"default_scope={BROKEN_SCOPE}"])
    assert (f"{cfg_files['model']}: model.type: cannot look up 'CfgCheckSegmentor': "
            "importing oars_cfgcheck_no_such_module (the modules that register oars_cfgcheck_broken's "
            "model classes) failed: ModuleNotFoundError") in msg


def test_non_string_type_is_reported(cfg_files):
    msg = problems_for(cfg_files["top"], ["model.head.type=[1, 2]"])
    assert msg.startswith("-o: model.head.type: expected a class name (a string), got [1, 2]")


def test_registry_kind_follows_the_key_path():
    node: dict = {}
    cases = {
        ("model",): "MODELS",
        ("model", "backbone"): "MODELS",
        ("model", "train_cfg", "assigner"): "TASK_UTILS",
        ("model", "rpn_head", "bbox_coder"): "TASK_UTILS",
        ("model", "roi_head", "bbox_roi_extractor", "roi_layer"): None,
        ("model", "train_cfg", "loss"): "MODELS",
        ("model", "backbone", "init_cfg"): "WEIGHT_INITIALIZERS",
        ("model", "init_cfg", 0): "WEIGHT_INITIALIZERS",
        ("train_dataloader", "dataset"): "DATASETS",
        ("val_dataloader", "dataset", "dataset"): "DATASETS",
        ("train_dataloader", "dataset", "datasets", 1): "DATASETS",
        ("train_dataloader", "dataset", "pipeline", 3): "TRANSFORMS",
        ("train_dataloader", "dataset", "pipeline", 3, "transforms", 0): None,
        ("train_pipeline", 0): "TRANSFORMS",
        ("train_dataloader", "sampler"): "DATA_SAMPLERS",
        ("train_dataloader", "batch_sampler"): "DATA_SAMPLERS",
        ("train_dataloader", "collate_fn"): "FUNCTIONS",
        ("val_evaluator",): "METRICS",
        ("test_evaluator", 1): "METRICS",
        ("custom_hooks", 0): "HOOKS",
        ("default_hooks", "logger"): "HOOKS",
        ("optim_wrapper",): "OPTIM_WRAPPERS",
        ("optim_wrapper", "optimizer"): "OPTIMIZERS",
        ("optim_wrapper", "generator"): "OPTIM_WRAPPERS",
        ("optim_wrapper", "generator", "optimizer"): "OPTIMIZERS",
        ("param_scheduler",): "PARAM_SCHEDULERS",
        ("param_scheduler", 1): "PARAM_SCHEDULERS",
        ("visualizer",): "VISUALIZERS",
        ("visualizer", "vis_backends", 0): "VISBACKENDS",
        ("log_processor",): "LOG_PROCESSORS",
        ("model_wrapper_cfg",): "MODEL_WRAPPERS",
        ("train_cfg",): "LOOPS",
        ("export",): None,
        ("export", "something"): None,
    }
    for path, kind in cases.items():
        assert registry_kind(path, node) == kind, path
    assert registry_kind(("val_evaluator",), {"type": "Evaluator", "metrics": []}) == "EVALUATOR"
    assert registry_kind(("val_evaluator", "metrics", 0), node) == "METRICS"


def test_helpers_and_cli(cfg_files, capsys):
    assert closest("resnett", ["ResNet", "ResNeXt", "VGG"]) == ["ResNet", "ResNeXt"]
    names = visible_names(MODELS)
    assert "CfgCheckNet" in names and "ImgDataPreprocessor" in names  # own and mmengine root's
    assert main([cfg_files["top"]]) == 0
    assert main([cfg_files["top"], "-o", "model.backbone.dept=1"]) == 2
    assert "CfgCheckNet has no argument 'dept'" in capsys.readouterr().err
    assert main(["--list", "model", "--scope", SCOPE]) == 0
    assert "CfgCheckSegmentor" in capsys.readouterr().out.split()


def test_scope_registry_imported_on_demand(cfg_files, tmp_path, monkeypatch, request):
    """A scope not known yet has its registries made by its task (``Task.import_registries``, found through
    oars.tasks.TASKS, not by importing ``{scope}.registry``); its (empty) child registry is used."""
    import importlib

    from oars.tasks import TASKS, Exporter, ModelKind, Predictor, Task

    scope = "oars_cfgcheck_lazy"
    write(tmp_path, f"pkgs/{scope}/__init__.py", "")
    write(tmp_path, f"pkgs/{scope}/registry.py", f"""
        from mmengine.registry import Registry
        import oars.registry
        HOOKS = Registry("hook", parent=oars.registry.HOOKS, scope="{scope}")
        """)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))

    class LazyExporter(Exporter):
        def build_export_spec(self, model, cfg, options):
            raise NotImplementedError

    class LazyPredictor(Predictor):
        def infer(self, cfg, weights, inputs, output, *, device, failures, args):
            raise NotImplementedError

    class LazyTask(Task):
        kinds = (ModelKind("lazy", LazyExporter(), LazyPredictor()),)

        def import_registries(self) -> None:
            importlib.import_module(f"{scope}.registry")

    LazyTask.scope = scope
    TASKS.register(LazyTask())
    request.addfinalizer(lambda: TASKS.unregister(scope))  # registered for this test only
    msg = problems_for(cfg_files["top"], [f"default_scope={scope}"])
    assert "default_hooks.timer.type: unknown hook type" not in msg  # found through the lazy scope's HOOKS
    assert re.search(f"model.type: unknown model type 'CfgCheckSegmentor'. 'CfgCheckSegmentor' is registered in "
                     f"scope {SCOPE}: add `_scope_: {SCOPE}` to this dict \\(or change default_scope\\). "
                     f"\\(registered: \\d+ names visible from scope 'mmengine', as scope '{scope}' has no model "
                     "registry;", msg)
    cfg = load_config(cfg_files["top"], [f"default_scope={scope}", "default_hooks.timer.type=IterTimerHok"])
    pattern = f"IterTimerHook\\? \\(registered: \\d+ names visible from scope '{scope}';"
    assert any(re.search(pattern, p) for p in config_problems(cfg))


def test_keys_added_after_loading_are_reported_as_such(cfg_files):
    cfg = load_config(cfg_files["top"])
    cfg.default_hooks["ema"] = {"type": "EMAHookk"}
    msg = problems_for_cfg(cfg)
    assert msg.startswith(f"{cfg_files['top']} (key added after loading, in no file): default_hooks.ema.type: "
                          "unknown hook type 'EMAHookk'. Did you mean: EMAHook?")


def problems_for_cfg(cfg) -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    return str(err.value)


def test_kwargs_forwarded_to_super_are_followed(cfg_files):
    assert accepted_arguments(CfgCheckKwHead) == ["in_channels", "dilations", "num_classes", "dropout", "init_cfg"]
    assert accepted_arguments(CfgCheckKwOther) is None
    assert accepted_arguments(CfgCheckModule) == ["width"]
    assert accepted_arguments(CfgCheckAnything) is None
    override = "model.head={_delete_: true, type: CfgCheckKwHead, dilationz: [1], dropot: 0}"
    msg = problems_for(cfg_files["top"], [override])
    assert ("-o: model.head.dilationz: CfgCheckKwHead has no argument 'dilationz'. Did you mean: dilations? "
            "Accepted: in_channels, dilations, num_classes, dropout, init_cfg") in msg
    assert "-o: model.head.dropot: CfgCheckKwHead has no argument 'dropot'. Did you mean: dropout?" in msg
    cfg = load_config(cfg_files["top"], ["model.head={_delete_: true, type: CfgCheckKwOther, whatever: 1}",
                                         "model.neck={type: CfgCheckModule, width: 2}"])
    assert config_problems(cfg) == []
    msg = problems_for(cfg_files["top"], ["model.neck={type: CfgCheckModule, widht: 2}"])
    assert msg.endswith("model.neck.widht: CfgCheckModule has no argument 'widht'. Did you mean: width? "
                        "Accepted: width")


def test_norm_and_act_specs_are_checked_against_their_tables(cfg_files, monkeypatch):
    import oars.config.check as cc

    monkeypatch.setitem(cc._LAYER_TABLES, "layer:norm", (__name__, "CFG_CHECK_NORMS"))
    ok = load_config(cfg_files["top"], ["model.backbone.norm={type: GN, num_groups: 8}"])
    assert [p for p in config_problems(ok) if ".norm" in p] == []
    msg = problems_for(cfg_files["top"], ["model.backbone.norm={type: GNN}"])
    assert msg.startswith("-o: model.backbone.norm.type: unknown norm type 'GNN'. Did you mean: GN? Accepted: BN, GN")
    msg = problems_for(cfg_files["top"], ["model.head.norm_cfg={type: GN, num_group: 8}"])
    assert msg.startswith("-o: model.head.norm_cfg.num_group: GroupNorm has no argument 'num_group'. "
                          "Did you mean: num_groups?")
    monkeypatch.setitem(cc._LAYER_TABLES, "layer:norm", ("oars_cfgcheck_no_such_module", "X"))
    assert config_problems(load_config(cfg_files["top"], ["model.backbone.norm={type: Anything}"])) == []


def test_unknown_top_level_key_is_named_with_closest():
    from mmengine.config import Config

    from oars.config.check import config_problems

    problems = config_problems(Config({"trian_cfg": {"max_epochs": 2}, "train_cfg": {}}))
    assert len(problems) == 1 and "trian_cfg: unknown top-level key" in problems[0] and "train_cfg" in problems[0]
