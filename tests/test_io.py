"""The persistence layer: round trips, and every malformed, corrupt or hostile file is a ValueError."""

import json
import os
import stat
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from recsys_ltr._io import (
    FORMAT,
    FORMAT_VERSION,
    _digest,
    _header_digest,
    atomic_write,
    npz_path,
    read_estimator_file,
    write_estimator_file,
)
from recsys_ltr.neighbors import Affinity


def _header(**state):
    return {"format": FORMAT, "version": FORMAT_VERSION, "class": "C", "params": {"k": 3}, "state": state}


def _write(path, header, compression=zipfile.ZIP_STORED, **arrays):
    """A zip laid out like np.savez, with any header and members (some may be bogus); a header
    dict without digests gets the arrays' own."""
    import io

    if isinstance(header, dict) and header.get("version") == FORMAT_VERSION and "digests" not in header:
        header = {**header, "digests": {name: _digest(np.asarray(v)) for name, v in arrays.items()}}
    if isinstance(header, dict) and header.get("version") == FORMAT_VERSION and "header_digest" not in header:
        header = {**header, "header_digest": _header_digest(json.loads(json.dumps(header)))}
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, value in {
            "header": np.array(json.dumps(header) if isinstance(header, dict) else header),
            **arrays,
        }.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(value), allow_pickle=False)
            zf.writestr(f"{name}.npy", buf.getvalue())
    return path


def test_round_trip_dense_csr_and_affinity(tmp_path):
    A = Affinity(sp.csr_matrix(np.array([[0, 2.0, 1.0], [1.0, 0, 0], [0, 0, 0]])), 2, "cosine", "item")
    X = sp.csr_matrix(np.eye(3))
    path = write_estimator_file(tmp_path / "m", "C", {"k": 3}, {"a": np.arange(4.0), "X_": X, "aff_": A})
    assert path == npz_path(tmp_path / "m") == str(tmp_path / "m.npz")
    header, state = read_estimator_file(path)
    assert header["params"] == {"k": 3} and header["class"] == "C"
    np.testing.assert_array_equal(state["a"], np.arange(4.0))
    assert (state["X_"] != X).nnz == 0
    assert header["state"]["aff_"] == {
        "type": "affinity",
        "k_max": 2,
        "kind": "cosine",
        "side": "item",
        "shape": [3, 3],
    }
    np.testing.assert_array_equal(state["aff_"].toarray(), A.matrix.toarray())


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "out.bin"
    atomic_write(target, lambda f: f.write(b"one"))

    def fail(f):
        f.write(b"half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail)
    assert target.read_bytes() == b"one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_are_written_with_the_umasks_mode(tmp_path, umask):
    """Model files and cache entries get the mode of any new file (0644 under umask 022), not 0600."""
    old = os.umask(umask)
    try:
        path = write_estimator_file(tmp_path / "m", "C", {"k": 3}, {"a_": np.arange(4.0)})
        (tmp_path / "plain").write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask == stat.S_IMODE(os.stat(tmp_path / "plain").st_mode)


@pytest.mark.parametrize(
    "header, match",
    [
        ({"format": "g", "version": FORMAT_VERSION, "class": "C", "params": {}, "state": {}}, "does not describe"),
        (
            {"format": FORMAT, "version": 1, "class": "C", "params": {}, "state": {}},
            "format version 1, written by an earlier",
        ),
        ({"format": FORMAT, "version": FORMAT_VERSION, "params": {}, "state": {}}, "'class' is missing"),
        ({"format": FORMAT, "version": FORMAT_VERSION, "class": "C", "params": [], "state": {}}, "'params'"),
        ({"format": FORMAT, "version": FORMAT_VERSION, "class": "C", "params": {}}, "'state'"),
        ("{not json", "malformed JSON"),
        ("[1, 2]", "does not describe"),
    ],
)
def test_malformed_headers(tmp_path, header, match):
    with pytest.raises(ValueError, match=match):
        read_estimator_file(_write(tmp_path / "bad.npz", header))


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"type": "csr", "shape": [3.7, 2]}, "shape of two positive integers"),  # float shapes are not truncated
        ({"type": "csr", "shape": [3]}, "shape of two positive integers"),
        ({"type": "csr", "shape": [True, 2]}, "shape of two positive integers"),
        ({"type": "pickle"}, "unknown type"),
    ],
)
def test_malformed_state_specs(tmp_path, spec, match):
    with pytest.raises(ValueError, match=match):
        read_estimator_file(_write(tmp_path / "bad.npz", _header(x=spec)))


