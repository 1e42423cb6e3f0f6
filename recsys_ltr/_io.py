"""Safe estimator files and atomic writes: the one persistence layer of the package.

A model file is a ``.npz`` (zip) holding a JSON header and the fitted arrays, never pickles::

    header.npy            0-d unicode array: {"format": "recsys_ltr", "version": 4, "class": ...,
                          "params": {...}, "state": {name: spec}, "digests": {member: sha256},
                          "header_digest": sha256 of the rest of the header}
    <name>.npy            a dense fitted array            (spec {"type": "dense"})
    <name>.data/.indices/.indptr.npy
                          a CSR matrix, or an object of a kind registered by :func:`register_csr_kind`
                          (spec {"type": "csr"|<kind>, "shape": [...], <the kind's fields>})

Reading a file trusts nothing in it.  Before any array is loaded the zip directory is checked:
exactly the members the header declares, each member's declared size consistent with its ``.npy``
header (shape and dtype, real numbers only) and with what deflate can produce from its compressed
size -- so a small hostile file cannot make :func:`read_estimator_file` allocate gigabytes, and an
unexpected member is never read.  Every failure (corrupt zip, CRC error, truncated stream,
unsupported compression, malformed header, foreign file) is a ``ValueError`` naming the file;
a missing file is ``FileNotFoundError``.  Each array's sha256 (of its dtype, shape and bytes) is in
the header and checked as it is read, so arrays swapped or altered inside the zip are refused, and
so is the header's own (class, parameters, state specs: checked last, after the parameters and
their consistency with the arrays), so an edited parameter that is still valid (a scoring
weight) does not load as a different model; this detects corruption and edits, it does not
authenticate: whoever can write the file can recompute the digests.  Files of an earlier layout
(versions 1 to 3, written while the package was developed and never released: version 2 had no
digests, version 3 saved stacked FEBR's bases without their names) are refused, naming their
version: no second set of rules reads them.

:func:`atomic_write` writes any file through a temporary file and ``os.replace``, so a reader
never sees a half-written file (estimator files and the evaluation cache use it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ._validation import check_csr_structure

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Persistable",
    "atomic_write",
    "npz_path",
    "read_estimator_file",
    "register_csr_kind",
    "write_estimator_file",
]

FORMAT = "recsys_ltr"
#: Version of the layout, the only one read (module docstring).
FORMAT_VERSION = 4
_HEADER_MAX_BYTES = 16 * 2**20
_DEFLATE_MAX_RATIO = 1100  # deflate cannot expand data more than ~1032:1
#: Largest magnitude a float of a model file may hold: fitted weights, factors and counts stay far
#: below it, while a product of a few such values would overflow float64 (1e308).
STATE_MAX_MAGNITUDE = 1e100
_CSR_PARTS = ("data", "indices", "indptr")
_READ_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    KeyError,
    RuntimeError,
    UnicodeDecodeError,
    OverflowError,
    TypeError,
)


def npz_path(path) -> str:
    """``path`` as a string, with ``.npz`` appended unless it has it or names an existing file."""
    path = os.fspath(path)
    if not path.endswith(".npz") and not os.path.exists(path):
        path += ".npz"
    return path


def atomic_write(path, write: Callable) -> None:
    """Call ``write(file_object)`` on a temporary file beside ``path``, then rename it to ``path``
    with the mode a new file gets under the umask (``open``'s, not ``mkstemp``'s private 0600)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(mask)
    return mask


