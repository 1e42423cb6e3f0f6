"""Safe model files: one ``.npz`` of numeric arrays plus a JSON header, never pickles.

Every estimator's ``save``/``load`` goes through :func:`write_npz` / :func:`read_npz`, so a
malformed, truncated or foreign file always raises a clear ``ValueError`` (``FileNotFoundError``
for a missing one) and ``allow_pickle=False`` holds everywhere.
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

__all__ = ["DenseStateIO", "npz_path", "read_npz", "write_npz"]


def npz_path(path) -> str:
    """``path`` as a string, with ``.npz`` appended unless it has it or names an existing file."""
    path = os.fspath(path)
    if not path.endswith(".npz") and not os.path.exists(path):
        path += ".npz"
    return path


def write_npz(path, header: dict, arrays: dict) -> None:
    """Write ``arrays`` and the JSON ``header`` to ``path`` (``.npz`` appended if missing)."""
    try:
        text = json.dumps(header)
    except TypeError as exc:
        raise ValueError(f"parameters are not JSON-serialisable (random_state a Generator?): {exc}") from exc
    if "header" in arrays:
        raise ValueError("'header' is reserved for the JSON header")
    np.savez(npz_path(path), header=np.array(text), **arrays)


def read_npz(path, fmt: str, version: int) -> tuple[dict, dict]:
    """Read a file written by :func:`write_npz`; returns ``(header, arrays)``.

    Checks that the header is JSON naming format ``fmt`` at ``version`` with a string ``class``
    and a dict ``params``; anything else raises ``ValueError`` naming the file.
    """
    path = npz_path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{path} is not a recsys_ltr model file (.npz): {exc}") from exc
    if "header" not in arrays:
        raise ValueError(f"{path} has no 'header' entry: not written by recsys_ltr")
    try:
        header = json.loads(str(arrays.pop("header")))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON header: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise ValueError(f"{path}: header does not describe a {fmt} file")
    if header.get("version") != version:
        raise ValueError(f"{path}: unsupported format version {header.get('version')!r} (expected {version})")
    for key, kind in (("class", str), ("params", dict)):
        if not isinstance(header.get(key), kind):
            raise ValueError(f"{path}: header field {key!r} is missing or not a {kind.__name__}")
    return header, arrays


class DenseStateIO:
    """``save``/``load`` for estimators whose fitted state is a few dense arrays.

    Subclasses list them in ``_state`` (name -> ndim, finite floats, required) and
    ``_optional_state`` (name -> ndim, any numeric dtype, may be ``None``), and define
    ``_check_fitted()``, ``_restore(path)`` (cross-checks shapes, derives the rest) and
    ``_check_loaded_params()`` (the estimator's own parameter validation, run by :meth:`load`
    on the file's parameters once the arrays are set and before ``_restore``).
    """

    _FORMAT, _VERSION = "recsys_ltr.metric", 1
    _state: dict = {}
    _optional_state: dict = {}

    def save(self, path):
        """Write parameters and fitted arrays to ``path`` (``.npz`` appended if missing)."""
        self._check_fitted()
        arrays = {k: getattr(self, k) for k in self._state}
        for name in self._optional_state:
            value = getattr(self, name, None)
            if value is not None:
                if not np.issubdtype(np.asarray(value).dtype, np.number):
                    raise ValueError(f"{name} must be numeric to be saved, got dtype {np.asarray(value).dtype}")
                arrays[name] = value
        header = {
            "format": self._FORMAT,
            "version": self._VERSION,
            "class": type(self).__name__,
            "params": self.get_params(),
        }
        write_npz(path, header, arrays)

    @classmethod
    def load(cls, path):
        """Read an estimator written by :meth:`save`; malformed files raise ``ValueError``."""
        header, arrays = read_npz(path, cls._FORMAT, cls._VERSION)
        path = npz_path(path)
        if header["class"] != cls.__name__:
            raise ValueError(f"{path} does not hold a {cls.__name__} (it holds a {header['class']})")
        allowed = set(cls._state) | set(cls._optional_state)
        if not set(cls._state) <= set(arrays) <= allowed:
            raise ValueError(f"{path}: arrays {sorted(arrays)}, expected {sorted(cls._state)}")
        for name, a in arrays.items():
            ndim = cls._state.get(name, cls._optional_state.get(name))
            if a.ndim != ndim or not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
                raise ValueError(f"{path}: {name} must be a finite {ndim}-D numeric array")
        try:
            model = cls(**header["params"])
        except TypeError as exc:
            raise ValueError(f"{path}: parameters do not fit {cls.__name__}: {exc}") from exc
        for name in cls._state:
            setattr(model, name, arrays[name].astype(np.float64))
        for name in cls._optional_state:
            setattr(model, name, arrays.get(name))
        try:
            model._check_loaded_params()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: invalid parameters: {exc}") from exc
        model._restore(path)
        return model

    def _check_loaded_params(self):
        """Validate the parameters read by :meth:`load` (each estimator runs its own checks)."""
        raise NotImplementedError(f"{type(self).__name__} must validate the parameters it loads")
