"""gdn-parity: lossless speculative decoding for hybrid Gated-DeltaNet models in SGLang.

The package materialises, exports and applies the patch series in ``patches/``
and hosts the tools that prove and debug decode/verify parity.
"""

__version__ = "0.1.0"