# ----------------------------------------------------------------------------------- writing
def write_estimator_file(path, cls_name: str, params: dict, state: dict) -> str:
    """Write ``params`` and the fitted ``state`` (name -> ndarray, csr_matrix or an object of a
    kind registered by :func:`register_csr_kind`) to ``path`` (``.npz`` appended if missing);
    returns the path written."""
    specs, arrays = {}, {}
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise ValueError(f"{name} must be numeric to be saved, got dtype {value.dtype}")
            specs[name] = {"type": "dense"}
            arrays[name] = value
            continue
        kind = next((k for k, (cls, _, _) in _CSR_KINDS.items() if isinstance(value, cls)), None)
        if kind is not None:
            specs[name] = {"type": kind, **{f: getattr(value, f) for f in _CSR_KINDS[kind][1]}}
            value = value.matrix
        elif sp.issparse(value):
            specs[name] = {"type": "csr"}
        else:
            raise TypeError(f"cannot save fitted attribute {name!r} of type {type(value).__name__}")
        specs[name]["shape"] = [int(s) for s in value.shape]
        for part in _CSR_PARTS:
            arrays[f"{name}.{part}"] = getattr(value, part)
    header = {"format": FORMAT, "version": FORMAT_VERSION, "class": cls_name, "params": params, "state": specs}
    header["digests"] = {name: _digest(np.asarray(value)) for name, value in arrays.items()}
    try:
        header["header_digest"] = _header_digest(json.loads(json.dumps(header)))  # as it reads back
        text = json.dumps(header)
    except TypeError as exc:
        raise ValueError(f"parameters are not JSON-serialisable (random_state a Generator?): {exc}") from exc
    path = npz_path(path)
    atomic_write(path, lambda f: np.savez(f, header=np.array(text), **arrays))
    return path


# ----------------------------------------------------------------------------------- reading
def read_estimator_file(
    path, check_header: Callable | None = None, check_state: Callable | None = None
) -> tuple[dict, dict]:
    """Read a file written by :func:`write_estimator_file`: ``(header, state)`` with the header
    checked (format, version, class, params, state specs) and ``state`` mapping each declared
    name to a dense array or a raw ``csr_matrix`` (structure checked, not yet canonicalised) with
    the spec's extra fields under ``header["state"][name]``.

    ``check_header(header)`` runs before any array is read and may raise ``ValueError`` (e.g. a
    class that does not declare one of the state names): what the reader does not expect is never
    read, however large.  ``check_state(header, state)`` runs on the arrays read, before the
    header's own digest is checked: an edited header is refused, with the message of the first
    check it fails (parameters, then their consistency with the state, then the digest)."""
    path = npz_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    if not os.path.isfile(path):  # a device (/dev/zero) or a FIFO would be read without end
        raise ValueError(f"{path} is not a regular file, so not a recsys_ltr model file")
    try:
        with zipfile.ZipFile(path) as zf:
            members = _members(zf, path)
            header = _read_header(zf, members, path)
            expected = _expected_members(header, path)
            if set(members) != expected:
                extra, missing = sorted(set(members) - expected), sorted(expected - set(members))
                raise ValueError(f"{path}: members {extra} are not declared by the header, {missing} are missing")
            if check_header is not None:
                check_header(header)
            arrays = {
                name[:-4]: _check_digest(header, name[:-4], _read_member(zf, members[name], path), path)
                for name in sorted(expected - {"header.npy"})
            }
    except ValueError as exc:
        raise ValueError(str(exc) if str(exc).startswith(path) else f"{path}: {exc}") from None
    except _READ_ERRORS as exc:
        raise ValueError(f"{path} is not a readable recsys_ltr model file: {type(exc).__name__}: {exc}") from None
    state = _assemble(header["state"], arrays, path)
    if check_state is not None:
        check_state(header, state)
    if header["header_digest"] != _header_digest(header):
        raise ValueError(f"{path}: the header does not match its digest (edited or damaged)")
    return header, state


def _members(zf, path) -> dict:
    infos = zf.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: the zip lists a member twice")
    return {i.filename: i for i in infos}


def _read_header(zf, members, path) -> dict:
    info = members.get("header.npy")
    if info is None:
        raise ValueError(f"{path} has no 'header' entry: not written by recsys_ltr")
    if info.file_size > _HEADER_MAX_BYTES:
        raise ValueError(f"{path}: the header is {info.file_size} bytes (at most {_HEADER_MAX_BYTES})")
    text = _read_member(zf, info, path, text=True)
    try:
        header = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON header: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path}: header does not describe a recsys_ltr file")
    version = header.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        written = "an earlier, unreleased layout" if type(version) is int and version < FORMAT_VERSION else "another"
        raise ValueError(
            f"{path}: format version {version!r}, written by {written} of recsys_ltr; this one reads version "
            f"{FORMAT_VERSION} only (with digests): refit the model and save it again"
        )
    fields = [("class", str), ("params", dict), ("state", dict), ("digests", dict), ("header_digest", str)]
    for key, kind in fields:
        if not isinstance(header.get(key), kind):
            raise ValueError(f"{path}: header field {key!r} is missing or not a {kind.__name__}")
    return header


