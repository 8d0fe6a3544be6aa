"""Which conv-window elements differ between verify and decode (fp16 act, bf16 state).

The two cases of ``conv_parity.py`` (same seeds) where a window differed before patch
0005's shift fix; prints each differing element with its old-state row.

    python benchmark/gpu/studies/conv_window_debug.py TREE_0001_0004
"""

import sys
from pathlib import Path

import torch

from gdn_parity.sandbox.bare_import import import_sglang_from

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # conv_parity
from conv_parity import WIDTH, bits, verify_and_decode  # noqa: E402

CASES = [(11, (64, 10240, 8)), (9, (1, 2048, 2))]  # conv_parity's seeds for these shapes


def main() -> None:
    import_sglang_from(Path(sys.argv[1]))
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    for seed, shape in CASES:
        (x, state, idx), (_, windows), (_, d_windows) = verify_and_decode(
            causal_conv1d_update, seed, torch.float16, torch.bfloat16, *shape
        )
        for t, d in enumerate(d_windows):
            w = windows[:, t]
            bad = (bits(w) != bits(d)).nonzero()
            if len(bad):
                print(f"seed {seed} step {t}: {len(bad)} elements differ; first 8:")
            for b, f, c in bad[:8].tolist():
                token = t - (WIDTH - 2 - c)  # the token column c holds after step t
                print(
                    f"  b={b} f={f} col={c} token={token} verify={w[b, f, c].item()!r} "
                    f"decode={d[b, f, c].item()!r} old state={state[idx[b], f, :].tolist()}"
                )


if __name__ == "__main__":
    main()
