"""Loading YAML configs: _base_ inheritance, merge rules, errors, -o overrides, provenance, dumping."""

from __future__ import annotations

import os
import textwrap

import pytest
import yaml
from mmengine.config import Config

from oars.config import (
    ConfigError,
    apply_overrides,
    cfg_provenance,
    config_to_yaml,
    dump_config,
    load_config,
    make_config,
    source_of,
)


def write(root, rel: str, text: str) -> str:
    path = os.path.join(str(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


# ----------------------------------------------------------------------------- inheritance


def test_single_base_merges_deeply_and_returns_mmengine_config(tmp_path):
    base = write(tmp_path, "base.yaml", """
        a: 1
        model: {backbone: {type: ResNet, depth: 50, frozen: 1}, head: {channels: 256}}
        """)
    top = write(tmp_path, "top.yaml", """
        _base_: base.yaml
        model: {backbone: {depth: 18}}
        e: 4
        """)
    cfg = load_config(top)
    assert isinstance(cfg, Config)
    assert cfg.filename == top
    assert cfg.to_dict() == {
        "a": 1,
        "model": {"backbone": {"type": "ResNet", "depth": 18, "frozen": 1}, "head": {"channels": 256}},
        "e": 4,
    }
    assert cfg.model.backbone.depth == 18  # attribute access, as mmengine's Runner uses it
    prov = cfg_provenance(cfg)
    assert prov["model.backbone.depth"] == top
    assert prov["model.backbone.type"] == base
    assert prov["model.head.channels"] == base


def test_base_list_merges_in_order_then_the_file_on_top(tmp_path):
    write(tmp_path, "b1.yaml", "v: 1\nonly1: true\nd: {x: 1}\n")
    b2 = write(tmp_path, "b2.yaml", "v: 2\nd: {y: 2}\n")
    top = write(tmp_path, "top.yaml", "_base_: [b1.yaml, b2.yaml]\nw: 3\n")
    cfg = load_config(top)
    assert cfg.to_dict() == {"v": 2, "only1": True, "d": {"x": 1, "y": 2}, "w": 3}
    assert cfg_provenance(cfg)["v"] == b2
    top2 = write(tmp_path, "top2.yaml", "_base_: [b1.yaml, b2.yaml]\nv: 9\n")
    assert load_config(top2).v == 9


def test_relative_base_paths_from_nested_folders(tmp_path):
    common = write(tmp_path, "configs/_base_/common/runtime.yaml", "log_level: INFO\nseed: 1\n")
    model = write(tmp_path, "configs/_base_/models/net.yaml", """
        _base_: ../common/runtime.yaml
        model: {type: Net, width: 8}
        seed: 2
        """)
    top = write(tmp_path, "configs/task/algo/algo_net.yaml", """
        _base_: [../../_base_/models/net.yaml]
        model: {width: 16}
        """)
    cfg = load_config(top)  # two levels below the top file: allowed
    assert cfg.to_dict() == {"log_level": "INFO", "seed": 2, "model": {"type": "Net", "width": 16}}
    prov = cfg_provenance(cfg)
    assert os.path.samefile(prov["log_level"], common)
    assert os.path.samefile(prov["seed"], model)


def test_lists_are_replaced_not_merged(tmp_path):
    write(tmp_path, "base.yaml", """
        pipeline: [{type: A}, {type: B, p: 1}, {type: C}]
        sizes: [1, 2, 3]
        """)
    top = write(tmp_path, "top.yaml", "_base_: base.yaml\npipeline: [{type: D}]\nsizes: [9]\n")
    cfg = load_config(top)
    assert cfg.to_dict() == {"pipeline": [{"type": "D"}], "sizes": [9]}
    assert cfg_provenance(cfg)["pipeline"] == top


def test_delete_replaces_the_inherited_dict(tmp_path):
    write(tmp_path, "base.yaml", """
        model:
          backbone: {type: ResNet, depth: 50, style: pytorch}
          neck: {type: FPN, out_channels: 256}
        """)
    top = write(tmp_path, "top.yaml", """
        _base_: base.yaml
        model:
          backbone: {_delete_: true, type: MobileNetV2, widen_factor: 1.0}
          neck: {_delete_: false, out_channels: 128}
          head: {_delete_: true, type: Head}
        """)
    cfg = load_config(top)
    assert cfg.to_dict() == {"model": {
        "backbone": {"type": "MobileNetV2", "widen_factor": 1.0},
        "neck": {"type": "FPN", "out_channels": 128},
        "head": {"type": "Head"},
    }}
    prov = cfg_provenance(cfg)
    assert "model.backbone.depth" not in prov and "model.backbone.style" not in prov
    assert prov["model.backbone.type"] == top
    assert "_delete_" not in config_to_yaml(cfg)


def test_delete_without_base_is_stripped_and_must_be_boolean(tmp_path):
    top = write(tmp_path, "top.yaml", "a: {_delete_: true, b: 1}\nl: [{_delete_: true, c: 2}]\n")
    assert load_config(top).to_dict() == {"a": {"b": 1}, "l": [{"c": 2}]}
    bad = write(tmp_path, "bad.yaml", "a: {_delete_: yes please, b: 1}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: a\._delete_: expected true or false"):
        load_config(bad)


def test_base_chains_of_any_depth_merge_in_order(tmp_path):
    l3 = write(tmp_path, "l3.yaml", "a: 3\nb: 3\n")
    write(tmp_path, "l2.yaml", "_base_: l3.yaml\nb: 2\nc: 2\n")
    write(tmp_path, "l1.yaml", "_base_: l2.yaml\nc: 1\n")
    top = write(tmp_path, "top.yaml", "_base_: l1.yaml\nd: 0\n")
    cfg = load_config(top)
    assert cfg.to_dict() == {"a": 3, "b": 2, "c": 1, "d": 0}
    assert cfg_provenance(cfg)["a"] == l3


def test_base_cycle_is_rejected_naming_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "_base_: b.yaml\nx: 1\n")
    write(tmp_path, "b.yaml", "_base_: a.yaml\ny: 1\n")
    with pytest.raises(ConfigError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load_config(os.path.join(tmp_path, "a.yaml"))
    me = write(tmp_path, "self.yaml", "_base_: [self.yaml]\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(me)


# ----------------------------------------------------------------------------- errors


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    bad = write(tmp_path, "_base_/broken.yaml", "a: 1\nb: c: d\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    msg = str(err.value)
    assert msg.startswith(f"{bad}:2:5: YAML syntax error")
    assert "mapping values are not allowed here" in msg
    assert "line 2, column 5" in msg and "b: c: d" in msg
    # an error inside a base names the base, not the top file
    top = write(tmp_path, "top.yaml", "_base_: _base_/broken.yaml\n")
    with pytest.raises(ConfigError, match=r"_base_/broken\.yaml:2:5: YAML syntax error"):
        load_config(top)


def test_unclosed_flow_list_reports_a_position(tmp_path):
    bad = write(tmp_path, "bad.yaml", "a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=rf"{bad}:\d+:\d+: YAML syntax error"):
        load_config(bad)


def test_duplicate_keys_and_custom_tags_are_rejected(tmp_path):
    dup = write(tmp_path, "dup.yaml", "model:\n  depth: 18\n  depth: 50\n")
    expected = r"dup\.yaml:3:3: invalid YAML: duplicate key 'depth' \(first defined on line 2\)"
    with pytest.raises(ConfigError, match=expected):
        load_config(dup)
    tag = write(tmp_path, "tag.yaml", "size: !!python/tuple [1, 2]\n")
    with pytest.raises(ConfigError, match=r"(?s)tag\.yaml:1:7: .*python/tuple.*plain YAML"):
        load_config(tag)


def test_missing_base_names_the_missing_path_and_the_referencing_file(tmp_path):
    top = write(tmp_path, "sub/top.yaml", "_base_: [../_base_/nope.yaml]\n")
    with pytest.raises(ConfigError) as err:
        load_config(top)
    msg = str(err.value)
    assert msg.startswith(f"{top}: _base_ file '../_base_/nope.yaml' not found")
    assert os.path.join(str(tmp_path), "_base_", "nope.yaml") in msg


@pytest.mark.parametrize("text, what", [("- a\n- b\n", "list"), ("just a string\n", "str"), ("", "empty")])
def test_non_mapping_top_level_names_the_file(tmp_path, text, what):
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: ")
    assert what in str(err.value)


def test_only_existing_yaml_files_are_accepted(tmp_path):
    py = write(tmp_path, "cfg.py", "a = 1\n")
    with pytest.raises(ConfigError, match=r"only YAML configs"):
        load_config(py)
    with pytest.raises(ConfigError, match=r"missing\.yaml: config file not found"):
        load_config(os.path.join(tmp_path, "missing.yaml"))
    bad_base = write(tmp_path, "b.yaml", "_base_: {a: 1}\n")
    with pytest.raises(ConfigError, match=r"_base_ must be a file path or a list"):
        load_config(bad_base)


def test_reserved_mmengine_key_is_reported_with_its_file(tmp_path):
    path = write(tmp_path, "r.yaml", "filename: x\n")
    with pytest.raises(ConfigError, match=r"r\.yaml: top-level key 'filename' is reserved"):
        load_config(path)


def test_exponent_floats_are_floats(tmp_path):
    path = write(tmp_path, "f.yaml", "lr: 1e-4\nwd: 5.0e-4\nn: 10\nname: 1e\nver: '1e-4'\n")
    cfg = load_config(path)
    assert cfg.lr == pytest.approx(1e-4) and isinstance(cfg.lr, float)
    assert cfg.wd == pytest.approx(5e-4) and cfg.n == 10
    assert cfg.name == "1e" and cfg.ver == "1e-4"


# ----------------------------------------------------------------------------- overrides


@pytest.fixture()
def base_cfg(tmp_path):
    path = write(tmp_path, "cfg.yaml", """
        optim_wrapper: {optimizer: {type: SGD, lr: 0.01}}
        train_dataloader:
          dataset:
            pipeline: [{type: Load}, {type: Resize, scale: [64, 64]}, {type: Flip, prob: 0.5}]
        model: {backbone: {type: ResNet, depth: 50}, neck: null}
        name: demo
        """)
    return path


def test_overrides_parse_values_as_yaml(base_cfg):
    cfg = load_config(base_cfg, [
        "optim_wrapper.optimizer.lr=0.02", "model.backbone.depth=18", "x=[1,2]", "flag=true",
        "name=null", "optim_wrapper.optimizer.weight_decay=1e-4", "s=hello world", "q='018'",
    ])
    assert cfg.optim_wrapper.optimizer.lr == 0.02
    assert cfg.model.backbone.depth == 18 and isinstance(cfg.model.backbone.depth, int)
    assert cfg.x == [1, 2] and cfg.flag is True and cfg.name is None
    assert cfg.optim_wrapper.optimizer.weight_decay == pytest.approx(1e-4)
    assert cfg.s == "hello world" and cfg.q == "018"


def test_overrides_create_nested_dicts_and_index_lists(base_cfg):
    cfg = load_config(base_cfg, [
        "a.b.c=value", "train_dataloader.dataset.pipeline.2.prob=0.1",
        "train_dataloader.dataset.pipeline.1.scale.0=32", "model.neck.type=FPN",
    ])
    assert cfg.a == {"b": {"c": "value"}}
    pipeline = cfg.train_dataloader.dataset.pipeline
    assert pipeline[2] == {"type": "Flip", "prob": 0.1}
    assert pipeline[1]["scale"] == [32, 64]
    assert cfg.model.neck == {"type": "FPN"}


def test_mapping_override_merges_and_delete_replaces(base_cfg):
    cfg = load_config(base_cfg, ["model.backbone={depth: 18, frozen: 1}"])
    assert cfg.model.backbone == {"type": "ResNet", "depth": 18, "frozen": 1}
    cfg = load_config(base_cfg, ["model.backbone={_delete_: true, type: MobileNet}"])
    assert cfg.model.backbone == {"type": "MobileNet"}
    assert "model.backbone.depth" not in cfg_provenance(cfg)


@pytest.mark.parametrize("override, pattern", [
    ("train_dataloader.dataset.pipeline.3.prob=0.1",
     r"index 3 in train_dataloader\.dataset\.pipeline\.3\.prob is out of range: "
     r"train_dataloader\.dataset\.pipeline is a list of length 3"),
    ("train_dataloader.dataset.pipeline.first.prob=0.1",
     r"train_dataloader\.dataset\.pipeline is a list \(length 3\); 'first' must be an index"),
    ("model.backbone.depth.x=1",
     r"cannot set 'x' inside model\.backbone\.depth: model\.backbone\.depth holds 50 \(a int\)"),
    ("model.backbone.depth", r"expected KEY=VALUE, e\.g\. -o optim_wrapper\.optimizer\.lr=0\.02"),
    ("model..depth=1", r"empty part"),
    ("x=[1, 2", r"not valid YAML"),
])
def test_bad_overrides_say_what_is_wrong(base_cfg, override, pattern):
    with pytest.raises(ConfigError, match=pattern) as err:
        load_config(base_cfg, [override])
    assert str(err.value).startswith(f"-o '{override}'")


def test_apply_overrides_on_plain_dict_and_on_config(base_cfg):
    data = {"a": {"b": [1, 2]}}
    prov: dict = {}
    assert apply_overrides(data, ["a.b.1=5", "c=1"], prov) is data
    assert data == {"a": {"b": [1, 5]}, "c": 1}
    assert prov == {"a.b[1]": "-o", "c": "-o"}
    cfg = load_config(base_cfg)
    same = apply_overrides(cfg, ["model.backbone.depth=101"])
    assert same is cfg and cfg.model.backbone.depth == 101
    assert cfg_provenance(cfg)["model.backbone.depth"] == "-o"
    assert cfg_provenance(cfg)["model.backbone.type"] == base_cfg


def test_provenance_of_overrides_and_list_items(base_cfg):
    cfg = load_config(base_cfg, ["train_dataloader.dataset.pipeline.2.prob=0.1"])
    prov = cfg_provenance(cfg)
    assert prov["train_dataloader.dataset.pipeline[2].prob"] == "-o"
    assert source_of(prov, "train_dataloader.dataset.pipeline[2].type") == base_cfg
    assert source_of(prov, "train_dataloader.dataset.pipeline[0].type") == base_cfg
    assert source_of(prov, "nowhere.at.all") is None
    cfg = load_config(base_cfg, ["model.backbone.frozen=1"])
    assert source_of(cfg_provenance(cfg), "model.backbone") == f"{base_cfg}, -o"  # a mapping: its leaves' files


# ----------------------------------------------------------------------------- dumping


def test_dump_round_trips_through_safe_load_and_load_config(tmp_path, base_cfg):
    cfg = load_config(base_cfg, ["extra.tuple_like=[1, 2]", "lr=1e-5", "unicode=café"])
    cfg.model["out_indices"] = (0, 1, 2)  # tuples set in code become lists
    out = tmp_path / "run" / "config.yaml"
    dump_config(cfg, out)
    text = out.read_text()
    assert "_oars_provenance" not in text and "provenance" not in text
    loaded = yaml.safe_load(text)
    expected = cfg.to_dict()
    expected["model"]["out_indices"] = [0, 1, 2]
    assert loaded == expected
    assert load_config(str(out)).to_dict() == expected
    assert config_to_yaml(cfg) == text
    assert sorted(os.listdir(out.parent)) == ["config.yaml"]  # no temp file left behind


def test_mmengine_dump_does_not_include_provenance(tmp_path, base_cfg):
    cfg = load_config(base_cfg)
    assert cfg_provenance(cfg)
    out = tmp_path / "mm.yaml"
    cfg.dump(str(out))
    assert "provenance" not in out.read_text()
    assert "provenance" not in cfg.pretty_text
    assert yaml.safe_load(out.read_text()) == cfg.to_dict()


def test_provenance_survives_deepcopy_and_unsupported_values_fail_to_dump(base_cfg):
    import copy

    cfg = load_config(base_cfg)
    assert cfg_provenance(copy.deepcopy(cfg)) == cfg_provenance(cfg)
    cfg.model["fn"] = print
    with pytest.raises(ConfigError, match=r"model\.fn: a builtin_function_or_method value"):
        config_to_yaml(cfg)
    assert make_config({"a": 1}).to_dict() == {"a": 1}
