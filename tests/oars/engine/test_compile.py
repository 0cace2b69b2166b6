"""Compiled training (oars.engine.compile): the same loss and update as eager, graph breaks reported, the config
switch and --compile resolved and recorded, bad values refused with one message.

The compiled step uses the ``aot_eager`` backend: dynamo + AOT autograd (the forward and backward graphs
``compile_for_training`` makes) without inductor's C++ build, which takes minutes on a shared CPU. The end to end
run through the Runner is marked slow.
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch
import yaml
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.model import BaseModel
from mmengine.optim import OptimWrapper
from torch import nn

from oars.engine.compile import (
    compile_for_training,
    compile_optimizer_steps,
    compile_options,
    compiles_optimizer,
    format_stats,
    stats_since,
    with_device_defaults,
)
from oars.engine.entry import print_config, train
from oars.engine.hooks import CompileReportHook
from oars.errors import OarsError

# aot_eager runs the same aten kernels as eager, in the order the traced graph gives: equal up to rounding
RTOL, ATOL = 1e-5, 1e-6


class Tiny(BaseModel):
    """conv + linear regression: the smallest model whose train_step has a forward, a loss, a backward, a step."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        x = torch.relu(self.conv(inputs))
        torch._dynamo.graph_break()  # what an untraceable line does to a compiled forward: it must be reported
        out = self.fc(x.mean((2, 3)))
        if mode == "loss":
            return {"loss": ((out - data_samples) ** 2).mean()}
        return out


def test_compiled_step_matches_eager_and_reports_graph_breaks():
    torch.manual_seed(0)
    eager = Tiny()
    compiled = copy.deepcopy(eager)
    data = {"inputs": torch.randn(2, 3, 8, 8), "data_samples": torch.randn(2, 2)}
    eager_opt = OptimWrapper(torch.optim.SGD(eager.parameters(), lr=0.1))
    compiled_opt = OptimWrapper(torch.optim.SGD(compiled.parameters(), lr=0.1))

    hook = CompileReportHook()
    hook.before_train(None)
    hook.before_train_iter(None, 0)
    # what OarsRunner._maybe_compile does with cfg.compile
    compile_for_training(compiled, compile_options({"backend": "aot_eager"}))
    got = compiled.train_step(copy.deepcopy(data), compiled_opt)["loss"]
    hook.after_train_iter(None, 0)
    want = eager.train_step(copy.deepcopy(data), eager_opt)["loss"]

    torch.testing.assert_close(got.detach(), want.detach(), rtol=RTOL, atol=ATOL)
    for (name, a), b in zip(compiled.named_parameters(), eager.parameters()):  # the same SGD update
        torch.testing.assert_close(a.detach(), b.detach(), rtol=RTOL, atol=ATOL, msg=name)
    assert len(hook.reports) == 1
    report = hook.reports[0]
    assert report.startswith("torch.compile, first step: ") and "graph break(s) [" in report
    assert "1 graph break(s) [Call to `torch._dynamo.graph_break()` (x1)]" in report  # named, not hidden
    assert report.startswith("torch.compile, first step: 2 graph(s)")  # before and after the break
    with torch.no_grad():  # predict / tensor modes stay eager: nothing new compiled
        compiled(data["inputs"], mode="tensor")
    assert "the first step took" in report
    hook.after_train_iter(None, 1)  # nothing new compiled: nothing logged
    assert len(hook.reports) == 1


def test_a_model_with_its_own_train_step_gets_its_networks_compiled():
    class TwoNets(Tiny):  # a GAN-like model: its train_step calls its networks directly, never forward
        def __init__(self) -> None:
            super().__init__()
            self.act = nn.ReLU()  # no parameters: left alone

        def train_step(self, data, optim_wrapper):
            return {"loss": self.fc(self.conv(data["inputs"]).mean((2, 3))).sum()}

    model = TwoNets()
    forward = model.forward
    assert compile_for_training(model, {"backend": "eager"}) is model
    compiled = {name for name, m in model.named_children() if getattr(m, "_compiled_call_impl", None) is not None}
    assert compiled == {"conv", "fc"}  # not the data preprocessor, not the parameter-free layer
    assert model.forward == forward


def test_later_recompilations_and_eager_fallbacks_are_reported():
    before = {"graph_break": Counter({"a\ndetail": 1}), "unimplemented": Counter(), "stats": Counter(unique_graphs=2)}
    after = {"graph_break": Counter({"a\ndetail": 1, "b reason\nmore": 2}),
             "unimplemented": Counter({"Dynamo recompile limit exceeded\n...": 1}),
             "stats": Counter(unique_graphs=5)}
    stats = stats_since(before, after)
    assert stats.graphs == 3 and stats.graph_breaks == Counter({"b reason": 2})
    assert stats.eager_frames == Counter({"Dynamo recompile limit exceeded": 1})
    text = format_stats(stats, first=False)
    assert text.startswith("torch.compile, later steps added: 3 graph(s) (recompilation")
    assert "2 graph break(s) [b reason (x2)]" in text
    assert "1 function(s) left to eager [Dynamo recompile limit exceeded (x1)]" in text
    assert stats_since(after, after).empty