def _digest(array: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and bytes (C order)."""
    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).data)
    return h.hexdigest()


def _header_digest(header: dict) -> str:
    """sha256 of a header's fields but ``header_digest`` (canonical JSON: sorted keys)."""
    rest = {k: v for k, v in header.items() if k != "header_digest"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _check_digest(header, name, array, path) -> np.ndarray:
    """``array`` (member ``name``) if it matches its digest in the ``header``."""
    if header["digests"].get(name) != _digest(array):
        raise ValueError(f"{path}: array {name} does not match its digest in the header (altered or swapped)")
    return array


def _expected_members(header, path) -> set[str]:
    names = {"header.npy"}
    for name, spec in header["state"].items():
        if not isinstance(name, str) or not name.isidentifier() or not isinstance(spec, dict):
            raise ValueError(f"{path}: malformed state entry {name!r}")
        kind = spec.get("type")
        if kind == "dense":
            names.add(f"{name}.npy")
        elif kind == "csr" or kind in _CSR_KINDS:
            shape = spec.get("shape")
            if (
                not isinstance(shape, list)
                or len(shape) != 2
                or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
            ):
                raise ValueError(f"{path}: state {name!r} needs a shape of two positive integers, got {shape!r}")
            names.update(f"{name}.{part}.npy" for part in _CSR_PARTS)
        else:
            raise ValueError(f"{path}: state {name!r} has unknown type {kind!r}")
    return names


def _read_member(zf, info, path, text=False) -> np.ndarray:
    """One ``.npy`` member, after checking its header against the zip directory."""
    if info.file_size > _DEFLATE_MAX_RATIO * max(info.compress_size, 1) + 2**20:
        raise ValueError(f"{path}: member {info.filename} claims {info.file_size} bytes from {info.compress_size}")
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        offset = f.tell()
        if text:
            ok = dtype.kind == "U" and shape == ()
        else:
            ok = dtype.kind in "biuf" and not dtype.hasobject
        if not ok:
            raise ValueError(f"{path}: member {info.filename} has dtype {dtype} and shape {shape}")
        if info.file_size != offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ValueError(f"{path}: member {info.filename} is inconsistent with its size in the zip directory")
    with zf.open(info) as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def _assemble(specs, arrays, path) -> dict:
    state = {}
    for name, spec in specs.items():
        if spec["type"] == "dense":
            state[name] = _checked_values(arrays[name], name, path)
            continue
        data, indices, indptr = (arrays[f"{name}.{part}"] for part in _CSR_PARTS)
        if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1 or data.size != indices.size:
            raise ValueError(f"{path}: {name} is not a CSR matrix")
        if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
            raise ValueError(f"{path}: {name} has {indices.dtype} indices / {indptr.dtype} indptr, not integers")
        _checked_values(data, name, path)
        try:
            state[name] = sp.csr_matrix((data, indices, indptr), shape=tuple(spec["shape"]))
        except ValueError as exc:
            raise ValueError(f"{path}: {name} is a malformed CSR matrix: {exc}") from None
    return state


def _checked_values(value, name, path):
    """``value`` after checking its floats are finite and at most :data:`STATE_MAX_MAGNITUDE` in
    magnitude: no fitted state comes near it, and a larger one overflows the first product."""
    if value.dtype.kind == "f" and value.size:
        peak = np.abs(value).max()  # NaN or inf when any value is: one pass for both checks
        if not np.isfinite(peak):
            raise ValueError(f"{path}: {name} holds NaN or infinite values")
        if peak > STATE_MAX_MAGNITUDE:
            raise ValueError(
                f"{path}: {name} holds values of magnitude {peak:.3g} (at most "
                f"{STATE_MAX_MAGNITUDE:.0e} in a fitted model): a corrupt or tampered file"
            )
    return value


# ----------------------------------------------------------------------------------- estimators
_REGISTRY: dict[str, type] = {}
#: Objects saved as a CSR matrix plus header fields: kind -> (class, field names, rebuild).
_CSR_KINDS: dict[str, tuple[type, tuple[str, ...], Callable]] = {}


def register_csr_kind(kind: str, cls: type, fields: tuple[str, ...], rebuild: Callable) -> None:
    """Let estimators save objects of ``cls`` as their ``.matrix`` (CSR) plus the JSON-able
    attributes ``fields``, rebuilt on load by ``rebuild(matrix, **fields)`` from a checked CSR
    matrix.  Called by the module that owns ``cls`` (e.g. :class:`recsys_ltr.neighbors.Affinity`),
    so this layer needs no import of it."""
    _CSR_KINDS[kind] = (cls, tuple(fields), rebuild)


class Persistable:
    """``save``/``load`` for every estimator of the package (one file layout, module docstring).

    Subclasses list their fitted attributes in ``_state_attributes`` (dense arrays, CSR matrices,
    objects of a kind registered by :func:`register_csr_kind`, or ``None`` for an unset optional
    one) and may override:

    * ``_saved_params()`` -- JSON-able parameters written to the file (default: the parameters
      the model was fitted with, ``params_`` when the estimator keeps them, else ``get_params()``),
      and ``_decode_params`` its inverse;
    * ``_saved_state()`` / ``_state_names()`` -- the arrays written, the names a file may hold;
    * ``_load_state(state, specs)`` -- turn the raw arrays into fitted attributes and check them
      against each other and against the parameters (raise ``ValueError``); the default sets
      dense arrays as float64 and rebuilds CSR matrices and registered kinds;
    * ``_check_params()`` -- the parameter validation ``fit`` runs, rerun on loaded parameters;
    * ``_prepare()`` -- derive the attributes that are not saved.

    Estimators nested in another (FEBR's bases, RankBlend's members, LGMMLAffinity's ranker) are a
    feature of this layer: ``_nested = (parameter, fitted attribute, state prefix, base class)``
    saves the fitted estimator as ``{"class", "params"}`` in the parameter (a list of them for a
    list) and its state under ``<prefix>__<name>`` (member ``j`` of a list: ``<prefix><j>__<name>``),
    but for the names in ``_shared_state``, which the members take from the outer estimator;
    :meth:`_load_nested` restores them.

    Loading builds the estimator from the saved parameters, so a loaded model answers exactly as
    the saved one did, whatever ``set_params`` was called on it after fitting.
    """

    _state_attributes: tuple = ()
    _nested: tuple | None = None
    _shared_state: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    def save(self, path) -> str:
        """Write the parameters and fitted state to ``path`` (``.npz`` appended if missing); returns
        the path written.  Never changes the estimator."""
        check_is_fitted(self)
        state = {name: value for name, value in self._saved_state().items() if value is not None}
        return write_estimator_file(path, type(self).__name__, self._saved_params(), state)

    @classmethod
    def load(cls, path):
        """Read an estimator written by :meth:`save` (any subclass of this class); a malformed,
        foreign or inconsistent file raises ``ValueError``."""
        path = npz_path(path)
        made = []

        def load_state(header, state):
            try:
                made[0]._load_state(state, header["state"])
                made[0]._prepare()
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}: malformed fitted state: {exc}") from None

        read_estimator_file(path, lambda header: made.append(cls._from_header(header, path)), load_state)
        return made[0]

    @classmethod
    def _from_header(cls, header, path):
        """The unfitted estimator a file's header describes, its class, parameters and state names
        checked before any array is read."""
        model_cls = _REGISTRY.get(header["class"])
        if model_cls is None or not issubclass(model_cls, cls):
            name = header["class"] if model_cls is None else model_cls.__name__
            raise ValueError(f"{path} holds a {name!r}, not a {cls.__name__}")
        try:
            model = model_cls(**model_cls._decode_params(header["params"]))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: parameters do not fit {model_cls.__name__}: {exc}") from None
        try:
            model._check_params()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: invalid parameters: {exc}") from None
        allowed = set(model._state_names())
        if not set(header["state"]) <= allowed:
            raise ValueError(
                f"{path}: fitted state holds {sorted(header['state'])}, expected names among {sorted(allowed)}"
            )
        return model

    def _saved_params(self) -> dict:
        params = dict(getattr(self, "params_", None) or self.get_params(deep=False))
        if self._nested is not None:
            name, fitted = self._nested[:2]
            specs = [{"class": type(est).__name__, "params": est._saved_params()} for _, est in self._fitted_nested()]
            params[name] = specs if isinstance(getattr(self, fitted), list) else specs[0]
        return params

    @classmethod
    def _decode_params(cls, params: dict) -> dict:
        """Constructor arguments from the parameters of a file (inverse of :meth:`_saved_params`)."""
        if cls._nested is None:
            return params
        name, _, _, base_cls = cls._nested
        specs = params.get(name)
        if specs is None:
            return params
        if not isinstance(specs, (list, dict)) or not specs:
            raise ValueError(f"{name} must give the nested estimators' classes and parameters")
        decoded = []
        for spec in specs if isinstance(specs, list) else [specs]:
            nested_cls = _REGISTRY.get(spec.get("class")) if isinstance(spec, dict) else None
            if nested_cls is None or not issubclass(nested_cls, base_cls) or not isinstance(spec.get("params"), dict):
                raise ValueError(f"{name} holds {spec!r}, not a {base_cls.__name__}'s class and parameters")
            decoded.append(nested_cls(**nested_cls._decode_params(spec["params"])))
        return {**params, name: decoded if isinstance(specs, list) else decoded[0]}

    def _saved_state(self) -> dict:
        """Fitted attributes written by :meth:`save` (default: ``_state_attributes``, then the
        nested estimators' under their prefixes)."""
        state = {name: getattr(self, name) for name in self._state_attributes}
        for prefix, est in self._fitted_nested():
            state.update({prefix + k: v for k, v in est._saved_state().items() if k not in self._shared_state})
        return state

    def _state_names(self) -> tuple:
        """Names a file may hold, given the (loaded) parameters."""
        names = tuple(self._state_attributes)
        for prefix, est in self._nested_members(self._nested_templates() if self._nested else None):
            names += tuple(prefix + n for n in est._state_names() if n not in self._shared_state)
        return names

    def _nested_templates(self):
        """The unfitted nested estimator(s) a file's state is restored into (default: the parameter)."""
        return getattr(self, self._nested[0])

    def _fitted_nested(self) -> list:
        return self._nested_members(getattr(self, self._nested[1]) if self._nested else None)

    def _nested_members(self, value) -> list:
        """``(state prefix, estimator)`` of a nested list's members, or of one nested estimator."""
        if value is None:
            return []
        if isinstance(value, (list, tuple)):
            return [(f"{self._nested[2]}{j}__", est) for j, est in enumerate(value)]
        return [(f"{self._nested[2]}__", value)]

    def _load_nested(self, state: dict, specs: dict) -> None:
        """Restore the fitted nested estimators (``_nested``) from their parts of a file's state,
        each given this estimator's ``_shared_state``."""
        if self._nested is None:
            return
        templates = self._nested_templates()
        members = []
        for prefix, template in self._nested_members(templates):
            member = clone(template)
            member._check_params()
            sub = {n[len(prefix) :]: v for n, v in state.items() if n.startswith(prefix)}
            sub_specs = {n[len(prefix) :]: s for n, s in specs.items() if n.startswith(prefix)}
            for shared in self._shared_state:
                sub[shared], sub_specs[shared] = getattr(self, shared), {"type": "csr"}
            member._load_state(sub, sub_specs)
            member._prepare()
            members.append(member)
        setattr(self, self._nested[1], members if isinstance(templates, (list, tuple)) else members[0])

    def _check_params(self):
        """Validate the parameters (subclasses)."""

    def _prepare(self):
        """Derive the unsaved attributes after ``fit`` or ``load`` (subclasses)."""

    def _load_state(self, state: dict, specs: dict):
        for name, value in state.items():
            if name not in self._state_attributes:
                continue  # a nested estimator's (see _state_names), restored by _load_nested
            spec = specs[name]
            if spec["type"] == "dense":
                if value.dtype.kind == "b":
                    raise ValueError(f"{name} must be numeric, got booleans")
                value = value.astype(np.float64) if value.dtype.kind == "f" else value
            else:
                check_csr_structure(value, name)
                if spec["type"] in _CSR_KINDS:
                    _, fields, rebuild = _CSR_KINDS[spec["type"]]
                    value = rebuild(value, **{f: spec.get(f) for f in fields})
            setattr(self, name, value)
        missing = [n for n in self._required_state() if n not in state]
        if missing:
            raise ValueError(f"fitted state lacks {missing}")
        for name in self._state_attributes:  # optional attributes absent from the file
            if name not in state:
                setattr(self, name, None)

    def _required_state(self) -> tuple:
        """Fitted attributes a file must hold (default: all of ``_state_attributes``)."""
        return tuple(self._state_attributes)
