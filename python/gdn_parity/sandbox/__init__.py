"""sglang modules outside an install: bare imports from a tree, Triton interpreter fixes."""