@pytest.mark.parametrize("value, expected", [
    (True, {}), (False, None), (None, None),
    ({"mode": "max-autotune", "dynamic": False}, {"mode": "max-autotune", "dynamic": False}),
])
def test_compile_values(value, expected):
    assert compile_options(value) == expected


@pytest.mark.parametrize("value, message", [
    ({"mod": "default"}, "cfg.yaml: compile: unknown key(s) ['mod']; accepted here: torch.compile's mode"),
    ({"optimizer": "yes"}, "cfg.yaml: compile.optimizer: expected true or false (compile the optimizer step"),
    ({"mode": "fast"}, "cfg.yaml: compile.mode: expected one of default, reduce-overhead, max-autotune"),
    ({"dynamic": "yes"}, "cfg.yaml: compile.dynamic: expected true, false or null, got 'yes'"),
    ("inductor", "cfg.yaml: compile: expected true, false or a mapping of torch.compile arguments"),
    ({"options": {"layout_optimisation": False}},
     "cfg.yaml: compile.options.layout_optimisation: not an inductor option; close names: layout_optimization"),
    ({"options": {"max_autotune": "yes"}}, "cfg.yaml: compile.options.max_autotune: expected a bool, got 'yes'"),
])
def test_bad_compile_values_give_one_message(value, message):
    with pytest.raises(OarsError, match="^" + message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        compile_options(value, "cfg.yaml")


def _resolved(text: str) -> tuple[dict, dict]:
    data = yaml.safe_load(text)
    return data, data["_resolved_by_oars"]


def test_flag_and_config_key_are_resolved_and_recorded(tmp_path):
    data, notes = _resolved(print_config(DEMO_CFG, work_dir=str(tmp_path), compile=True))
    assert data["compile"] is True and notes["compile"]["source"] == "--compile flag"
    hooks = [h["type"] for h in data["custom_hooks"]]
    assert "CompileReportHook" in hooks
    index = hooks.index("CompileReportHook")
    assert notes[f"custom_hooks[{index}]"]["source"].startswith("engine: compile is on: CompileReportHook")

    data, notes = _resolved(print_config(DEMO_CFG, ["compile.mode=max-autotune"], work_dir=str(tmp_path),
                                         compile=True))
    assert data["compile"] == {"mode": "max-autotune"}  # the config's options are kept under --compile
    assert "--compile flag too" in notes["compile"]["source"]

    data, _ = _resolved(print_config(DEMO_CFG, work_dir=str(tmp_path)))
    assert "compile" not in data and "CompileReportHook" not in [h["type"] for h in data["custom_hooks"]]


@pytest.mark.slow
def test_compiled_run_through_the_runner_logs_the_report(demo_data, tmp_path):
    """One epoch of the shrunk demo through mmengine's Runner with and without compile: the first iteration's
    loss agrees and the compile report reached the log. Slow: dynamo + AOT autograd trace the U-Net's forward and
    backward (66 s wall measured on the 2 shared cores under load)."""
    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5, "randomness.seed": 3})
    eager = train(DEMO_CFG, opts, work_dir=str(tmp_path / "eager"))
    compiled = train(DEMO_CFG, [*opts, "compile.backend=aot_eager"], work_dir=str(tmp_path / "compiled"),
                     compile=True)
    first = [r.message_hub.get_scalar("train/loss").data[0][0] for r in (eager, compiled)]
    assert first[1] == pytest.approx(first[0], rel=1e-4)
    hook = next(h for h in compiled.hooks if isinstance(h, CompileReportHook))
    assert hook.reports and hook.reports[0].startswith("torch.compile, first step: ")
    log = next((tmp_path / "compiled").rglob("*.log")).read_text()
    assert "torch.compile, first step: " in log
    assert "and the optimizer step (AdamW; torch.optim breaks" in log  # compile.optimizer defaults to true


def test_mode_and_options_together_are_refused_naming_the_preset():
    with pytest.raises(OarsError, match=r"^cfg.yaml: compile: give mode or options, not both .*list_mode_options"):
        compile_options({"mode": "max-autotune", "options": {"layout_optimization": True}}, "cfg.yaml")


