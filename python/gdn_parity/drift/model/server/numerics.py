"""What computes each source of decode/verify difference in the server stack.

A server sets them from its arguments (``ServerNumerics.of_server``): GEMMs and
the Triton attention backend follow ``--enable-deterministic-inference`` (verify
attention as decode rows also needs the flag or its variable), the GDN verify
kernel ``--gdn-verify-exact-parity``, the decode conv
``SGLANG_ENABLE_GDN_DECODE_FUSED_PROJ_CONV``. ``ServerNumerics.isolating``
makes every source exact but one, which runs as the default server runs it:
the attribution's "one source at a time".
"""

from __future__ import annotations

from dataclasses import dataclass

SPLIT_TILE = 256  # SGLANG_TRITON_DECODE_SPLIT_TILE_SIZE's default (deterministic inference)
NUM_KV_SPLITS = 8  # --triton-attention-num-kv-splits' default
SM_COUNT = 132  # get_device_core_count on an H100/H200; the split heuristic reads it

SOURCES = ("gemm", "attention", "conv", "gdn")  # the sources (attribute.components.Kind)


@dataclass(frozen=True)
class ServerNumerics:
    batch_invariant_gemms: bool  # sglang's batch_invariant_ops, as deterministic inference
    deterministic_attention: bool  # TritonAttnBackend under deterministic inference
    # its target verify as decode rows (0008): deterministic inference, asked for by the
    # flag or SGLANG_DETERMINISTIC_VERIFY_AS_DECODE=1
    verify_as_decode: bool
    fused_decode_conv: bool  # decode's fused projection-unpack + conv kernel (CUDA only)
    exact_parity: bool  # --gdn-verify-exact-parity

    @property
    def deterministic(self) -> bool:
        """--enable-deterministic-inference as a server sets it: GEMMs and attention."""
        return self.batch_invariant_gemms and self.deterministic_attention

    @classmethod
    def of_server(cls, deterministic: bool, exact_parity: bool) -> ServerNumerics:
        """What a server started with these flags runs (sglang must be importable)."""
        from sglang.srt.environ import envs

        fused = envs.SGLANG_ENABLE_GDN_DECODE_FUSED_PROJ_CONV.get()
        try:  # sglang's own rule, in a tree with patch 0008
            from sglang.srt.layers.attention.verify_decode_rows import verify_as_decode_requested
        except ImportError:
            asked = False
        else:
            asked = verify_as_decode_requested(exact_parity)
        return cls(deterministic, deterministic, deterministic and asked, fused, exact_parity)

    @classmethod
    def isolating(cls, source: str) -> ServerNumerics:
        """Every source exact but ``source`` ("none": all exact), which runs as by default.

        Exact: batch-invariant mode (its GEMMs, the ops it overrides, the gated
        norm's fixed row blocking), deterministic attention (verify through the
        decode kernel, 0008), decode's conv through ``causal_conv1d_update`` (the
        kernel verify runs), the flag. Default: torch's GEMMs and the norm's row
        blocking by row count, the backend's default kernels, the fused decode conv,
        the default verify kernel.
        """
        if source not in (*SOURCES, "none"):
            raise ValueError(f"no source {source!r}; choose from {SOURCES} or 'none'")
        exact_attention = source != "attention"
        return cls(
            source != "gemm", exact_attention, exact_attention, source == "conv", source != "gdn"
        )


def enable_batch_invariant_gemms(device: str) -> bool:
    """``ModelRunner.maybe_enable_batch_invariant_mode``: sglang's batch-invariant aten ops.

    They are registered for the CUDA dispatch key and their kernels assert CUDA
    tensors, so on the CPU test bed this does nothing and returns False: torch's
    CPU GEMMs run (bf16 GEMMs there are row-count invariant; see docs/drift-stacks.md).
    """
    if device != "cuda":
        return False
    from sglang.srt.batch_invariant_ops import enable_batch_invariant_mode

    enable_batch_invariant_mode()
    return True
