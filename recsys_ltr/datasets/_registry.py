"""Where data set files live, their checksums, and how to fetch them.

``registry.json`` (package data) describes every registered set: title, publisher, home page,
licence note, citation, the files with the sha256 of their *uncompressed* content, the files
``required`` to load it, and its download ``sources`` (a zip archive or a base URL for the
individual files; none when the licence requires a manual download).  Downloads go through
pooch (transfer, retries, atomic writes, checksums); finding, checksumming and reading local
files (possibly gzipped) is done here.

Data directory resolution (:func:`resolve_data_dir`): the ``data_dir`` argument, else the
environment variable ``RECSYS_LTR_DATA``, else ``../shared/datasets`` relative to the current
working directory when it exists, else the download cache ``~/.cache/recsys_ltr``.  Set
``name``'s files are looked up in ``<dir>/<name>/``; unless ``data_dir`` is given explicitly,
the download cache is searched too.  A file may also be stored gzipped (``<file>.gz``); it is
then decompressed transparently and its checksum is taken over the decompressed bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pooch

from .._progress import progress_enabled
from .._validation import check_bool

__all__ = [
    "ENV_VAR",
    "ChecksumError",
    "cache_dir",
    "dataset_info",
    "dataset_path",
    "download",
    "is_present",
    "list_datasets",
    "open_text",
    "read_bytes",
    "resolve_data_dir",
    "search_dirs",
]

ENV_VAR = "RECSYS_LTR_DATA"
_CHUNK = 1 << 20
_verified: dict[tuple, str] = {}  # (path, size, mtime_ns) -> sha256 found, for this process


class ChecksumError(ValueError):
    """A data file's sha256 differs from the registry (corrupted or modified copy)."""


@lru_cache(maxsize=1)
def _registry() -> dict:
    text = resources.files("recsys_ltr.datasets").joinpath("registry.json").read_text(encoding="utf-8")
    return json.loads(text)


def list_datasets() -> list[str]:
    """Names of all registered data sets (interaction and learning-to-rank sets)."""
    return sorted(_registry())


def dataset_info(name: str) -> dict:
    """The registry entry of ``name`` (a copy): publisher, homepage, license, files, ...

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> info = datasets.dataset_info("movielens-100k")
    >>> info["required"], info["publisher"]
    (['u.data', 'u.item', 'u.genre'], 'GroupLens Research, University of Minnesota')
    """
    reg = _registry()
    if name not in reg:
        raise ValueError(f"unknown data set {name!r}; registered: {', '.join(sorted(reg))}")
    return json.loads(json.dumps(reg[name]))


def cache_dir() -> Path:
    """The download cache, ``~/.cache/recsys_ltr``.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> datasets.cache_dir().name
    'recsys_ltr'
    """
    return Path.home() / ".cache" / "recsys_ltr"