def test_cpu_inductor_defaults_are_added_and_the_users_options_win():
    model = nn.Linear(2, 2)
    assert with_device_defaults({}, model) == {"options": {"layout_optimization": False}}
    # a mode becomes its inductor options (torch.compile takes one or the other), the CPU default added
    assert with_device_defaults({"mode": "max-autotune-no-cudagraphs", "dynamic": False}, model) == {
        "dynamic": False,
        "options": {"layout_optimization": False, "max_autotune": True, "coordinate_descent_tuning": True}}
    given = {"backend": "inductor", "options": {"layout_optimization": True}}
    assert with_device_defaults(given, model) == given  # what the config says is kept
    assert with_device_defaults({"backend": "aot_eager"}, model) == {"backend": "aot_eager"}  # not inductor
    assert with_device_defaults({}, nn.Linear(2, 2, device="meta")) == {}  # not the CPU
    assert with_device_defaults({"backend": None}, model)["options"] == {"layout_optimization": False}  # inductor


def test_compile_optimizer_key_is_read_by_oars_not_passed_to_torch():
    assert compile_options({"optimizer": False, "backend": "eager"}) == {"backend": "eager"}
    assert compiles_optimizer(True) and compiles_optimizer({"backend": "eager"})
    assert not compiles_optimizer({"optimizer": False}) and not compiles_optimizer(None)
    assert not compiles_optimizer(False)


OPTIMIZERS = {  # SGD passes lr to its kernels as a scalar; the YOLOv3 configs' AdamW sets foreach
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "adamw_foreach": lambda params: torch.optim.AdamW(params, lr=0.1, weight_decay=5e-4, foreach=True),
}


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_compiled_optimizer_step_and_clipping_match_eager_as_the_learning_rate_changes(kind):
    """The compiled step (SGD with momentum and weight decay; AdamW with foreach) with gradient clipping gives
    eager's weights after steps at changing learning rates (a scheduler's work), and the changes do not exhaust
    dynamo's recompile limit."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    eager = Tiny()
    compiled = copy.deepcopy(eager)
    eager_opt, compiled_opt = (OptimWrapper(OPTIMIZERS[kind](m.parameters()), clip_grad={"max_norm": 0.5})
                               for m in (eager, compiled))
    foreach = compiled_opt.optimizer.param_groups[0]["foreach"]
    names = compile_optimizer_steps(compiled_opt, {"backend": "aot_eager", "fullgraph": True})
    assert names == [f"{type(compiled_opt.optimizer).__name__} + gradient clipping"]
    assert compiled_opt.clip_func is not torch.nn.utils.clip_grad_norm_  # clipping compiled too
    data = {"inputs": torch.randn(2, 3, 8, 8), "data_samples": torch.randn(2, 2)}
    for lr in (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001):  # more than the limit of 8
        for wrapper in (eager_opt, compiled_opt):
            wrapper.optimizer.param_groups[0]["lr"] = lr
        eager.train_step(copy.deepcopy(data), eager_opt)
        compiled.train_step(copy.deepcopy(data), compiled_opt)
    for (name, a), b in zip(compiled.named_parameters(), eager.parameters()):
        # compiled, Adam takes its "capturable" form (divides by the step size): 1.5e-6 apart after 10 steps
        torch.testing.assert_close(a.detach(), b.detach(), rtol=RTOL, atol=1e-5, msg=name)
    assert not any("recompile limit" in reason for reason in counters["unimplemented"])  # never fell back
    assert compiled_opt.optimizer.param_groups[0]["foreach"] is foreach  # the group as the user built it
    torch._dynamo.reset()


def test_a_zero_learning_rate_steps_eagerly_instead_of_turning_weights_to_nan():
    """Compiled, Adam divides by its step size: at lr 0 (a warm-up from 0, a frozen group) every weight became NaN.
    oars runs that step eagerly; the next positive rate is compiled again."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    compiled = copy.deepcopy(eager)
    eager_opt, compiled_opt = (OptimWrapper(torch.optim.Adam(m.parameters(), betas=(0.5, 0.999)))
                               for m in (eager, compiled))
    compile_optimizer_steps(compiled_opt, {"backend": "aot_eager"})
    x = torch.randn(5, 4)
    for lr in (0.0, 0.0, 0.0, 1e-3, 0.0, 1e-3):
        for model, wrapper in ((eager, eager_opt), (compiled, compiled_opt)):
            wrapper.optimizer.param_groups[0]["lr"] = lr
            wrapper.update_params(model(x).pow(2).sum())
        assert compiled_opt.optimizer.param_groups[0]["lr"] == lr  # the float is back after the step
    for a, b in zip(compiled.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=RTOL, atol=ATOL)
    torch._dynamo.reset()


def test_each_network_optimizer_of_a_gan_is_compiled():
    from mmengine.optim import OptimWrapperDict

    nets = {"generator": nn.Linear(2, 2), "discriminator": nn.Linear(2, 1)}
    wrappers = OptimWrapperDict(**{k: OptimWrapper(torch.optim.Adam(m.parameters())) for k, m in nets.items()})
    steps = {k: w.optimizer.step for k, w in wrappers.items()}
    assert compile_optimizer_steps(wrappers, {"backend": "eager"}) == ["generator", "discriminator"]
    assert all(w.optimizer.step is not steps[k] for k, w in wrappers.items())
