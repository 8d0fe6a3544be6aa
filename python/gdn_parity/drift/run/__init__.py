"""Runs of the model: modes, variants, decode/verify loops, the worker and its typed results."""
