"""Dissertation Fig. 3.1 with the OPT-EST estimator added (Eq. 3.20).

For N_irr = 250 and the reciprocal, precision-at-5 and uniform losses, plots L_opt(n_v), the
β-truncated expected WARP loss L̃^(β)_WARP(n_v) (Eq. 3.11) for β in {1, 5, 20, 50, N_irr}, and
the expected loss of the OPT-EST estimator for the same β; prints the squared error
sum_{n_v} (L̃^(β)(n_v) - L_opt(n_v))^2 of both estimators.

Run:  python eval/fig_3_1.py [output.png]      (default: eval/fig_3_1.png next to this script)
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from recsys_ltr.warp import expected_truncated_loss, nml_loss, opt_est, warp_estimator

N_IRR, K = 250, 5
BETAS = (1, 5, 20, 50, N_IRR)
LOSSES = (("reciprocal", "(a) reciprocal loss"), ("pak", f"(b) precision-at-{K} loss"), ("uniform", "(c) uniform loss"))


def curves(kind: str):
    """L_opt and, per β, the expected truncated loss of L̂_WARP and of OPT-EST."""
    L = nml_loss(kind, N_IRR, k=K if kind == "pak" else None)
    warp = warp_estimator(L, N_IRR)
    out = {}
    for beta in BETAS:
        out[beta] = (
            expected_truncated_loss(warp, beta, N_IRR),
            expected_truncated_loss(opt_est(L, beta, N_IRR), beta, N_IRR),
        )
    return L, out


def main(path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(BETAS)))
    n_v = np.arange(N_IRR + 1)
    print(f"squared error sum_nv (L~(beta)(n_v) - L_opt(n_v))^2, N_irr = {N_IRR}, k = {K}")
    print(f"{'loss':<11}{'beta':>6}{'WARP':>14}{'OPT-EST':>14}{'ratio':>9}")
    for ax, (kind, title) in zip(axes, LOSSES):
        L, by_beta = curves(kind)
        ax.plot(n_v, L, color="black", lw=2.5, label=r"$L_{opt}$")
        for color, beta in zip(colors, BETAS):
            warp, opt = by_beta[beta]
            name = r"N_{irr}" if beta == N_IRR else str(beta)
            ax.plot(n_v, warp, color=color, lw=1.4, label=rf"$\tilde L^{{({name})}}_{{WARP}}$")
            ax.plot(n_v, opt, color=color, lw=1.4, ls="--", label=rf"$\tilde L^{{({name})}}_{{OPT}}$")
            e_w, e_o = np.sum((warp - L) ** 2), np.sum((opt - L) ** 2)
            ratio = f"{e_w / e_o:9.1f}" if e_o > 1e-12 else f"{'inf' if e_w > 1e-12 else '-':>9}"
            print(f"{kind:<11}{beta:>6}{e_w:>14.4g}{e_o:>14.4g}{ratio}")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(0, N_IRR)
        ax.set_ylim(0, 1.2)
        ax.set_xlabel(r"$n_v$ (number of violators)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loss")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, borderaxespad=0)  # outside
    fig.suptitle(
        rf"Fig. 3.1: $L_{{opt}}$ vs expected $\beta$-truncated loss, $N_{{irr}}={N_IRR}$; "
        "solid: WARP estimator (Eq. 3.10), dashed: OPT-EST (Eq. 3.20)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("fig_3_1.png"))