def test_undeclared_member_is_never_read(tmp_path):
    # an extra member (here a small one; the check runs on the zip directory, before any read)
    path = _write(tmp_path / "extra.npz", _header(a={"type": "dense"}), a=np.ones(2), junk=np.zeros(10))
    with pytest.raises(ValueError, match=r"members \['junk.npy'\] are not declared"):
        read_estimator_file(path)
    path = _write(tmp_path / "missing.npz", _header(a={"type": "dense"}, b={"type": "dense"}), a=np.ones(2))
    with pytest.raises(ValueError, match=r"\['b.npy'\] are missing"):
        read_estimator_file(path)


def test_zip_bomb_member_is_refused_before_allocation(tmp_path):
    # a member whose directory entry claims far more bytes than deflate can produce
    path = _write(
        tmp_path / "bomb.npz", _header(a={"type": "dense"}), compression=zipfile.ZIP_DEFLATED, a=np.zeros(2_000_000)
    )
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("a.npy")
    # patch the uncompressed size in the central directory record of a.npy
    central = raw.rfind(b"PK\x01\x02")
    while central >= 0 and raw[central + 46 : central + 46 + 5] != b"a.npy":
        central = raw.rfind(b"PK\x01\x02", 0, central)
    raw[central + 24 : central + 28] = (2**31).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert info.compress_size < 50_000
    with pytest.raises(ValueError, match="claims|inconsistent|not a readable"):
        read_estimator_file(path)


def test_lying_npy_header_is_refused(tmp_path):
    path = _write(tmp_path / "lie.npz", _header(a={"type": "dense"}), a=np.ones(4))
    raw = path.read_bytes().replace(b"'shape': (4,)", b"'shape': (9,)")
    path.write_bytes(raw)
    with pytest.raises(ValueError, match="inconsistent|not a readable"):
        read_estimator_file(path)


@pytest.mark.parametrize("value", [np.array([1 + 2j]), np.array(["a"]), np.array([b"x"])])
def test_non_real_arrays_are_refused(tmp_path, value):
    path = _write(tmp_path / "c.npz", _header(a={"type": "dense"}), a=value)
    with pytest.raises(ValueError, match="dtype"):
        read_estimator_file(path)


def test_nonfinite_dense_state_is_refused(tmp_path):
    path = _write(tmp_path / "n.npz", _header(a={"type": "dense"}), a=np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        read_estimator_file(path)


def test_huge_or_nonfinite_values_and_float_indices_are_refused(tmp_path):
    """An EASE file whose B_ held 1e308 loaded and scored inf; float CSR indices were truncated."""
    csr = {"type": "csr", "shape": [2, 2]}
    cases = {
        "dense": (dict(a={"type": "dense"}), dict(a=np.array([1.0, -1e308])), r"magnitude 1e\+308"),
        "csr data": (dict(m=csr), {"m.data": [1e200], "m.indices": [0], "m.indptr": [0, 1, 1]}, "magnitude"),
        "csr inf": (dict(m=csr), {"m.data": [np.inf], "m.indices": [0], "m.indptr": [0, 1, 1]}, "infinite"),
        "float indices": (dict(m=csr), {"m.data": [1.0], "m.indices": [1.7], "m.indptr": [0, 1, 1]}, "not integers"),
    }
    for name, (state, arrays, match) in cases.items():
        with pytest.raises(ValueError, match=match):
            read_estimator_file(_write(tmp_path / f"{name}.npz", _header(**state), **arrays))
    fine = _write(tmp_path / "fine.npz", _header(a={"type": "dense"}), a=np.array([1e99, -3.0]))
    assert read_estimator_file(fine)[1]["a"][0] == 1e99


def test_corrupt_compressed_stream_is_a_value_error(tmp_path):
    path = tmp_path / "z.npz"
    _write(path, _header(a={"type": "dense"}), compression=zipfile.ZIP_DEFLATED, a=np.arange(50_000.0))
    raw = bytearray(path.read_bytes())
    start = raw.find(b"a.npy") + 5 + 40  # inside the deflated data of a.npy
    raw[start : start + 64] = bytes(64)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=str(path)):
        read_estimator_file(path)


