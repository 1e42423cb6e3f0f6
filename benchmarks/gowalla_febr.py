"""``FEBR()`` at its defaults on gowalla's LightGCN split: fit time, peak memory, Recall@20 / NDCG@20.

Fits ``FEBR(random_state=seed)`` on ``train.txt`` + ``valid.txt`` of ``../shared/datasets/gowalla``
(no validation given: FEBR carves its own) and ranks every item outside a user's training positives
for ``test.txt``, as ``python -m recsys_ltr.eval --protocol fixed`` does for its refitted settings.
Prints each stage of the fit (FEBR's INFO log) with the resident memory at that moment and the
peak since the previous stage (sampled every 50 ms), then the fit's seconds and peak (``ru_maxrss``)
and the test metrics::

    NUMBA_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 RECSYS_LTR_DATA=../shared/datasets \\
        python benchmarks/gowalla_febr.py [--seed 0] [--threads 2] [--validation-metric REC@20]

``--validation-metric REC@20``: FEBR's own validation decisions (tail base, early stopping, paired
test) judged by the benchmark's metric in place of its default, NDCG@20.
"""

from __future__ import annotations

import argparse
import logging
import resource
import threading
import time

from recsys_ltr.datasets import load_presplit
from recsys_ltr.febr import FEBR
from recsys_ltr.metrics import evaluate

GB = 2**30


def _rss() -> int:
    """Resident bytes of this process now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


class _StageMemory(logging.Handler):
    """Prints every FEBR stage with the resident memory now and the peak since the last stage."""

    def __init__(self):
        super().__init__()
        self.peak = 0
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while True:
            self.peak = max(self.peak, _rss())
            time.sleep(0.05)

    def emit(self, record):
        rss = _rss()
        print(
            f"{time.strftime('%H:%M:%S')} rss {rss / GB:.2f} GB, peak since last {self.peak / GB:.2f} GB | {record.getMessage()}"
        )
        self.peak = rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--validation-metric", default="auto", help="FEBR's (default: its own, NDCG@20)")
    args = parser.parse_args()
    logger = logging.getLogger("recsys_ltr")
    logger.addHandler(_StageMemory())
    logger.setLevel(logging.INFO)
    _, parts = load_presplit("gowalla")
    train = (parts["train"] + parts["valid"]).tocsr()
    t0 = time.perf_counter()
    model = FEBR(random_state=args.seed, num_threads=args.threads, validation_metric=args.validation_metric)
    model.fit(train)
    fit = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
    result = evaluate(model, train, parts["test"], metrics=["REC@20", "NDCG@20"], num_threads=args.threads)
    print(
        f"fit {fit:.1f} s, peak {peak:.2f} GB; Recall@20 {result['REC@20']:.4f}, NDCG@20 {result['NDCG@20']:.4f}; "
        f"tail {' + '.join(model.tail_bases_)}, paired test of the stacked scorer {model.stacked_gain_}"
    )


if __name__ == "__main__":
    main()
