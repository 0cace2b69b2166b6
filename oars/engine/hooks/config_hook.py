"""Store the resolved YAML config inside every checkpoint, so a checkpoint alone can be rebuilt."""

from __future__ import annotations

from mmengine.hooks import Hook

from oars.registry import HOOKS


@HOOKS.register_module()
class ConfigInCheckpointHook(Hook):
    """Writes ``checkpoint['meta']['config_yaml']`` (the resolved config as YAML text)."""

    priority = "VERY_LOW"

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        from oars.config import config_to_yaml
        from oars.engine.runner import shareable_config

        checkpoint.setdefault("meta", {})["config_yaml"] = config_to_yaml(shareable_config(runner.cfg))
