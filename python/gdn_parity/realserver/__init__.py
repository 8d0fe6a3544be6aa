"""Base against DSpark on real sglang servers: ``gdn-parity server-parity PLAN``.

A plan (TOML) names servers (``python -m sglang.launch_server`` from an sglang tree)
and comparisons (a Base server, a speculative one, batch sizes, an expectation). The
runner starts the servers one at a time, sends every batch's requests concurrently to
both, compares every request's output tokens (and, where both servers trace, their GDN
states), and stops everything it started. Standard library only: it runs on the GPU
machine beside the servers, with ``gdn_parity.debug``'s client, hashes and trace diff.
"""
