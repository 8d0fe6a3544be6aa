"""The GPU's copy bandwidth, run by the servers' Python before each start:
``python -m gdn_parity.servercost.copyprobe`` prints one JSON line, ``bytes_per_s`` (a
device-to-device copy's, reads and writes counted: ``gdn_parity.drift.cost.floor``'s
``copy_bandwidth``), ``device`` (torch's name of it) and ``software`` (the torch and triton
the servers import); exit status 1 without a CUDA device.
"""

from __future__ import annotations

import json
import sys

from gdn_parity.drift.cost.floor import copy_bandwidth


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(
            "copyprobe: torch sees no CUDA device (the floor's bandwidth is a GPU's)",
            file=sys.stderr,
        )
        return 1
    import triton

    bytes_per_s = copy_bandwidth()
    software = f"torch {torch.__version__}, triton {triton.__version__}"
    device = torch.cuda.get_device_name()
    print(json.dumps({"bytes_per_s": bytes_per_s, "device": device, "software": software}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
