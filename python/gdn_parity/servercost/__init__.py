"""What Base, DSpark and exactness cost on real sglang servers: ``gdn-parity server-cost PLAN``.

A plan (TOML) names servers, as server-parity's do, and benchmarks: batch sizes, a prompt
length, two output lengths and repeats. The runner starts each server alone, once per
simulated accept length of a DSpark server, measures the GPU's copy bandwidth before each
start, sends every batch concurrently, and derives from sglang's ``meta_info`` the time per
output token and per step. Beside each it puts the floor: the bytes a step must move
(``gdn_parity.drift.cost.floor``) over that bandwidth. It reuses ``gdn_parity.realserver``'s
plan reader, launch, processes and client; only the bandwidth probe needs torch, and it runs
in the servers' Python.
"""
