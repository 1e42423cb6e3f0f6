"""Tests for recsys_ltr.datasets: registry, data-dir resolution, checksums, download (through
pooch, with its HTTP downloader replaced by a fake web), parsers on hand-made files, real data sets (skipped when absent) and
the synthetic generator."""

import gzip
import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests

from recsys_ltr import Interactions, split
from recsys_ltr.datasets import (
    ChecksumError,
    _registry,
    available,
    dataset_info,
    dataset_path,
    download,
    list_datasets,
    load,
    load_presplit,
    make_synthetic,
    resolve_data_dir,
)
from recsys_ltr.datasets.loaders import _adjacency


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------- registry
def test_registry_entries_are_complete():
    reg = _registry._registry()
    assert set(list_datasets()) == {
        "movielens-100k",
        "movielens-1m-implicit",
        "lastfm-2k",
        "citeulike-a",
        "msweb",
        "gowalla",
    }
    assert {"letor-mq2008", "lightgbm-lambdarank-sample"} <= set(list_datasets(include_ltr=True))
    for name, info in reg.items():
        for key in ("title", "publisher", "homepage", "license", "citation", "required", "files", "sources"):
            assert info[key] is not None, (name, key)
        assert set(info["required"]) <= set(info["files"]), name
        assert all(len(s) == 64 and int(s, 16) >= 0 for s in info["files"].values()), name
        assert info["sources"] or info.get("manual"), name
        for source in info["sources"]:
            assert source["kind"] in ("files", "zip") and source["url"].startswith("https://")
    with pytest.raises(ValueError, match="unknown data set 'nope'"):
        dataset_info("nope")
    with pytest.raises(ValueError, match="load_letor"):
        load("letor-mq2008")