def resolve_data_dir(data_dir=None) -> Path:
    """The data directory: argument, else ``$RECSYS_LTR_DATA``, else ``./../shared/datasets``
    when it exists, else the download cache.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from recsys_ltr import datasets
    >>> folder = tempfile.mkdtemp()
    >>> datasets.resolve_data_dir(folder) == Path(folder)  # an argument comes first
    True
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    shared = Path.cwd().parent / "shared" / "datasets"
    return shared if shared.is_dir() else cache_dir()


def search_dirs(data_dir=None) -> list[Path]:
    """The directories searched for a set's ``<name>/`` folder: :func:`resolve_data_dir`, then
    (unless ``data_dir`` is given) the download cache.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from recsys_ltr import datasets
    >>> folder = tempfile.mkdtemp()
    >>> datasets.search_dirs(folder) == [Path(folder)]  # a given directory only, no cache
    True
    """
    dirs = [resolve_data_dir(data_dir)]
    if data_dir is None and cache_dir() not in dirs:
        dirs.append(cache_dir())
    return dirs


def _find(name: str, filename: str, data_dir) -> Path | None:
    for d in search_dirs(data_dir):
        for candidate in (d / name / filename, d / name / f"{filename}.gz"):
            if candidate.is_file():
                return candidate
    return None


def missing_files(name: str, data_dir=None) -> list[str]:
    """The files ``name`` needs to load that are absent from every searched directory.

    Examples
    --------
    >>> import tempfile
    >>> from recsys_ltr import datasets
    >>> datasets.missing_files("movielens-100k", data_dir=tempfile.mkdtemp())  # an empty directory
    ['u.data', 'u.item', 'u.genre']
    """
    return [f for f in dataset_info(name)["required"] if _find(name, f, data_dir) is None]


def is_present(name: str, data_dir=None) -> bool:
    """Whether every file ``name`` needs to load is present (checksums not verified)."""
    return not missing_files(name, data_dir)


def dataset_path(name: str, filename: str, data_dir=None, verify: bool = True) -> Path:
    """Path of one registered file of data set ``name`` (possibly ``<filename>.gz``).

    Parameters
    ----------
    name : str
        Registered data set.
    filename : str
        File name relative to the set's folder, as in the registry (e.g. ``"u.data"``).
    data_dir : path or None
        See :func:`resolve_data_dir`.
    verify : bool
        Check the sha256 (once per process and file; the verdict is cached).

    Raises
    ------
    FileNotFoundError
        The file is absent; the message says what to download, from whom, and where to put it.
    ChecksumError
        The file's content differs from the registered one.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> path = datasets.dataset_path("movielens-100k", "u.data")  # doctest: +SKIP
    >>> path.name  # doctest: +SKIP
    'u.data'
    """
    info = dataset_info(name)
    check_bool(verify, "verify")
    if filename not in info["files"]:
        raise ValueError(f"{filename!r} is not a registered file of {name!r}; files: {sorted(info['files'])}")
    path = _find(name, filename, data_dir)
    if path is None:
        raise FileNotFoundError(_missing_message(name, filename, info, data_dir))
    if verify:
        _verify(path, info["files"][filename], name)
    return path


def open_text(path, encoding: str = "utf-8") -> io.TextIOBase:
    """Open a data file for reading text, decompressing ``.gz`` transparently."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return open(path, encoding=encoding, newline="")


def read_bytes(path) -> bytes:
    """A data file's (decompressed) bytes; a corrupt or truncated ``.gz`` raises ``ValueError``."""
    path = Path(path)
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        return gzip.decompress(path.read_bytes())
    except _GZIP_ERRORS as exc:
        raise ValueError(f"{path} is a corrupt or truncated gzip file ({type(exc).__name__}: {exc})") from None


#: What a damaged gzip stream raises (gzip.BadGzipFile is an OSError).
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    except _GZIP_ERRORS as exc:
        raise ChecksumError(f"{path} is a corrupt or truncated file ({type(exc).__name__}: {exc})") from None
    return h.hexdigest()


def _verify(path: Path, expected: str, name: str) -> None:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _verified:
        _verified[key] = _sha256(path)
    if _verified[key] != expected:
        info = dataset_info(name)
        raise ChecksumError(
            f"{path}: sha256 {_verified[key]} differs from the registered {expected} "
            f"(data set {name!r}). The file is corrupted or a modified copy; fetch the original "
            f"from {info['publisher']} ({info['homepage']}), or pass verify=False to use it anyway."
        )


def _missing_message(name: str, filename: str, info: dict, data_dir) -> str:
    where = resolve_data_dir(data_dir) / name
    searched = ", ".join(str(d / name) for d in search_dirs(data_dir))
    how = (
        f"recsys_ltr.datasets.download({name!r}) fetches it into {cache_dir() / name}"
        if info["sources"]
        else f"it cannot be downloaded automatically: {info['manual']}"
    )
    return (
        f"data set {name!r} ({info['title']}): file {filename!r} not found (searched {searched}). "
        f"Get it from {info['publisher']}: {info['homepage']} (terms: {info['license']}). "
        f"Put its files in {where}/ (or point ${ENV_VAR} or data_dir at a directory holding a "
        f"{name}/ folder); {how}."
    )


