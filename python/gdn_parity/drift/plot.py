"""The demo's figure: per-layer GDN state divergence from Base against verify round.

One panel per (speculative mode, variant); one line per GDN layer, the max
absolute difference of its committed state (SSM or conv, whichever is larger)
from Base decode's at the same position: per layer what the table's "max abs
state diff" takes the maximum of over all layers. A dotted line marks the first
token divergence; rounds after it have no Base counterpart and are not drawn (the
panel says so). Bitwise-equal panels say so too. The legend sits below the panels.
"""

from __future__ import annotations

from pathlib import Path

from gdn_parity.debug.tokens import first_divergence
from gdn_parity.drift.run.results import ModeResult, RoundDiff, VariantResult


def _divergence_round(mode: ModeResult, base_tokens: list[int], prompt_len: int) -> int | None:
    index = first_divergence(base_tokens, mode.tokens)
    if index is None:
        return None
    for d in mode.diffs:
        if d.pos - prompt_len >= index:
            return d.round
    return None


def layer_curves(diffs: list[RoundDiff], layers: int) -> tuple[list[int], list[list[float]]]:
    """The rounds on Base's path and, per GDN layer, its state difference at each."""
    on_path = [d for d in diffs if d.on_path]
    return [d.round for d in on_path], [[d.layer_max[i] for d in on_path] for i in range(layers)]


def write_figure(results: list[VariantResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [m.label for m in results[0].modes]
    fig, axes = plt.subplots(
        len(labels),
        len(results),
        figsize=(4.6 * len(results), 2.6 * len(labels) + 1.0),
        sharex="row",
        sharey=True,
        squeeze=False,
    )
    stops = []
    for col, result in enumerate(results):
        for row, mode in enumerate(result.modes):
            ax = axes[row][col]
            rounds, curves = layer_curves(mode.diffs, len(result.gdn_layers))
            for layer, curve in zip(result.gdn_layers, curves, strict=True):
                ax.plot(rounds, curve, label=f"GDN layer {layer}", lw=1.4)
            ax.set_yscale("symlog", linthresh=1e-8)
            stop = _divergence_round(mode, result.base.tokens, result.prompt_len)
            if stop is not None:
                ax.axvline(stop, color="k", ls=":", lw=1.2)
                stops.append((ax, stop))
            if rounds and all(v == 0 for curve in curves for v in curve):
                ax.text(
                    0.5,
                    0.5,
                    "bitwise equal",
                    ha="center",
                    va="center",
                    fontsize=10,
                    transform=ax.transAxes,
                )
            if row == 0:
                ax.set_title(result.variant, fontsize=12)
            if col == 0:
                ax.set_ylabel(f"{mode.label}\nmax |d state|", fontsize=10)
            if row == len(labels) - 1:
                ax.set_xlabel("verify round", fontsize=10)
            ax.tick_params(labelsize=9)
            ax.grid(alpha=0.3)
    for ax, stop in stops:  # once every panel of the row has set the shared x range
        lo, hi = ax.get_xlim()
        left = stop > (lo + hi) / 2  # the note on the side with room
        ax.annotate(
            "tokens diverge:\ncurves stop",
            xy=(stop, 0.5),
            xycoords=("data", "axes fraction"),
            xytext=(-4 if left else 4, 0),
            textcoords="offset points",
            ha="right" if left else "left",
            va="center",
            fontsize=8,
        )
    handles, names = axes[0][0].get_legend_handles_labels()
    # Below the panels, never over a curve.
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=10, frameon=False)
    fig.suptitle(
        "Committed GDN state (SSM or conv, max |spec - Base| per layer) after each round "
        "(dotted: tokens diverge)",
        fontsize=12,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)
