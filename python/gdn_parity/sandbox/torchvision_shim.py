"""Let PyPI's torchvision import beside the CPU build of torch (CPU runs only).

PyPI's torchvision 0.28.0 is built against CUDA torch; beside CPU torch its C
extension does not load, and its Python side then fails at import with
"operator torchvision::nms does not exist" because it registers fake kernels for
``torchvision::nms`` and ``torchvision::qnms``. sglang's config package imports
torchvision (image transforms), so server-argument resolution needs it. Defining
the two operator schemas (as torchvision's C++ declares them) before the import
is enough; no torchvision operator is ever run here. The test bed installs it,
and so does ``sglang_tree.use_tree`` on CPU (the server stack imports sglang's
backends, which import the configs).
"""

from __future__ import annotations

import torch

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_library: torch.library.Library | None = None


def install() -> None:
    """Define the schemas once, unless torchvision's own extension already did."""
    global _library
    if _library is not None or hasattr(torch.ops.torchvision, "nms"):
        return
    _library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _library.define(schema)