# ---------------------------------------------------------------------- download
def download(name: str, data_dir=None, verify: bool = True, show_progress=None) -> Path:
    """Fetch ``name``'s registered files from its publisher into ``<data_dir or cache>/<name>/``.

    Transfers, retries, atomic writes and checksums are pooch's (``pooch.retrieve``).
    Sources are tried in registry order; each file is checked against its registered sha256
    before it is moved into place (a source whose bytes differ is skipped, the next one tried).
    Files already present and valid are kept.

    Parameters
    ----------
    name : str
        Registered data set with download sources.
    data_dir : path or None
        Folder holding the ``<name>/`` folder (default: the download cache, :func:`cache_dir`).
    verify : bool
        Check every fetched file's sha256.
    show_progress : bool or None
        Download progress bars (``None``: on in a terminal).

    Returns
    -------
    pathlib.Path
        The folder holding the files.

    Raises
    ------
    RuntimeError
        The set's terms require a manual download (the message says how).
    OSError
        A required file could not be fetched from any source (offline, HTTP error, checksum
        mismatch, archive without it): the message lists each source's failure.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> folder = datasets.download("movielens-100k")  # doctest: +SKIP
    >>> datasets.missing_files("movielens-100k")  # doctest: +SKIP
    []
    """
    info = dataset_info(name)
    if not info["sources"]:
        raise RuntimeError(
            f"data set {name!r} cannot be downloaded automatically: {info['manual']}; "
            f"put the files in {resolve_data_dir(data_dir) / name}/"
        )
    progress = progress_enabled(show_progress)
    target = (Path(data_dir).expanduser() if data_dir is not None else cache_dir()) / name
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    try:
        return _download_into(target, name, info, verify, progress)
    except BaseException:
        if created:  # a failed download leaves no folder behind that looks like the data set
            shutil.rmtree(target, ignore_errors=True)
        raise


def _download_into(target: Path, name: str, info: dict, verify: bool, progress: bool) -> Path:
    """:func:`download`'s transfer of the files of ``target`` that are missing or invalid."""
    wanted = {f: sha for f, sha in info["files"].items() if not _valid(target / f, sha)}
    errors: list[str] = []
    for source in info["sources"]:
        if not wanted:
            break
        fetch = _fetch_files if source["kind"] == "files" else _fetch_zip
        # fetched into a temporary folder next to the target: nothing is replaced unless valid
        with tempfile.TemporaryDirectory(dir=target, prefix=".download-") as tmp:
            for fname, path in fetch(source, wanted, verify, Path(tmp), progress, errors).items():
                (target / fname).parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target / fname)
                del wanted[fname]
    required_missing = [f for f in info["required"] if f in wanted]
    if required_missing:
        raise OSError(f"could not download {required_missing} of {name!r}: " + "; ".join(errors))
    return target


def _valid(path: Path, sha: str) -> bool:
    return path.is_file() and _sha256(path) == sha


def _downloader(progress: bool):
    """pooch's HTTP(S) downloader (the network boundary: tests replace it)."""
    return pooch.HTTPDownloader(progressbar=progress, timeout=60, headers={"User-Agent": "recsys_ltr"})


def _retrieve(url: str, sha, fname: str, path: Path, progress: bool, processor=None):
    """``pooch.retrieve`` into ``path/fname``; a failed transfer raises ``OSError`` (requests'
    errors are ``OSError``), a checksum mismatch ``ValueError`` (the bytes are then discarded)."""
    known = None if sha is None else f"sha256:{sha}"
    return pooch.retrieve(url, known, fname=fname, path=path, processor=processor, downloader=_downloader(progress))


def _fetch_files(source, wanted, verify, tmp, progress, errors) -> dict[str, Path]:
    """The wanted files fetched one by one from a base URL into ``tmp`` (checksummed by pooch);
    failures are appended to ``errors``."""
    got = {}
    for i, (fname, sha) in enumerate(wanted.items()):
        try:
            got[fname] = Path(_retrieve(source["url"] + fname, sha if verify else None, str(i), tmp, progress))
        except (OSError, ValueError) as exc:
            errors.append(f"{source['url']}{fname}: {exc}")
    return got


def _fetch_zip(source, wanted, verify, tmp, progress, errors) -> dict[str, Path]:
    """The wanted files of a zip archive, fetched and unpacked by pooch into ``tmp``, each
    checked against its sha256; failures are appended to ``errors``."""
    prefix = source.get("prefix", "")
    unzip = pooch.Unzip(members=[prefix + f for f in wanted], extract_dir="unpacked")
    try:
        _retrieve(source["url"], None, "archive.zip", tmp, progress, processor=unzip)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        errors.append(f"{source['url']}: {exc}")
        return {}
    paths = {f: tmp / "unpacked" / (prefix + f) for f in wanted}
    absent = [prefix + f for f, path in paths.items() if not path.is_file()]
    if absent:
        errors.append(f"{source['url']}: the archive lacks {absent}")
    got = {}
    for fname, path in paths.items():
        if not path.is_file():
            continue
        if verify and (found := _sha256(path)) != wanted[fname]:
            errors.append(f"{source['url']}: {fname} has sha256 {found}, expected {wanted[fname]}")
            continue
        got[fname] = path
    return got