# ---------------------------------------------------------------------- data directory
def test_resolve_data_dir_order(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "proj" / "main"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.delenv(_registry.ENV_VAR, raising=False)
    assert resolve_data_dir() == home / ".cache" / "recsys_ltr"  # nothing else exists
    shared = tmp_path / "proj" / "shared" / "datasets"
    shared.mkdir(parents=True)
    assert resolve_data_dir().resolve() == shared.resolve()
    monkeypatch.setenv(_registry.ENV_VAR, str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"


@pytest.fixture
def fake_registry(monkeypatch, tmp_path):
    """A registry with one small fake data set 'toy' and isolated cache / data directories."""
    files = {"a.txt": b"0 1 2\n1 2\n", "b.txt": b"hello\n"}
    reg = {
        "toy": {
            "title": "Toy",
            "kind": "test",
            "publisher": "The Toy Publisher",
            "homepage": "https://example.org/toy",
            "license": "toy licence",
            "citation": "-",
            "required": ["a.txt"],
            "files": {k: _sha(v) for k, v in files.items()},
            "sources": [
                {"kind": "files", "url": "https://mirror-1.example/"},
                {"kind": "zip", "url": "https://example.org/toy.zip", "prefix": "toy/"},
            ],
        },
        "manual-set": {
            "title": "Manual",
            "kind": "test",
            "publisher": "P",
            "homepage": "https://example.org/m",
            "license": "agreement",
            "citation": "-",
            "required": ["x"],
            "files": {"x": _sha(b"x")},
            "sources": [],
            "manual": "accept the agreement at example.org",
        },
    }
    monkeypatch.setattr(_registry, "_registry", lambda: reg)
    monkeypatch.setattr(_registry, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(_registry, "_verified", {})
    monkeypatch.delenv(_registry.ENV_VAR, raising=False)
    return files, tmp_path


def test_missing_file_message_says_what_where_whom(fake_registry):
    _, tmp = fake_registry
    with pytest.raises(FileNotFoundError) as err:
        dataset_path("toy", "a.txt", data_dir=tmp / "data")
    msg = str(err.value)
    for part in (
        "'a.txt'",
        "The Toy Publisher",
        "https://example.org/toy",
        "toy licence",
        str(tmp / "data" / "toy"),
        "download('toy')",
        "RECSYS_LTR_DATA",
    ):
        assert part in msg
    with pytest.raises(FileNotFoundError, match="accept the agreement"):
        dataset_path("manual-set", "x", data_dir=tmp)
    with pytest.raises(ValueError, match="not a registered file"):
        dataset_path("toy", "zzz.txt", data_dir=tmp)


def test_checksum_verified_once_and_mismatch_raises(fake_registry, monkeypatch):
    files, tmp = fake_registry
    folder = tmp / "data" / "toy"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_bytes(files["a.txt"])
    (folder / "b.txt").write_bytes(b"modified\n")
    calls = []
    real = _registry._sha256
    monkeypatch.setattr(_registry, "_sha256", lambda p: calls.append(p) or real(p))
    for _ in range(3):
        assert dataset_path("toy", "a.txt", data_dir=tmp / "data") == folder / "a.txt"
    assert len(calls) == 1  # verdict cached for the process
    with pytest.raises(ChecksumError, match="differs from the registered"):
        dataset_path("toy", "b.txt", data_dir=tmp / "data")
    assert dataset_path("toy", "b.txt", data_dir=tmp / "data", verify=False) == folder / "b.txt"


def test_gzipped_file_is_found_and_checksummed_decompressed(fake_registry):
    files, tmp = fake_registry
    folder = tmp / "data" / "toy"
    folder.mkdir(parents=True)
    (folder / "a.txt.gz").write_bytes(gzip.compress(files["a.txt"]))
    path = dataset_path("toy", "a.txt", data_dir=tmp / "data")
    assert path.name == "a.txt.gz"
    assert _registry.read_bytes(path) == files["a.txt"]
    with _registry.open_text(path) as f:
        assert f.read() == files["a.txt"].decode()


def test_truncated_gzip_is_a_checksum_error_not_eoferror(fake_registry):
    files, tmp = fake_registry
    folder = tmp / "data" / "toy"
    folder.mkdir(parents=True)
    (folder / "a.txt.gz").write_bytes(gzip.compress(files["a.txt"])[:-6])  # was EOFError even with verify=True
    with pytest.raises(ChecksumError, match="corrupt or truncated file"):
        dataset_path("toy", "a.txt", data_dir=tmp / "data")


def test_default_search_includes_env_dir_and_cache(fake_registry, monkeypatch):
    files, tmp = fake_registry
    monkeypatch.setenv(_registry.ENV_VAR, str(tmp / "env"))
    cached = tmp / "cache" / "toy"
    cached.mkdir(parents=True)
    (cached / "a.txt").write_bytes(files["a.txt"])
    assert dataset_path("toy", "a.txt") == cached / "a.txt"
    assert _registry.is_present("toy")
    assert not _registry.is_present("toy", data_dir=tmp / "elsewhere")  # explicit dir: no fallback


# ---------------------------------------------------------------------- download
class _FakeWeb:
    """Stands in for pooch's HTTP downloader: serves local bytes by URL, raises requests' 404
    (or a connection error, offline) otherwise; pooch's retrieve, checksum and unzip run for real."""

    def __init__(self, pages, offline=False):
        self.pages = pages
        self.offline = offline
        self.requested = []

    def __call__(self, url, output_file, pooch):
        self.requested.append(url)
        if self.offline:
            raise requests.ConnectionError(f"Failed to resolve '{url.split('/')[2]}' (no network)")
        if url not in self.pages:
            raise requests.HTTPError(f"404 Client Error: Not Found for url: {url}")
        with open(output_file, "wb") if isinstance(output_file, (str, Path)) else output_file as f:
            f.write(self.pages[url])


def _serve(monkeypatch, web):
    progress = []
    monkeypatch.setattr(_registry, "_downloader", lambda show: progress.append(show) or web)
    return progress


def _zip(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_download_from_files_source(fake_registry, monkeypatch):
    files, tmp = fake_registry
    web = _FakeWeb({"https://mirror-1.example/a.txt": files["a.txt"], "https://mirror-1.example/b.txt": files["b.txt"]})
    progress = _serve(monkeypatch, web)
    folder = download("toy")
    assert folder == tmp / "cache" / "toy"
    assert (folder / "a.txt").read_bytes() == files["a.txt"]
    assert dataset_path("toy", "a.txt") == folder / "a.txt"
    assert progress and not any(progress)  # no terminal in tests: no bars
    web.requested.clear()
    download("toy")  # already there and valid: nothing fetched
    assert web.requested == []
    (folder / "b.txt").unlink()
    download("toy", show_progress=True)
    assert web.requested == ["https://mirror-1.example/b.txt"] and progress[-1] is True
    with pytest.raises(TypeError, match="show_progress"):
        download("toy", show_progress="yes")


def test_download_falls_back_to_next_source_on_404_and_bad_checksum(fake_registry, monkeypatch):
    files, tmp = fake_registry
    web = _FakeWeb(
        {
            "https://mirror-1.example/a.txt": b"tampered\n",  # wrong checksum -> rejected by pooch
            "https://example.org/toy.zip": _zip({"toy/a.txt": files["a.txt"], "toy/b.txt": files["b.txt"]}),
        }
    )
    _serve(monkeypatch, web)
    folder = download("toy", data_dir=tmp / "mine")
    assert folder == tmp / "mine" / "toy"
    assert (folder / "a.txt").read_bytes() == files["a.txt"]
    assert (folder / "b.txt").read_bytes() == files["b.txt"]
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt", "b.txt"]  # no temporary files left behind


def test_download_keeps_an_invalid_copy_until_a_valid_one_arrives(fake_registry, monkeypatch):
    files, tmp = fake_registry
    folder = tmp / "cache" / "toy"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"edited\n")
    _serve(monkeypatch, _FakeWeb({}, offline=True))
    with pytest.raises(OSError, match="could not download"):
        download("toy")
    assert (folder / "a.txt").read_bytes() == b"edited\n"
    _serve(monkeypatch, _FakeWeb({"https://mirror-1.example/a.txt": files["a.txt"]}))
    download("toy")
    assert (folder / "a.txt").read_bytes() == files["a.txt"]


def test_download_failure_offline_and_manual_sets(fake_registry, monkeypatch):
    _, tmp = fake_registry
    _serve(monkeypatch, _FakeWeb({}))
    with pytest.raises(OSError, match="could not download.*404"):
        download("toy")
    _serve(monkeypatch, _FakeWeb({}, offline=True))
    with pytest.raises(OSError, match=r"could not download \['a.txt'\] of 'toy'.*no network"):
        download("toy")
    web = _FakeWeb({"https://example.org/toy.zip": _zip({"other/a.txt": b"x"})})
    _serve(monkeypatch, web)
    with pytest.raises(OSError, match="archive lacks"):
        download("toy")
    _serve(monkeypatch, _FakeWeb({"https://example.org/toy.zip": b"not a zip"}))
    with pytest.raises(OSError, match="toy.zip: File is not a zip file"):
        download("toy")
    assert not (tmp / "cache" / "toy").exists()  # a failed download leaves no folder behind
    (tmp / "cache" / "toy").mkdir(parents=True)
    (tmp / "cache" / "toy" / "mine.txt").write_text("kept")
    with pytest.raises(OSError, match="toy.zip: File is not a zip file"):
        download("toy")
    assert (tmp / "cache" / "toy" / "mine.txt").read_text() == "kept"  # a folder it did not create stays
    with pytest.raises(RuntimeError, match="accept the agreement"):
        download("manual-set")


def test_download_over_http_from_a_local_server(fake_registry):
    """The real path: pooch's HTTP downloader (requests) against a server on localhost."""
    import functools
    import http.server
    import threading

    files, tmp = fake_registry
    site = tmp / "site"
    site.mkdir()
    (site / "toy.zip").write_bytes(_zip({"toy/a.txt": files["a.txt"], "toy/b.txt": files["b.txt"]}))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        entry = _registry._registry()["toy"]
        entry["sources"] = [
            {"kind": "files", "url": base + "missing/"},
            {"kind": "zip", "url": base + "toy.zip", "prefix": "toy/"},
        ]
        try:
            folder = download("toy", data_dir=tmp / "over-http")
        finally:
            server.shutdown()
    assert (folder / "a.txt").read_bytes() == files["a.txt"] and (folder / "b.txt").read_bytes() == files["b.txt"]
    assert dataset_path("toy", "a.txt", data_dir=tmp / "over-http") == folder / "a.txt"


def test_missing_files_and_search_dirs(fake_registry, monkeypatch):
    files, tmp = fake_registry
    assert _registry.missing_files("toy", data_dir=tmp / "data") == ["a.txt"]
    assert _registry.search_dirs(tmp / "data") == [tmp / "data"]
    monkeypatch.setenv(_registry.ENV_VAR, str(tmp / "env"))
    assert _registry.search_dirs() == [tmp / "env", tmp / "cache"]
    (tmp / "cache" / "toy").mkdir(parents=True)
    (tmp / "cache" / "toy" / "a.txt").write_bytes(files["a.txt"])
    assert _registry.missing_files("toy") == []


# ---------------------------------------------------------------------- parsers on hand-made files
def test_adjacency_parser_hand_cases():
    rows, ids = _adjacency(b"0 5 6\r\n1\n\n2 7", first_is_count=False, where="x")
    np.testing.assert_array_equal(rows, [0, 0, 2])
    np.testing.assert_array_equal(ids, [5, 6, 7])
    rows, ids = _adjacency(b"2 4 3\n0\n1 9", first_is_count=True, where="x")
    np.testing.assert_array_equal(rows, [0, 0, 2])
    np.testing.assert_array_equal(ids, [4, 3, 9])
    with pytest.raises(ValueError, match="line 2 announces"):
        _adjacency(b"1 4\n2 5\n", first_is_count=True, where="x")
    with pytest.raises(ValueError, match="integers"):
        _adjacency(b"1 a\n", first_is_count=False, where="x")
    with pytest.raises(ValueError, match="no data"):
        _adjacency(b"\n", first_is_count=False, where="x")


def _write(root: Path, name: str, files: dict):
    (root / name).mkdir(parents=True, exist_ok=True)
    for fname, data in files.items():
        (root / name / fname).write_bytes(data)


def test_msweb_parser(tmp_path):
    _write(
        tmp_path,
        "msweb",
        {
            "anonymous-msweb.data": (
                b'I,4,"www.microsoft.com","created by getlog.pl"\nT,1,"VRoot",0,0,"VRoot"\n'
                b'A,1001,1,"Support, Desktop","/support"\nA,1002,1,"End","/end"\n'
                b'C,"10001",10001\nV,1001,1\nV,1002,1\nC,"10002",10002\nV,1001,1\n'
            )
        },
    )
    data = load("msweb", data_dir=tmp_path, verify=False)
    assert set(zip(*map(list, data.to_dataframe().to_numpy().T))) == {(10001, 1001), (10001, 1002), (10002, 1001)}


def test_gowalla_style_presplit_parser(tmp_path):
    _write(tmp_path, "gowalla", {"train.txt": b"0 1 2\n1 0\n", "valid.txt": b"0 3\n1\n", "test.txt": b"1 4\n0 0\n"})
    data, parts = load_presplit("gowalla", data_dir=tmp_path, verify=False)
    assert data.shape == (2, 5)
    np.testing.assert_array_equal(parts["train"].toarray(), [[0, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(parts["test"].toarray(), [[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]])
    assert ((parts["train"] + parts["valid"] + parts["test"]) != data.matrix).nnz == 0
    with pytest.raises(ValueError, match="no published split"):
        load_presplit("msweb")


def test_citeulike_parser_with_tags(tmp_path):
    _write(
        tmp_path,
        "citeulike-a",
        {
            "users.dat": b"2 0 2\n1 1",
            "item-tag.dat": b"1 1\n0\n2 0 1\n",
            "tags.dat": b"alpha\nbeta\n",
        },
    )
    data = load("citeulike-a", data_dir=tmp_path, verify=False)
    np.testing.assert_array_equal(data.matrix.toarray(), [[1, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal(data.item_features.toarray(), [[0, 1], [0, 0], [1, 1]])
    assert list(data.item_feature_names) == ["alpha", "beta"]


def test_lastfm_parser_with_tag_counts(tmp_path):
    _write(
        tmp_path,
        "lastfm-2k",
        {
            "user_artists.dat": b"userID\tartistID\tweight\r\n2\t51\t10\r\n2\t52\t3\r\n3\t52\t1\r\n",
            "tags.dat": "tagID\ttagValue\r\n1\tmetal\r\n7\tcaf\xe9\r\n".encode("latin-1"),
            "user_taggedartists.dat": (
                b"userID\tartistID\ttagID\tday\tmonth\tyear\r\n2\t52\t7\t1\t4\t2009\r\n"
                b"3\t52\t7\t1\t4\t2009\r\n3\t51\t1\t1\t4\t2009\r\n3\t99\t1\t1\t4\t2009\r\n"
            ),
        },
    )
    data = load("lastfm-2k", data_dir=tmp_path, verify=False)
    assert list(data.user_ids) == [2, 3] and list(data.item_ids) == [51, 52]
    np.testing.assert_array_equal(data.item_features.toarray(), [[1, 0], [0, 2]])  # artist 99 unknown
    assert list(data.item_feature_names) == ["metal", "café"]


def test_movielens_100k_parser(tmp_path):
    genre_flags = "|".join(["0"] * 18)
    _write(
        tmp_path,
        "movielens-100k",
        {
            "u.data": b"1\t10\t5\t0\n1\t11\t3\t0\n2\t11\t4\t0\n3\t10\t2\t0\n",
            "u.genre": b"unknown|0\nAction|1\n" + b"".join(f"g{i}|{i}\n".encode() for i in range(2, 19)) + b"\n",
            "u.item": (
                f"10|A (1995)|01-Jan-1995||http://x|1|{genre_flags}\n"
                f"11|B (1995)|01-Jan-1995||http://y|0|1|{'|'.join(['0'] * 17)}\n"
            ).encode("latin-1"),
        },
    )
    data = load("movielens-100k", data_dir=tmp_path, verify=False)
    assert list(data.user_ids) == [1, 2] and list(data.item_ids) == [10, 11]  # user 3 has no rating >= 4
    assert data.item_features.shape == (2, 19)
    np.testing.assert_array_equal(data.item_features.toarray()[:, :2], [[1, 0], [0, 1]])


# ---------------------------------------------------------------------- real data (skipped when absent)
def _need(name):
    if name not in available(include_ltr=True):
        pytest.skip(f"data set {name!r} not in {resolve_data_dir()} (set RECSYS_LTR_DATA to run this test)")


REAL = {
    # name: (users, items, positives), the folder READMEs' verified / published figures
    "movielens-100k": (942, 1447, 55_375),  # 943 raters; ratings 4 + 5 = 34,174 + 21,201
    "movielens-1m-implicit": (6039, 3628, 836_478),
    "lastfm-2k": (1892, 17_632, 92_834),
    "citeulike-a": (5551, 16_980, 204_986),
    "msweb": (32_711, 285, 98_654),
    "gowalla": (29_858, 40_981, 1_027_370),
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_data_counts_and_checksums(name):
    _need(name)
    data = load(name)  # verify=True: every file's sha256 is checked
    assert (data.n_users, data.n_items, data.nnz) == REAL[name]
    assert data.matrix.dtype == np.float64 and np.all(data.matrix.data == 1)
    for fname in dataset_info(name)["files"]:
        if _registry._find(name, fname, None) is not None:
            dataset_path(name, fname)
    if name == "lastfm-2k":  # 186,479 tag assignments, of which those on listened artists count
        assert data.item_features.shape == (17_632, 11_946)
        assert 0 < data.item_features.sum() <= 186_479
    if name == "citeulike-a":
        assert data.item_features.shape == (16_980, 46_391)
    if name == "movielens-100k":
        assert data.item_features.shape == (1447, 19)


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name, counts",
    [
        ("gowalla", (719_081, 91_047, 217_242)),
        ("movielens-1m-implicit", (590_733, 80_897, 164_848)),
    ],
)
def test_real_presplit(name, counts):
    _need(name)
    data, parts = load_presplit(name)
    assert tuple(parts[p].nnz for p in ("train", "valid", "test")) == counts
    assert ((parts["train"] + parts["valid"] + parts["test"]) != data.matrix).nnz == 0


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["letor-mq2008", "lightgbm-lambdarank-sample"])
def test_real_ltr_checksums(name):
    _need(name)
    for fname in dataset_info(name)["required"]:
        assert dataset_path(name, fname).is_file()


# ---------------------------------------------------------------------- synthetic generator
def test_synthetic_shape_guarantees_and_reproducibility():
    a = make_synthetic(n_users=300, n_items=200, density=0.03, random_state=5)
    b = make_synthetic(n_users=300, n_items=200, density=0.03, random_state=5)
    c = make_synthetic(n_users=300, n_items=200, density=0.03, random_state=6)
    assert isinstance(a, Interactions) and a.shape == (300, 200)
    assert (a.matrix != b.matrix).nnz == 0 and (a.matrix != c.matrix).nnz > 0
    assert a.user_activity.min() >= 1 and a.item_popularity.min() >= 1
    assert 0.02 < a.nnz / (300 * 200) < 0.045
    split.holdout(a, random_state=0)  # usable as is


def test_synthetic_popularity_follows_planted_power_law():
    data, params = make_synthetic(
        n_users=2000,
        n_items=300,
        n_factors=4,
        popularity_exponent=1.0,
        factor_scale=0.5,
        random_state=1,
        return_params=True,
    )
    pop = data.item_popularity.astype(float)
    # rank correlation between the planted bias and the observed popularity
    r = np.corrcoef(np.argsort(np.argsort(params["item_bias"])), np.argsort(np.argsort(pop)))[0, 1]
    assert r > 0.9
    top = np.sort(pop)[::-1]
    assert top[:10].sum() > 5 * top[-100:].sum() / 10  # heavy head: top-10 >> 10 tail items
    flat = make_synthetic(n_users=2000, n_items=300, popularity_exponent=0.0, factor_scale=0.0, random_state=1)
    assert flat.item_popularity.max() < 3 * flat.item_popularity.mean()


def test_synthetic_has_latent_structure():
    data, params = make_synthetic(
        n_users=500,
        n_items=200,
        n_factors=4,
        popularity_exponent=0.0,
        factor_scale=2.0,
        random_state=2,
        return_params=True,
    )
    P, Q = params["user_factors"], params["item_factors"]
    coo = data.matrix.tocoo()
    observed = np.einsum("ij,ij->i", P[coo.row], Q[coo.col]).mean()
    rng = np.random.default_rng(0)
    rand = np.einsum("ij,ij->i", P[rng.integers(0, 500, 5000)], Q[rng.integers(0, 200, 5000)]).mean()
    assert observed > rand + 0.5


def test_synthetic_edge_sizes_and_batches():
    tiny = make_synthetic(n_users=3, n_items=50, density=0.01, random_state=0)
    assert tiny.user_activity.min() >= 1 and tiny.item_popularity.min() >= 1  # all items covered
    dense = make_synthetic(n_users=20, n_items=5, density=1.0, activity_sigma=0.0, random_state=0)
    assert dense.nnz == 100
    wide = make_synthetic(n_users=30, n_items=100_000, density=1e-5, n_factors=2, random_state=0)
    assert wide.shape == (30, 100_000) and wide.item_popularity.min() >= 1


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"n_users": 0}, ValueError, "n_users"),
        ({"n_items": 2.5}, TypeError, "n_items"),
        ({"density": 0.0}, ValueError, "density"),
        ({"density": 1.5}, ValueError, "density"),
        ({"popularity_exponent": -1.0}, ValueError, "popularity_exponent"),
        ({"factor_scale": float("nan")}, ValueError, "factor_scale"),
        ({"n_factors": -1}, ValueError, "n_factors"),
        ({"random_state": "s"}, TypeError, "^random_state must be None"),
    ],
)
def test_synthetic_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        make_synthetic(**kwargs)
