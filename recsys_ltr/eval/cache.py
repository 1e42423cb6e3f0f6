"""The unit cache of evaluation runs: one JSON file per finished unit, keyed by everything that
determines it (the data's and the code's fingerprints among them), and the log of the settings a
unit has finished so far, so that an interrupted run resumes at its next setting."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from functools import cache
from pathlib import Path

import numpy as np

from recsys_ltr._io import atomic_write
from recsys_ltr.eval.methods import get_method
from recsys_ltr.eval.results import FoldResult

#: Bumped when the cached content or its meaning changes (older files are then recomputed).
CACHE_VERSION = 3


@cache
def code_fingerprint() -> str:
    """sha256 of the package's source files: cached results are tied to the code that made them."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def data_fingerprint(X) -> str:
    """sha1 of a feedback matrix's shape and sparsity pattern (what the experiment depends on)."""
    h = hashlib.sha1(repr(X.shape).encode())
    h.update(np.ascontiguousarray(X.indptr, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(X.indices, dtype=np.int64).tobytes())
    return h.hexdigest()


class UnitCache:
    """One JSON file per unit under ``directory``, written atomically (temporary file + rename).

    The file holds the unit's key (data set, data fingerprint, method spec, fold, protocol, budget,
    seed, split parameters, cutoff, the unit's context -- a stacking method's bases --,
    :data:`CACHE_VERSION`) and its :class:`~recsys_ltr.eval.results.FoldResult`; a file whose key differs or that cannot be
    read is ignored (and overwritten when recomputed).  ``contexts`` maps ``(method, fold)`` to the
    unit's context (``stack_context``), filled before the unit is looked up.
    """

    def __init__(self, directory, contexts=None, **settings):
        self.directory = Path(directory)
        self.contexts = {} if contexts is None else contexts
        self.settings = settings

    def key(self, method_name, fold) -> dict:
        key = {
            "version": CACHE_VERSION,
            **self.settings,
            "method": get_method(method_name).spec(),
            "fold": fold,
            "context": self.contexts.get((method_name, fold), {}),
        }
        return json.loads(json.dumps(key))  # tuples -> lists, as read back

    def path(self, method_name, fold) -> Path:
        key = self.key(method_name, fold)
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        s = self.settings
        stem = f"{s['dataset']}-{s['protocol']}-{s['budget']}-seed{s['seed']}-{method_name}-fold{fold}-{digest}"
        return self.directory / (re.sub(r"[^\w.@-]", "_", stem) + ".json")

    def load(self, method_name, fold, users) -> FoldResult | None:
        """The cached unit, or ``None`` when absent, made for other inputs or code, or failing its
        integrity checks (digest of its content, coverage of the fold's evaluated ``users``)."""
        path = self.path(method_name, fold)
        try:
            payload = json.loads(path.read_text())
            if payload["key"] != self.key(method_name, fold):
                return None
            if payload.get("sha256") != _digest(payload["key"], payload["result"]):
                raise ValueError("its content does not match its sha256 digest (edited or damaged)")
            result = FoldResult.from_json(payload["result"])
            result.check(users)
            return result
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            print(f"ignoring cache file {path}: {exc}; recomputing", file=sys.stderr)
            return None

    @staticmethod
    def finished(directory, protocol) -> list[FoldResult]:
        """Every finished unit of ``protocol`` under ``directory``, whatever the rest of its key, each
        checked against its digest (a file failing it is reported and left out): what reports on
        earlier runs read."""
        results = []
        for path in sorted(Path(directory).glob("*.json")):
            if path.name.endswith(".trials.json"):
                continue
            try:
                payload = json.loads(path.read_text())
                if payload["key"].get("protocol") != protocol:
                    continue
                if payload.get("sha256") != _digest(payload["key"], payload["result"]):
                    raise ValueError("its content does not match its sha256 digest (edited or damaged)")
                results.append(FoldResult.from_json(payload["result"]))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                print(f"ignoring cache file {path}: {exc}", file=sys.stderr)
        return results

    def store(self, result: FoldResult) -> Path:
        """Write the finished unit (with the digest of its content) and drop its :class:`TrialLog`."""
        path = self.path(result.method, result.fold)
        key, content = self.key(result.method, result.fold), json.loads(json.dumps(result.to_json()))
        _write_json(path, {"key": key, "result": content, "sha256": _digest(key, content)})
        self.trial_log(result.method, result.fold).clear()
        return path

    def trial_log(self, method_name, fold, resume=True) -> TrialLog:
        """The log of the settings the unit has finished (``resume=False``: start it afresh)."""
        path = self.path(method_name, fold)
        return TrialLog(path.with_name(path.stem + ".trials.json"), self.key(method_name, fold), resume)


class TrialLog:
    """The settings of one unit finished so far (JSON, rewritten atomically after each), so that an
    interrupted unit resumes at its next setting.  A log whose key differs is ignored."""

    def __init__(self, path, key, resume=True):
        self.path, self.key, self.resume = Path(path), key, resume
        self.trials = []

    def load(self) -> list[dict]:
        self.trials = []
        if self.resume:
            try:
                payload = json.loads(self.path.read_text())
                if payload["key"] == self.key:
                    self.trials = list(payload["trials"])
            except FileNotFoundError:
                pass
            except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
                print(f"ignoring unreadable trial log {self.path}: {exc}", file=sys.stderr)
        return list(self.trials)

    def append(self, trial: dict) -> None:
        self.trials.append(trial)
        _write_json(self.path, {"key": self.key, "trials": self.trials})

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _digest(key, result) -> str:
    return hashlib.sha256(json.dumps({"key": key, "result": result}, sort_keys=True).encode()).hexdigest()


def _write_json(path: Path, payload) -> None:
    """Write ``payload`` to ``path`` atomically (:func:`recsys_ltr._io.atomic_write`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(json.dumps(payload).encode()))