def test_unsupported_compression_is_a_value_error(tmp_path):
    path = tmp_path / "lz.npz"
    _write(path, _header(a={"type": "dense"}), compression=zipfile.ZIP_DEFLATED, a=np.ones(3))
    raw = bytearray(path.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # method field: local header +8, central header +10
        pos = raw.find(sig)
        while pos >= 0:
            offset = 8 if sig == b"PK\x03\x04" else 10
            raw[pos + offset : pos + offset + 2] = (99).to_bytes(2, "little")
            pos = raw.find(sig, pos + 4)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        read_estimator_file(path)


def test_truncated_and_foreign_files(tmp_path):
    good = write_estimator_file(tmp_path / "g", "C", {}, {"a": np.arange(1000.0)})
    data = open(good, "rb").read()
    (tmp_path / "t.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        read_estimator_file(tmp_path / "t.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        read_estimator_file(tmp_path / "junk.npz")
    np.savez(tmp_path / "nohead.npz", a=np.ones(2))
    with pytest.raises(ValueError, match="no 'header'"):
        read_estimator_file(tmp_path / "nohead.npz")
    with pytest.raises(FileNotFoundError):
        read_estimator_file(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="JSON-serialisable"):
        write_estimator_file(tmp_path / "x", "C", {"rng": np.random.default_rng(0)}, {})


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "dir"])
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path, device):
    """Recommender.load("/dev/zero") read until memory ran out (18-32 s), then an empty MemoryError."""
    path = str(tmp_path) if device == "dir" else device
    if not os.path.exists(path):
        pytest.skip(f"{device} does not exist here")
    with pytest.raises(ValueError, match="not a regular file"):
        read_estimator_file(path)


def test_swapped_or_altered_arrays_are_refused_by_their_digests(tmp_path):
    """Two same-shape arrays swapped inside the zip loaded and predicted differently."""
    path = write_estimator_file(tmp_path / "m", "C", {"k": 3}, {"a_": np.arange(4.0), "b_": np.ones(4)})
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members["a_.npy"], members["b_.npy"] = members["b_.npy"], members["a_.npy"]
    with zipfile.ZipFile(tmp_path / "swapped.npz", "w") as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    with pytest.raises(ValueError, match="array a_ does not match its digest"):
        read_estimator_file(tmp_path / "swapped.npz")
    header = json.loads(str(np.load(path)["header"]))
    assert header["version"] == 4 and set(header["digests"]) == {"a_", "b_"}
    # a file relabelled with an earlier version (2: a layout without digests) is no way around them
    for version in (1, 2, 3):
        for legacy in ({**header, "version": version}, {k: v for k, v in header.items() if k != "digests"}):
            _write(tmp_path / "old.npz", {**legacy, "version": version}, a_=np.arange(4.0), b_=np.ones(4))
            with pytest.raises(ValueError, match=f"format version {version}, written by an earlier, unreleased layout"):
                read_estimator_file(tmp_path / "old.npz")
    _write(tmp_path / "v4.npz", {**header, "digests": None}, a_=np.arange(4.0), b_=np.ones(4))
    with pytest.raises(ValueError, match="'digests' is missing"):
        read_estimator_file(tmp_path / "v4.npz")


def test_an_edited_parameter_that_is_still_valid_is_refused(tmp_path):
    """The header's own digest: a valid but different parameter loaded as another model."""
    path = write_estimator_file(tmp_path / "m", "C", {"alpha": 0.3}, {"a_": np.arange(4.0)})
    header = json.loads(str(np.load(path)["header"]))
    assert read_estimator_file(path)[0]["params"] == {"alpha": 0.3}
    header["params"]["alpha"] = 1e308
    _write(tmp_path / "edited.npz", header, a_=np.arange(4.0))
    with pytest.raises(ValueError, match="the header does not match its digest"):
        read_estimator_file(tmp_path / "edited.npz")
