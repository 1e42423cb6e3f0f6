import numpy as np
import pytest

from recsys_ltr._io import npz_path, read_npz, write_npz


def test_round_trip(tmp_path):
    header = {"format": "f", "version": 2, "class": "C", "params": {"k": 3}}
    write_npz(tmp_path / "m", header, {"a": np.arange(4.0)})
    got, arrays = read_npz(tmp_path / "m", "f", 2)
    assert got == header
    np.testing.assert_array_equal(arrays["a"], np.arange(4.0))
    assert npz_path(tmp_path / "m") == str(tmp_path / "m.npz")


@pytest.mark.parametrize(
    "header, match",
    [
        ('{"format": "g", "version": 2, "class": "C", "params": {}}', "does not describe a f file"),
        ('{"format": "f", "version": 1, "class": "C", "params": {}}', "unsupported format version 1"),
        ('{"format": "f", "version": 2, "params": {}}', "'class' is missing"),
        ('{"format": "f", "version": 2, "class": "C", "params": []}', "'params' is missing or not a dict"),
        ("{not json", "malformed JSON"),
        ("[1, 2]", "does not describe"),
    ],
)
def test_malformed_headers(tmp_path, header, match):
    np.savez(tmp_path / "bad.npz", header=np.array(header))
    with pytest.raises(ValueError, match=match):
        read_npz(tmp_path / "bad.npz", "f", 2)


def test_bad_files(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a recsys_ltr model file"):
        read_npz(tmp_path / "junk.npz", "f", 2)
    np.savez(tmp_path / "nohead.npz", a=np.ones(2))
    with pytest.raises(ValueError, match="no 'header'"):
        read_npz(tmp_path / "nohead.npz", "f", 2)
    np.savez(tmp_path / "obj.npz", header=np.array("{}"), a=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="not a recsys_ltr model file"):
        read_npz(tmp_path / "obj.npz", "f", 2)  # object arrays need pickles: refused
    with pytest.raises(FileNotFoundError):
        read_npz(tmp_path / "missing.npz", "f", 2)
    with pytest.raises(ValueError, match="JSON-serialisable"):
        write_npz(tmp_path / "x", {"params": {"rng": np.random.default_rng(0)}}, {})
