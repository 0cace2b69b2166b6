"""Config mistakes that used to end in a raw traceback or in Python's words, each now one message naming the
file (or ``-o``), the key and what was expected."""

from __future__ import annotations

import pytest
from demo_utils import DEMO_CFG, demo_overrides

from oars.config import ConfigError, load_config
from oars.config.check import check_config


def _problem(*overrides: str) -> str:
    cfg = load_config(DEMO_CFG, list(overrides))
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    return str(info.value)


@pytest.mark.parametrize("override, expected", [
    ("train_dataloader.batch_size=0",
     "-o: train_dataloader.batch_size: expected a positive integer (1, 2, ...), got 0"),
    ("train_dataloader.batch_size=eight", "train_dataloader.batch_size: expected a positive integer (1, 2, ...), "
                                          "got 'eight'"),
    ("val_dataloader.num_workers=-1", "val_dataloader.num_workers: expected a non-negative integer"),
    ("train_dataloader.persistent_workers=yes please", "train_dataloader.persistent_workers: expected true or false"),
    ("train_cfg.val_interval=0", "train_cfg.val_interval: expected a positive integer (1, 2, ...) (validate every N"),
    ("train_cfg.max_epochs=0", "train_cfg.max_epochs: expected a positive integer (1, 2, ...) (the number of epochs"),
    ("train_cfg.max_epochs=-1", "train_cfg.max_epochs: expected a positive integer"),
    ("optim_wrapper.optimizer.lr=fast", "-o: optim_wrapper.optimizer.lr: expected a non-negative number (e.g. 0.01 "
                                        "or 1e-4), got 'fast'"),
    ("optim_wrapper.optimizer.weight_decay=-0.1", "optim_wrapper.optimizer.weight_decay: expected a non-negative"),
    ("optim_wrapper.optimizer.betas=[0.9]", "optim_wrapper.optimizer.betas: expected two numbers in [0, 1)"),
    ("default_hooks.logger.interval=0", "default_hooks.logger.interval: expected a positive integer"),
])
def test_bad_values_of_well_known_keys_name_key_and_expectation(override, expected):
    assert expected in _problem(override)


def test_max_iters_of_an_iteration_loop_is_checked():
    message = _problem("train_cfg={_delete_: true, type: IterBasedTrainLoop, max_iters: 0, val_interval: 10}")
    assert "train_cfg.max_iters: expected a positive integer (1, 2, ...) (the number of iterations" in message


def test_values_from_a_file_name_that_file(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"_base_: [{DEMO_CFG}]\ntrain_cfg: {{val_interval: 0}}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: train_cfg\.val_interval: expected a positive integer"):
        check_config(load_config(str(cfg)))


def test_optimizer_given_as_a_list():
    message = _problem("optim_wrapper.optimizer=[{type: AdamW, lr: 0.001}]")
    assert message.startswith("-o: optim_wrapper.optimizer: expected one optimizer, a mapping such as "
                              "{type: AdamW, lr: 0.001}, got a list")


def test_pipeline_given_as_a_mapping():
    message = _problem("train_dataloader.dataset.pipeline={type: LoadImageFromFile}")
    assert message.startswith("-o: train_dataloader.dataset.pipeline: expected a list of transforms")
    assert "got a mapping" in message


@pytest.mark.parametrize("override, key, listed", [
    ("optim_wrapper.optimizer={_delete_: true, lr: 0.1}", "optim_wrapper.optimizer", "AdamW"),
    ("model.backbone={_delete_: true, base_channels: 4}", "model.backbone", "UNet"),
    ("train_dataloader.dataset.pipeline=[{scale: [64, 64]}]", "train_dataloader.dataset.pipeline[0]", "Resize"),
])
def test_dict_without_type_names_key_and_valid_types(override, key, listed):
    message = _problem(override)
    assert message.startswith(f"-o: {key}: a 'type' is needed to say which class to build, but there is none")
    assert "Valid types: " in message and listed in message.split("Valid types: ")[1]
    assert "python -m oars.config.check --list" in message


def test_backbone_without_type_lists_backbones_only():
    message = _problem("model.backbone={_delete_: true, base_channels: 4}")
    valid = message.split("Valid types: ")[1].split(";")[0]
    assert "ResNet" in valid and "UNet" in valid and "CrossEntropyLoss" not in valid and "FCNHead" not in valid


def test_wrong_value_type_names_the_key_being_built(demo_data, tmp_path):
    """Not checked up front (any class argument): the dict being built when the class raised is named."""
    from oars.engine.runner import build_runner, prepare_config

    cfg = prepare_config(load_config(DEMO_CFG, demo_overrides(demo_data) + ["model.backbone.base_channels=sixteen"]),
                         work_dir=str(tmp_path))
    with pytest.raises(ConfigError) as info:
        build_runner(cfg)
    message = str(info.value)
    assert message.startswith("-o: model.backbone.base_channels: expected an integer (the default is 64), "
                              "got 'sixteen'")
    assert "building model.backbone, a UNet, failed: TypeError" in message


def test_non_utf8_byte_names_file_line_and_column(tmp_path):
    cfg = tmp_path / "latin1.yaml"
    cfg.write_bytes(b"model:\n  num_classes: 4  # caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(cfg))
    message = str(info.value)
    assert message.startswith(f"{cfg}:2:24: not UTF-8 text: byte 0xe9 cannot be decoded (line 2, column 24)")
    assert "save the file as UTF-8" in message


def test_ctrl_c_while_formatting_the_config_stays_an_interrupt(monkeypatch):
    """mmengine formats the config (yapf) for every checkpoint under a bare ``except:`` that made Ctrl-C a
    "SyntaxError: Failed to format the config file"."""
    import mmengine.config.config as mm_config
    import yapf.yapflib.yapf_api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(yapf.yapflib.yapf_api, "FormatCode", interrupted)
    cfg = load_config(DEMO_CFG)
    with pytest.raises(KeyboardInterrupt):
        _ = cfg.pretty_text
    with pytest.raises(SyntaxError):  # mmengine's own Config, for comparison: what users saw
        _ = mm_config.Config(cfg.to_dict()).pretty_text
