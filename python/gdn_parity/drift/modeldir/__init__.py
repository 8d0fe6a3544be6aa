"""Model directories a real sglang server loads: the harness's model as a Qwen3.5 checkpoint,
and a DSpark draft's config beside it."""
