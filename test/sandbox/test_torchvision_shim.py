"""The torchvision shim lets torchvision and sglang's configs import on CPU torch."""

from __future__ import annotations


def test_torchvision_imports_and_its_transforms_work():
    import torch
    import torchvision.transforms.functional as F

    image = torch.arange(12, dtype=torch.float32).view(1, 3, 4)
    assert torch.equal(F.hflip(image), image.flip(-1))


def test_sglang_configs_import(sglang_tree):
    from sglang.srt.configs.qwen3_5 import Qwen3_5Config

    assert Qwen3_5Config.model_type == "qwen3_5"
