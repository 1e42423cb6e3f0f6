"""Interactions.recommend / similar_items: the caller's ids in and out, one batched model call,
unknown ids by an explicit choice; checked against the models' own per-id answers."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import Interactions, split
from recsys_ltr.interactions import UnknownIdError
from recsys_ltr.models import ALS, EASE, ItemKNN, UserKNN


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 600
    log = pd.DataFrame(
        {
            "user": rng.choice([f"u{k:02d}" for k in range(40)], n),
            "item": rng.choice([f"item-{k}" for k in range(30)], n),
            "t": rng.integers(0, 10_000, n),
        }
    )
    return Interactions.from_dataframe(log, timestamp_col="t")


@pytest.fixture(scope="module")
def models(data):
    train, _, _ = split.last_fraction(data, val=0.0, test=0.2)
    return {
        "ItemKNN": ItemKNN(k=10).fit(data.matrix),
        "UserKNN": UserKNN(k=10).fit(data.matrix),
        "EASE": EASE(regularization=10.0).fit(data.matrix),
        "ALS": ALS(factors=4, iterations=3, random_state=0, num_threads=1).fit(data.matrix),
        "ItemKNN on train": ItemKNN(k=10).fit(train),
    }


def _expected(data, model, ids, N, unknown="error", filter_seen=True, filter_items=None):
    """Per id, the model's own answer for that one user (a loop: the reference)."""
    rows = []
    excluded = None if filter_items is None else data.item_index(filter_items)
    popularity = model.item_popularity_
    for u in dict.fromkeys(ids):
        if u in set(data.user_ids.tolist()):
            r = data.user_index(u)
            top, scores = model.recommend(
                [r], user_items=data.matrix[[r]], N=N, filter_already_liked_items=filter_seen, filter_items=excluded
            )
            answer = [(i, s) for i, s in zip(top[0], scores[0]) if i >= 0]
        elif unknown == "skip":
            continue
        else:
            order = sorted(range(data.n_items), key=lambda i: (-popularity[i], i))
            answer = [(i, np.nan) for i in order if excluded is None or i not in excluded][:N]
        rows += [(u, data.item_ids[i], s, rank + 1) for rank, (i, s) in enumerate(answer)]
    return pd.DataFrame(rows, columns=["user", "item", "score", "rank"])


@pytest.mark.parametrize("name", ["ItemKNN", "UserKNN", "EASE", "ALS", "ItemKNN on train"])
@settings(max_examples=15, deadline=None)
@given(
    picks=st.lists(st.integers(0, 44), max_size=12),
    N=st.integers(1, 35),
    unknown=st.sampled_from(["skip", "popularity"]),
    filter_seen=st.booleans(),
    filter_some=st.booleans(),
)
def test_recommend_with_ids_is_the_models_answer_per_user(
    data, models, name, picks, N, unknown, filter_seen, filter_some
):
    model = models[name]
    ids = [f"u{k:02d}" if k < 40 else f"new-{k}" for k in picks]  # new-*: unknown ids
    filter_items = ["item-3", "item-7"] if filter_some else None
    got = data.recommend(model, ids, N=N, unknown=unknown, filter_seen=filter_seen, filter_items=filter_items)
    expected = _expected(data, model, ids, N, unknown, filter_seen, filter_items)
    assert list(got.columns) == ["user", "item", "score", "rank"]
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected, check_dtype=False)


def test_one_batched_call_for_every_known_user(data, models, monkeypatch):
    model = models["ItemKNN"]
    calls = []
    original = type(model).recommend

    def spy(self, userid, *args, **kwargs):
        calls.append(np.asarray(userid).copy())
        return original(self, userid, *args, **kwargs)

    monkeypatch.setattr(type(model), "recommend", spy)
    frame = pd.DataFrame({"customer": ["u05", "u01", "nobody", "u05", "u30"]})
    got = data.recommend(model, frame, N=3, unknown="popularity", user_col="customer")
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], data.user_index(["u05", "u01", "u30"]))
    assert got["user"].tolist() == ["u05"] * 3 + ["u01"] * 3 + ["nobody"] * 3 + ["u30"] * 3
    assert got.loc[got["user"] == "nobody", "score"].isna().all()
    assert got["rank"].tolist() == [1, 2, 3] * 4


def test_every_user_by_default_and_seen_items_left_out(data, models):
    model = models["ItemKNN on train"]  # fitted on a split: the held-out items are seen in data
    got = data.recommend(model, N=5)
    assert got["user"].drop_duplicates().tolist() == data.user_ids.tolist()
    seen = set(data.to_dataframe()[["user", "item"]].itertuples(index=False, name=None))
    assert not seen & set(got[["user", "item"]].itertuples(index=False, name=None))


def test_unknown_ids_error_by_default_and_bad_arguments(data, models):
    model = models["ItemKNN"]
    with pytest.raises(UnknownIdError, match=r"unknown user id\(s\): \['zz'\]; pass unknown='skip'"):
        data.recommend(model, ["u01", "zz"])
    with pytest.raises(ValueError, match="unknown must be one of 'error', 'skip', 'popularity'"):
        data.recommend(model, ["u01"], unknown="ignore")
    with pytest.raises(UnknownIdError, match="unknown item id"):
        data.recommend(model, ["u01"], filter_items=["no-such-item"])
    with pytest.raises(ValueError, match="user_col 'user' is not a column"):
        data.recommend(model, pd.DataFrame({"id": ["u01"]}))
    with pytest.raises(ValueError, match="missing values"):
        data.recommend(model, ["u01", None])
    other = ItemKNN(k=5).fit(data.matrix[:, :-1])
    with pytest.raises(ValueError, match=r"fitted on a \d+ x 29 matrix, this Interactions is \d+ x 30"):
        data.recommend(other, ["u01"])
    assert data.recommend(model, "u01", N=2)["user"].tolist() == ["u01", "u01"]  # one id
    empty = data.recommend(model, ["zz"], unknown="skip")
    assert empty.empty and list(empty.columns) == ["user", "item", "score", "rank"]


def test_tuple_ids():
    data = Interactions.from_arrays([(1, "a"), (1, "a"), (2, "b"), (2, "b")], ["x", "y", "y", "z"])
    model = ItemKNN(k=2).fit(data.matrix)
    got = data.recommend(model, (1, "a"), N=1)
    assert got["user"].tolist() == [(1, "a")] and got["item"].tolist() == ["z"]


def test_similar_items_with_ids(data, models):
    model = models["EASE"]
    got = data.similar_items(model, ["item-4", "item-9", "gone"], N=4, unknown="popularity")
    for item in ("item-4", "item-9"):
        top, scores = model.similar_items(data.item_index(item), N=4)
        rows = got[got["item"] == item]
        assert rows["similar_item"].tolist() == data.item_ids[top].tolist()
        np.testing.assert_array_equal(rows["score"], scores)
        assert rows["rank"].tolist() == [1, 2, 3, 4]
    gone = got[got["item"] == "gone"]
    assert (
        gone["score"].isna().all()
        and gone["similar_item"].tolist()
        == data.item_ids[np.lexsort((np.arange(data.n_items), -model.item_popularity_))[:4]].tolist()
    )
    assert list(got.columns) == ["item", "similar_item", "score", "rank"]
    with pytest.raises(UnknownIdError, match="unknown item id"):
        data.similar_items(model, ["gone"])
    assert len(data.similar_items(model, N=2)) == 2 * data.n_items
