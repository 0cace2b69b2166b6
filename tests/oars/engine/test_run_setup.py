"""Setting up a run goes one way (load → validate once → resolve → build), and ``<work_dir>/config.yaml``
records what oars set and why, in a form that trains again without applying anything twice."""

from __future__ import annotations

import pytest
import yaml
from demo_utils import DEMO_CFG, demo_overrides

import oars.config.check as check_mod
from oars.config import ConfigError, load_config
from oars.config.resolved import RESOLVED_KEY, previous_resolution
from oars.engine.entry import load, print_config, train
from oars.engine.resolve import ENGINE_HOOKS
from oars.engine.runner import OarsRunner, build_runner, prepare_config


@pytest.fixture
def check_calls(monkeypatch) -> list[int]:
    """Counts every validation of a config (``check_config`` goes through ``config_problems``)."""
    calls: list[int] = []
    real = check_mod.config_problems

    def counted(cfg):
        calls.append(1)
        return real(cfg)

    monkeypatch.setattr(check_mod, "config_problems", counted)
    return calls


def _body(path) -> dict:
    data = yaml.safe_load(path.read_text())
    data.pop(RESOLVED_KEY, None)
    return data


def test_one_train_setup_validates_once(demo_data, tmp_path, monkeypatch, check_calls):
    monkeypatch.setattr(OarsRunner, "train", lambda self: None)  # the setup only
    train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(tmp_path / "a"))
    assert len(check_calls) == 1
    print_config(DEMO_CFG, demo_overrides(demo_data), work_dir=str(tmp_path / "b"))
    assert len(check_calls) == 2
    assert not (tmp_path / "b").exists()


def test_prepare_config_then_build_runner_still_validates(demo_data, tmp_path, check_calls):
    cfg = prepare_config(load(DEMO_CFG, demo_overrides(demo_data) + ["model.backbone.base_chanels=4"]),
                         work_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="base_chanels"):
        build_runner(cfg)
    assert len(check_calls) == 1


def test_config_yaml_records_provenance_and_trains_again(demo_data, tmp_path, check_calls):
    first, second = tmp_path / "first", tmp_path / "second"
    train(DEMO_CFG, demo_overrides(demo_data, epochs=1), work_dir=str(first), amp=True)
    saved = yaml.safe_load((first / "config.yaml").read_text())
    resolved = saved[RESOLVED_KEY]
    hooks = [h["type"] for h in saved["custom_hooks"]]
    for name in ENGINE_HOOKS:
        assert hooks.count(name) == 1
        assert resolved[f"custom_hooks[{hooks.index(name)}]"]["source"].startswith("engine: ")
    assert resolved["optim_wrapper.type"] == {"value": "MixedPrecisionOptimWrapper",
                                              "source": "--amp flag (the config had OptimWrapper)"}
    assert resolved["default_hooks.checkpoint.type"]["value"] == "AtomicCheckpointHook"
    assert resolved["work_dir"]["source"] == "--work-dir flag"
    assert resolved["train_cfg.max_epochs"] == {"value": 1, "source": "-o (command line)"}
    assert not {k for k in resolved if k.split(".")[0] in ("resume", "load_from", "launcher")}

    cfg = load_config(first / "config.yaml")  # the section is a record: taken out when loading
    assert RESOLVED_KEY not in cfg and previous_resolution(cfg)["work_dir"]["value"] == str(first)

    train(str(first / "config.yaml"), work_dir=str(second))  # no --amp: config.yaml already holds it
    assert len(check_calls) == 2  # once per run
    assert (second / "epoch_1.pth").is_file()
    again = _body(second / "config.yaml")
    assert again.pop("work_dir") == str(second)
    before = _body(first / "config.yaml")
    before.pop("work_dir")
    assert again == before  # nothing applied twice: same hooks, same wrapper, same loaders
    notes = yaml.safe_load((second / "config.yaml").read_text())[RESOLVED_KEY]
    assert notes["optim_wrapper.type"]["source"] == (f"--amp flag (the config had OptimWrapper) — set in the run "
                                                      f"that wrote {first / 'config.yaml'}")
    assert notes["work_dir"] == {"value": str(second), "source": "--work-dir flag"}
