"""Benchmark runs: the dissertation's experimental protocol (``python -m recsys_ltr.eval``)."""

from recsys_ltr.eval.runner import FoldResult, run_experiment, tune_and_test

__all__ = ["FoldResult", "run_experiment", "tune_and_test"]
