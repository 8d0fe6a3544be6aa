"""The drift harness: a hybrid GDN model on sglang's kernels, its runs, the demo and server."""
