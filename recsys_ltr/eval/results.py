"""The records of an evaluation run: the protocols, the metrics of their tables, and what a unit
-- one method on one fold -- yields (:class:`FoldResult`, ``Skipped``) and a run
(:class:`Experiment`)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

import numpy as np

PROTOCOLS = ("standard", "novelty", "fixed", "temporal")


#: The dissertation's per-user holdout protocols (``--protocol both``).
HOLDOUT_PROTOCOLS = ("standard", "novelty")


#: The protocols on one given split ``parts=(train, valid, test)``: tuned on valid, refitted on
#: train + valid, tested on test (a published split; a time-ordered split).
PARTS_PROTOCOLS = ("fixed", "temporal")


TABLE_METRICS = ("ADG", "REC@{k}", "MAP", "NDCG", "ATOP")


#: The fixed-split table: the published benchmarks' Recall@k and NDCG@k first.
FIXED_METRICS = ("REC@{k}", "NDCG@{k}", "ADG", "MAP", "ATOP")


def table_metrics(k: int, protocol: str = "standard") -> list[str]:
    """The metrics of Tables 4.3 / 4.4 with the recall cutoff ``k`` (fixed protocol: Recall@k, NDCG@k first)."""
    return [m.format(k=k) for m in (FIXED_METRICS if protocol == "fixed" else TABLE_METRICS)]


def selection_metric(protocol: str, k: int) -> str:
    """The validation metric that settings are chosen on: ADG (sec. 4.7.3), ``REC@k`` on a fixed split."""
    return f"REC@{k}" if protocol == "fixed" else "ADG"


def filtered_name(method: str, exclude_top: int) -> str:
    """Name of ``method``'s novelty row with the ``exclude_top`` most popular items pushed below the rest."""
    return f"{method} (top-{exclude_top} last)"


def method_of(row: str) -> str:
    """The method of a table row: ``row`` itself, or the method of a :func:`filtered_name` row."""
    return re.sub(r" \(top-\d+ last\)$", "", row)


@dataclass
class FoldResult:
    """Test metrics of one method on one fold, with the setting chosen on validation.

    ``per_user`` holds the per-user test values of :func:`table_metrics` (aligned with ``users``);
    ``trials`` lists every setting tried: ``level`` (1: main hyper-parameter, 2: secondary),
    ``params``, ``validation`` (the ``select`` metric on validation) and ``fit_seconds``.
    ``filtered`` is the novelty protocol's second row of the same model (:func:`filtered_name`).
    ``seconds`` is the unit's wall time where it ran.
    """

    method: str
    fold: int
    params: dict
    validation: float
    test: dict[str, float]
    test_stderr: dict[str, float]
    per_user: dict[str, np.ndarray] = field(repr=False)
    users: np.ndarray = field(repr=False)
    fit_seconds: float = 0.0
    trials: list[dict] = field(default_factory=list, repr=False)
    select: str = "ADG"
    filtered: FoldResult | None = field(default=None, repr=False)
    seconds: float = 0.0  # wall time of the whole unit (tuning, refit, test)

    def to_json(self) -> dict:
        out = asdict(replace(self, filtered=None))
        out["per_user"] = {m: np.asarray(v, dtype=float).tolist() for m, v in self.per_user.items()}
        out["users"] = np.asarray(self.users, dtype=np.int64).tolist()
        out["filtered"] = None if self.filtered is None else self.filtered.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict) -> FoldResult:
        data = dict(data)
        data["per_user"] = {m: np.asarray(v, dtype=float) for m, v in data["per_user"].items()}
        users = np.asarray(data["users"])
        if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):  # 0.5 was read as user 0
            raise ValueError(f"users must be a list of integer user ids, got {users.dtype} of shape {users.shape}")
        data["users"] = users.astype(np.int64)
        data["filtered"] = None if data.get("filtered") is None else cls.from_json(data["filtered"])
        return cls(**data)

    def rows(self) -> list[FoldResult]:
        """This result and its ``filtered`` row, if any: the table rows of the unit."""
        return [self] if self.filtered is None else [self, self.filtered]

    def check(self, users: np.ndarray) -> None:
        """Raise ``ValueError`` unless the result covers exactly the evaluated ``users`` and every
        mean is the mean of its per-user values."""
        if not np.array_equal(self.users, users):
            raise ValueError(f"holds {self.users.size} users, the fold evaluates {users.size}")
        for name, values in self.per_user.items():
            if values.shape != users.shape or not np.all(np.isfinite(values)):
                raise ValueError(f"per-user {name} has {values.size} values for {users.size} users")
            if not np.isclose(self.test.get(name, np.nan), values.mean(), rtol=1e-12, atol=1e-15):
                raise ValueError(f"test {name} = {self.test.get(name)!r} is not the mean of its per-user values")
        if self.filtered is not None:
            self.filtered.check(users)


@dataclass
class Skipped:
    """A unit whose method cannot run here (missing optional dependency, catalogue too large)."""

    method: str
    fold: int
    reason: str


@dataclass
class Experiment:
    """Outcome of :func:`~recsys_ltr.eval.runner.run_experiment`: results per (fold, method) in a fixed order, skipped
    units, and the units computed in this run (the others came from the cache)."""

    results: list[FoldResult]
    skipped: list[Skipped]
    computed: list[tuple[str, int]]
