"""Implicit-feedback interaction data: a binary users x items matrix, its weights and id maps.

:class:`Interactions` turns an event log (a DataFrame, parallel arrays or a sparse matrix)
into the canonical feedback matrix every estimator takes (what
:func:`recsys_ltr._validation.check_feedback` returns), and keeps the maps between external
ids (any hashable values) and internal indices ``0..n-1``.

Building it runs these steps, in order, all vectorised:

1. duplicate ``(user, item)`` events are summed (no weight column: each event weighs 1);
2. a pair is a positive when its summed weight passes the binarization rule: ``weight > 0``
   when ``threshold`` is None, else ``weight >= threshold`` (``rule=">="``) or
   ``weight > threshold`` (``rule=">"``); other pairs are dropped;
3. an optional iterative k-core keeps users with ``>= min_user_count`` and items with
   ``>= min_item_count`` positives (repeated until stable);
4. users and items left without any positive are dropped (``drop_empty``).

Internal indices follow the sorted order of the external ids (the order of first appearance
when the ids are not mutually comparable).

Weights are kept per positive: the summed weight of its pair's events (the number of events when
there is no weight column), in ``Interactions.weights``, aligned like the timestamps below;
``Interactions.weighted_matrix`` is the matrix holding them (counts to weigh with
:mod:`recsys_ltr.weighting`, for the models that read weights).  ``Interactions.matrix`` is binary,
and what a model or a split given the ``Interactions`` itself reads.

Timestamps (optional, ``timestamp_col=`` / ``timestamps=``) are kept per positive: a pair of
duplicate events keeps the time of its **latest** event (whatever the weights of its events), and
the times follow the pairs through binarization, the k-core and the id maps.
``Interactions.timestamps`` is aligned with the stored entries of ``Interactions.matrix``
(row by row, columns ascending: ``timestamps[matrix.indptr[u]:matrix.indptr[u + 1]]`` are user
``u``'s times, in the order of ``matrix.indices``); the time-ordered splits of
:mod:`recsys_ltr.split` read them from there.  Times are numbers (int64 or float64, e.g. Unix
seconds) or datetimes (``datetime64``; time-zone-aware ones are converted to UTC).

:meth:`Interactions.recommend` and :meth:`Interactions.similar_items` answer with the caller's ids:
they take a model fitted on this data (or on a split of it: the same shape) and return DataFrames.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import check_bool, check_positive_int, check_positive_values, check_sparse

__all__ = ["Interactions", "UnknownIdError", "check_timestamps", "time_order_key"]

_RULES = (">=", ">")
#: What :meth:`Interactions.recommend` does with an id it does not know.
UNKNOWN = ("error", "skip", "popularity")


class UnknownIdError(KeyError, ValueError):
    """An external id absent from the id map (catch it as ``KeyError`` or ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Interactions:
    """Binary users x items feedback with its weights and external <-> internal id maps.

    Build instances with :meth:`from_dataframe`, :meth:`from_arrays` or :meth:`from_sparse`;
    the constructor takes an already canonical matrix and its id maps.

    Parameters
    ----------
    matrix : sparse matrix (n_users, n_items)
        Feedback; any positive stored value is one interaction, and its weight unless ``weights``
        is given.
    user_ids, item_ids : array-like or None
        External id of each row / column (default ``0..n-1``); must be unique.
    item_features : sparse matrix (n_items, n_features) or None
        Item content aligned with the internal item index (e.g. tag counts).
    item_feature_names : array-like or None
        One name per feature column.
    timestamps : array-like or None
        One time per stored entry of the canonical ``matrix`` (row by row, columns ascending);
        numbers or datetimes, finite (see :func:`check_timestamps`).
    weights : array-like or None
        One finite weight per stored entry of the canonical ``matrix``, aligned like
        ``timestamps`` (default: the matrix's stored values).

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        Canonical CSR users x items matrix of float64 ones (int32 sorted indices).
    user_ids, item_ids : numpy.ndarray
        External ids by internal index.
    item_features : scipy.sparse.csr_matrix or None
    item_feature_names : numpy.ndarray or None
    timestamps : numpy.ndarray or None
        The time of each positive, aligned with ``matrix.indices`` (int64, float64 or
        ``datetime64``); None when the data came without times.
    weights : numpy.ndarray
        The weight of each positive (float64), aligned with ``matrix.indices``: the summed weight
        of its events (their number without a weight column).

    Examples
    --------
    >>> import pandas as pd
    >>> from recsys_ltr import Interactions
    >>> log = pd.DataFrame({"user": ["ann", "ann", "bob", "bob", "bob", "cy"],
    ...                     "item": ["a", "b", "a", "c", "a", "b"], "plays": [3, 1, 2, 5, 1, 4]})
    >>> data = Interactions.from_dataframe(log, weight_col="plays")
    >>> data
    Interactions(3 users x 3 items, 5 positives)
    >>> data.matrix.toarray()  # binary: what the models read
    array([[1., 1., 0.],
           [1., 0., 1.],
           [0., 1., 0.]])
    >>> data.weights  # bob played a twice: 2 + 1
    array([3., 1., 3., 5., 4.])
    >>> int(data.user_index("bob")), data.item_ids.tolist()
    (1, ['a', 'b', 'c'])
    """

    def __init__(
        self,
        matrix,
        user_ids=None,
        item_ids=None,
        item_features=None,
        item_feature_names=None,
        timestamps=None,
        weights=None,
    ):
        M = check_positive_values(matrix, "matrix")
        self.weights = M.data.copy() if weights is None else _entry_weights(weights, M.nnz)
        M.data[:] = 1.0
        self.matrix = M
        n_users, n_items = self.matrix.shape
        self.timestamps = None if timestamps is None else check_timestamps(timestamps, self.matrix.nnz)
        self.user_ids = _id_array(user_ids, n_users, "user_ids")
        self.item_ids = _id_array(item_ids, n_items, "item_ids")
        self._user_index = pd.Index(self.user_ids)
        self._item_index = pd.Index(self.item_ids)
        self._user_tuples = _holds_tuples(self._user_index)
        self._item_tuples = _holds_tuples(self._item_index)
        self.item_features = None
        self.item_feature_names = None
        if item_features is not None:
            self.item_features, self.item_feature_names = _check_features(item_features, item_feature_names, n_items)
        elif item_feature_names is not None:
            raise ValueError("item_feature_names given without item_features")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dataframe(
        cls,
        df,
        user_col="user",
        item_col="item",
        weight_col=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=True,
        timestamp_col=None,
    ) -> Interactions:
        """Build from a DataFrame with one event per row.

        Parameters
        ----------
        df : pandas.DataFrame
        user_col, item_col : column labels
            External user / item ids (any hashable values, no missing values).
        weight_col : column label or None
            Event weight or rating; None counts each row as weight 1.  A positive keeps the
            summed weight of its events (``weights``).
        threshold : float or None
            Binarization threshold applied to the summed weight of each pair; None means any
            positive weight is a positive (negative weights are then an error).
        rule : {">=", ">"}
            How ``threshold`` is applied.
        min_user_count, min_item_count : int
            Iterative k-core: minimum positives per user / item (0 = no filter).
        drop_empty : bool
            Drop users and items without any positive (always true when a k-core is asked).
        timestamp_col : column label or None
            The time of each event: numbers (e.g. Unix seconds) or datetimes, no missing values.
            A positive keeps the time of its pair's latest event (module docstring).

        Returns
        -------
        Interactions
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
        cols = [user_col, item_col] + [c for c in (weight_col, timestamp_col) if c is not None]
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"column(s) {missing} not in the DataFrame (columns: {list(df.columns)})")
        roles = {}  # column -> the first role naming it
        for role, c in (("user_col", user_col), ("item_col", item_col), ("weight_col", weight_col),
                        ("timestamp_col", timestamp_col)):  # fmt: skip
            if c is not None and roles.setdefault(c, role) != role:
                raise ValueError(f"{roles[c]} and {role} both name the column {c!r}: one column cannot play two roles")
        weights = None if weight_col is None else df[weight_col].to_numpy()
        return cls.from_arrays(
            df[user_col].to_numpy(),
            df[item_col].to_numpy(),
            weights,
            threshold=threshold,
            rule=rule,
            min_user_count=min_user_count,
            min_item_count=min_item_count,
            drop_empty=drop_empty,
            timestamps=None if timestamp_col is None else df[timestamp_col],
        )

    @classmethod
    def from_arrays(
        cls,
        users,
        items,
        weights=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=True,
        timestamps=None,
    ) -> Interactions:
        """Build from parallel arrays of external user ids, item ids, optional weights and times.

        ``timestamps``: one time per event (numbers or datetimes, see :func:`check_timestamps`), or
        None.  See :meth:`from_dataframe` for the other parameters.
        """
        users, items = _column(users, "users"), _column(items, "items")
        if users.size != items.size:
            raise ValueError(f"users and items have different lengths: {users.size} != {items.size}")
        if users.size == 0:
            raise ValueError("no interactions: users and items are empty")
        if weights is None:
            weights = np.ones(users.size)
        else:
            weights = _column(weights, "weights", "numbers")
            if weights.size != users.size:
                raise ValueError(f"weights has length {weights.size}, users/items have {users.size}")
            weights = _numeric(weights, "weights")
        times = None if timestamps is None else check_timestamps(timestamps, users.size, "timestamps", "users/items")
        u_codes, user_ids = _factorize(users, "users")
        i_codes, item_ids = _factorize(items, "items")
        # duplicate (user, item) events are summed; an overflowing sum is an error
        X = check_sparse(
            sp.coo_matrix((weights, (u_codes, i_codes)), shape=(user_ids.size, item_ids.size)),
            "weights",
            allow_empty=True,
            nonnegative=False,
        )
        if times is not None:
            times = _latest_per_pair(u_codes, i_codes, item_ids.size, times)
        return cls._finish(
            X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, "weights", times
        )

    @classmethod
    def from_sparse(
        cls,
        X,
        user_ids=None,
        item_ids=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=False,
    ) -> Interactions:
        """Build from a users x items scipy sparse matrix (or dense 2-D array) of weights.

        Stored entries are weights; explicitly stored zeros are an error unless ``threshold``
        is given (the rule then makes them, like negative weights, explicit negatives).
        Unlike the other constructors the matrix's index is kept as is (``drop_empty=False``):
        empty rows and columns stay unless ``drop_empty`` or a k-core asks otherwise.
        ``user_ids`` / ``item_ids`` (default ``0..n-1``) must match the matrix's shape.
        See :meth:`from_dataframe` for the other parameters.
        """
        if not (sp.issparse(X) or isinstance(X, (np.ndarray, Interactions))):
            raise TypeError(f"X must be a 2-D scipy sparse matrix or numpy array, got {type(X).__name__}")
        # raw structure checked before any conversion; weights may be negative (explicit negatives)
        X = check_sparse(X, "X", allow_empty=True, nonnegative=False)
        if threshold is None and np.any(X.data == 0):
            raise ValueError(
                f"X stores {int(np.sum(X.data == 0))} explicit zero(s): call X.eliminate_zeros() "
                "or give a threshold that makes them explicit negatives"
            )
        user_ids = _id_array(user_ids, X.shape[0], "user_ids")
        item_ids = _id_array(item_ids, X.shape[1], "item_ids")
        return cls._finish(X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, "X")

    @classmethod
    def _finish(
        cls, X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, name, times=None
    ):
        """Binarize the summed weights of ``X``, apply the k-core, drop empties, build; ``times``
        (aligned with ``X``'s stored entries) follow the positives."""
        min_user = check_positive_int(min_user_count, "min_user_count", minimum=0)
        min_item = check_positive_int(min_item_count, "min_item_count", minimum=0)
        if check_bool(drop_empty, "drop_empty"):
            min_user, min_item = max(min_user, 1), max(min_item, 1)
        weights = X.data
        X, kept_entries = _binarize(X, threshold, rule, name)
        times = None if times is None else times[kept_entries]
        weights = weights[kept_entries]
        if X.nnz == 0:
            raise ValueError(f"no positive interactions (threshold={threshold!r}, rule={rule!r})")
        rows, cols = _k_core(X, min_user, min_item)
        kept, positions = _submatrix(X, rows, cols)
        if kept.nnz == 0:
            raise ValueError(
                f"the k-core filter removed every interaction: min_user_count={min_user_count} and "
                f"min_item_count={min_item_count} are repeatedly applied until each kept user has at least "
                f"min_user_count positives and each kept item at least min_item_count, and nothing is left "
                f"of the {X.nnz} positives (before filtering the most active user had "
                f"{int(np.diff(X.indptr).max())} and the most popular item {int(np.bincount(X.indices).max())}); "
                "lower min_user_count / min_item_count (0 disables the filter)"
            )
        times = None if times is None else times[positions]
        return cls(kept, user_ids[rows], item_ids[cols], timestamps=times, weights=weights[positions])

    def with_item_features(self, features, item_ids=None, feature_names=None) -> Interactions:
        """Return a copy carrying item content aligned with the internal item index.

        Parameters
        ----------
        features : sparse matrix or 2-D array (n_rows, n_features)
            Non-negative, finite item content (e.g. tag counts).
        item_ids : array-like of length n_rows or None
            External item id of each row; must be unique.  Items absent from it get an empty
            row and rows of unknown items are ignored.  None: rows already follow the internal
            item index.
        feature_names : array-like of length n_features or None
        """
        F = check_sparse(features, "item features", allow_empty=True)
        if item_ids is not None:
            item_ids = _column(item_ids, "item_ids")
            if item_ids.size != F.shape[0]:
                raise ValueError(f"item_ids has length {item_ids.size}, features has {F.shape[0]} rows")
            dup = pd.Index(item_ids).duplicated()
            if dup.any():
                raise ValueError(
                    f"item_ids must be unique (one feature row per item); duplicated: {item_ids[dup][:5].tolist()}"
                )
            pos = self._item_index.get_indexer(item_ids)
            keep = np.flatnonzero(pos >= 0)
            sel = sp.csr_matrix((np.ones(keep.size), (pos[keep], keep)), shape=(self.n_items, F.shape[0]))
            F = (sel @ F).tocsr()
        out = Interactions.__new__(Interactions)
        out.__dict__.update(self.__dict__)
        out.item_features, out.item_feature_names = _check_features(F, feature_names, self.n_items)
        return out

    def append(self, other: Interactions) -> Interactions:
        """This data with the positives of ``other`` added (new events of a log), for
        :meth:`partial_fit`.

        Known users and items keep their internal index; the new ones of ``other`` follow, in
        ``other``'s order.  A pair in both keeps the sum of its weights (its events add up) and the
        later time.  Both or neither must have timestamps; item features are kept when ``other``
        brings no new item.
        """
        if not isinstance(other, Interactions):
            raise TypeError(f"other must be an Interactions, got {type(other).__name__}")
        if (self.timestamps is None) != (other.timestamps is None):
            raise ValueError("one of the two Interactions has timestamps and the other not: give both or neither")
        user_ids, rows = _extended(self._user_index, other.user_ids, "user ids")
        item_ids, cols = _extended(self._item_index, other.item_ids, "item ids")
        if self.item_features is not None and item_ids.size > self.n_items:
            raise ValueError(
                f"other brings {item_ids.size - self.n_items} new item(s) and this data has item features: "
                "append to the data without features, then call with_item_features on the result"
            )
        X, Y = self.matrix, other.matrix
        u = np.concatenate(
            [
                np.repeat(np.arange(self.n_users), np.diff(X.indptr)),
                rows[np.repeat(np.arange(other.n_users), np.diff(Y.indptr))],
            ]
        )
        i = np.concatenate([X.indices, cols[Y.indices]])
        shape = (user_ids.size, item_ids.size)
        summed = sp.coo_matrix((np.concatenate([self.weights, other.weights]), (u, i)), shape=shape).tocsr()
        summed.sort_indices()
        times = None
        if self.timestamps is not None:
            times = _latest_per_pair(u, i, shape[1], np.concatenate([self.timestamps, other.timestamps]))
        out = Interactions(summed, user_ids, item_ids, timestamps=times)
        if self.item_features is not None:
            out.item_features, out.item_feature_names = self.item_features, self.item_feature_names
        return out

    def partial_fit(self, model, other, *, weighted=False) -> Interactions:
        """Append ``other`` (:meth:`append`) and update ``model``, fitted on this data, without a refit.

        The new items are re-learnt first, from their users known to the model
        (``model.partial_fit_items``), then every user of ``other`` from the full grown row
        (``model.partial_fit_users``); a model that cannot raises ``NotImplementedError``.  ``weighted``: give the model the rows' ``weights`` (fit it on
        ``weighted_matrix`` then) instead of the binary ``matrix``.  Returns the grown data, whose
        :meth:`recommend` then answers the new users from the updated model.

        Examples
        --------
        >>> import pandas as pd
        >>> from recsys_ltr import Interactions
        >>> from recsys_ltr.models import ItemKNN
        >>> data = Interactions.from_dataframe(pd.DataFrame({"user": ["ann", "ann", "bob", "bob", "cy"],
        ...                                                  "item": ["a", "b", "a", "c", "b"]}))
        >>> model = ItemKNN(k=2).fit(data.matrix)
        >>> new = Interactions.from_dataframe(pd.DataFrame({"user": ["dora"], "item": ["c"]}))
        >>> data = data.partial_fit(model, new)
        >>> data.recommend(model, ["dora"], N=1)
           user item     score  rank
        0  dora    a  0.707107     1
        """
        self._check_model(model)
        check_bool(weighted, "weighted")
        grown = self.append(other)
        M = grown.weighted_matrix if weighted else grown.matrix
        new_items = np.arange(model.n_items_, grown.n_items)
        if new_items.size:
            model.partial_fit_items(new_items, M[: model.n_users_, model.n_items_ :].T.tocsr())
        users = grown.user_index(other.user_ids)
        model.partial_fit_users(users, M[users])
        return grown

    # ------------------------------------------------------------------ views
    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    @property
    def nnz(self) -> int:
        return self.matrix.nnz

    @property
    def weighted_matrix(self) -> sp.csr_matrix:
        """``matrix`` with the ``weights`` as its values (a copy): the input of
        :mod:`recsys_ltr.weighting` and of the models that read weights."""
        return sp.csr_matrix(
            (self.weights.copy(), self.matrix.indices.copy(), self.matrix.indptr.copy()), shape=self.shape
        )

    @property
    def item_popularity(self) -> np.ndarray:
        """Number of users with each item (int64, by internal item index)."""
        return np.bincount(self.matrix.indices, minlength=self.n_items).astype(np.int64)

    @property
    def user_activity(self) -> np.ndarray:
        """Number of items of each user (int64, by internal user index)."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    def user_index(self, ids):
        """Internal indices of external user ids (scalar in, int out).

        A tuple is one id when any user id is a tuple (``user_index((1, 2))``), else a sequence
        of ids like a list or an array.  Unknown ids raise :class:`UnknownIdError` (a
        ``KeyError`` and a ``ValueError``).
        """
        return _lookup(self._user_index, ids, "user", self._user_tuples)

    def item_index(self, ids):
        """Internal indices of external item ids; as :meth:`user_index`."""
        return _lookup(self._item_index, ids, "item", self._item_tuples)

    def to_dataframe(
        self, user_col="user", item_col="item", timestamp_col="timestamp", weight_col=None
    ) -> pd.DataFrame:
        """One row per positive, external ids, ordered by internal (user, item); with a
        ``timestamp_col`` column when the data have timestamps, and a ``weight_col`` column of the
        ``weights`` when it is given (e.g. ``"weight"``)."""
        X = self.matrix
        rows = np.repeat(np.arange(self.n_users), np.diff(X.indptr))
        columns = {user_col: self.user_ids[rows], item_col: self.item_ids[X.indices]}
        if weight_col is not None:
            columns[weight_col] = self.weights
        if self.timestamps is not None:
            columns[timestamp_col] = self.timestamps
        return pd.DataFrame(columns)

    # ------------------------------------------------------------------ answers with external ids
    def recommend(
        self,
        model,
        users=None,
        N=10,
        *,
        unknown="error",
        filter_seen=True,
        filter_items=None,
        user_col="user",
        user_items=None,
    ) -> pd.DataFrame:
        """Top-``N`` items of a fitted model for users named by their external ids.

        The known users are answered by one batched call of ``model.recommend(rows,
        user_items=..., N=N)`` (no loop over users), and the answer is mapped back to external ids.

        Parameters
        ----------
        model : fitted recommender
            Any model of :mod:`recsys_ltr.models` (or :mod:`recsys_ltr.febr`), fitted on
            ``self.matrix`` or on a part of it (a split of this data: the same shape).  Item-based
            models score each user from the user's row of ``user_items``; the others from their
            fitted state.
        users : DataFrame, Series, list, array, scalar id or None
            External user ids (a DataFrame: its ``user_col`` column); None: every user, by
            internal index.  Each id is answered once, in the order of its first appearance.
        N : int
            Recommendations per user (fewer when fewer candidates remain).
        unknown : {"error", "skip", "popularity"}
            An id absent from the user map: :class:`UnknownIdError` naming the first ones
            (``"error"``), no rows for it (``"skip"``), or the ``N`` items with the most positives
            in the model's training data, ties by smaller internal index, with score NaN
            (``"popularity"``; ``filter_items`` applies, nothing is seen).
        filter_seen : bool
            Leave out the items the user has in ``self.matrix`` (when the model was fitted on a
            split of this data, the held-out items are seen too).
        filter_items : list or array of external item ids, optional
            Items never recommended (unknown ids raise :class:`UnknownIdError`).
        user_col : column label
            The column of ``users`` when it is a DataFrame.
        user_items : sparse matrix, optional
            The users' rows given to the model (the items ``filter_seen`` leaves out and, for
            item-based models, what scores them), of this data's shape; default ``self.matrix``
            (binary).  An item-based model fitted on weights (``uses_weights``: ItemKNN, EASE)
            wants this data weighted as its training data was (e.g. ``self.weighted_matrix``); it
            is scored from the binary rows with a ``UserWarning`` otherwise.

        Returns
        -------
        pandas.DataFrame
            Columns ``user``, ``item`` (external ids), ``score`` (the model's) and ``rank`` (1 =
            best); one row per recommendation, users in the order given, each user's rows by rank.

        Examples
        --------
        >>> import pandas as pd
        >>> from recsys_ltr import Interactions
        >>> from recsys_ltr.models import ItemKNN
        >>> log = pd.DataFrame({"user": ["ann", "ann", "bob", "bob", "cy", "cy"],
        ...                     "item": ["a", "b", "a", "c", "b", "c"]})
        >>> data = Interactions.from_dataframe(log)
        >>> model = ItemKNN(k=2).fit(data.matrix)
        >>> data.recommend(model, ["ann", "dora"], N=1, unknown="popularity")
           user item  score  rank
        0   ann    c    1.0     1
        1  dora    a    NaN     1
        """
        _check_choice(unknown, "unknown", UNKNOWN)
        filter_seen = check_bool(filter_seen, "filter_seen")
        N = check_positive_int(N, "N")
        ext, rows = self._external_rows(users, user_col, "user", self._user_index, self._user_tuples, unknown)
        self._check_model(model)
        excluded = None if filter_items is None else self.item_index(_as_id_list(filter_items, self._item_tuples))
        rows_of = self._user_items(model, user_items)

        def answer(ids):
            return model.recommend(
                ids, user_items=rows_of[ids], N=N, filter_already_liked_items=filter_seen, filter_items=excluded
            )

        return self._answer_known(model, rows, ext, answer, N, excluded, ("user", "item"))

    def similar_items(self, model, items=None, N=10, *, unknown="error", filter_items=None, item_col="item"):
        """The ``N`` items most similar to items named by their external ids, as external ids.

        One batched call of ``model.similar_items(ids, N=N)``; the item itself is never in its
        own answer.  ``items`` (a DataFrame: its ``item_col`` column; None: every item),
        ``unknown`` (``"popularity"``: the most popular items of the model's training data, score
        NaN) and ``filter_items`` as in :meth:`recommend`.

        Returns
        -------
        pandas.DataFrame
            Columns ``item``, ``similar_item`` (external ids), ``score`` (the model's similarity)
            and ``rank`` (1 = most similar).

        Examples
        --------
        >>> import pandas as pd
        >>> from recsys_ltr import Interactions
        >>> from recsys_ltr.models import ItemKNN
        >>> log = pd.DataFrame({"user": ["ann", "ann", "bob", "bob", "cy"], "item": ["a", "b", "a", "b", "c"]})
        >>> data = Interactions.from_dataframe(log)
        >>> data.similar_items(ItemKNN(k=2).fit(data.matrix), ["a"], N=1)
          item similar_item  score  rank
        0    a            b    1.0     1
        """
        _check_choice(unknown, "unknown", UNKNOWN)
        N = check_positive_int(N, "N")
        ext, rows = self._external_rows(items, item_col, "item", self._item_index, self._item_tuples, unknown)
        self._check_model(model)
        excluded = None if filter_items is None else self.item_index(_as_id_list(filter_items, self._item_tuples))

        def answer(ids):
            return model.similar_items(ids, N=N, filter_items=excluded)

        return self._answer_known(model, rows, ext, answer, N, excluded, ("item", "similar_item"))

    def _user_items(self, model, user_items) -> sp.csr_matrix:
        """The checked ``user_items`` of :meth:`recommend` (default ``self.matrix``), with a warning
        when an item-based model fitted on weights would score binary rows."""
        if user_items is not None:
            M = check_sparse(user_items, "user_items", allow_empty=True)
            if M.shape != self.shape:
                raise ValueError(f"user_items must have this data's shape {self.shape}, got {M.shape}")
            return M
        if model.item_based and model.uses_weights and np.any(model.user_items_.data != 1.0):
            warnings.warn(
                f"{type(model).__name__} was fitted on weights but scores these users from the binary "
                "Interactions.matrix: pass user_items= weighted as its training data was",
                UserWarning,
                stacklevel=3,
            )
        return self.matrix

    def _answer_known(self, model, rows, ext, answer, N, excluded, columns):
        """The DataFrame of :meth:`recommend` / :meth:`similar_items`: the known ``rows`` (>= 0)
        answered by one batched ``answer(ids) -> (ids, scores)``, the unknown ones (-1, kept under
        ``unknown="popularity"``) by the most popular items."""
        known = rows >= 0
        parts = []
        if known.any():
            top, scores = answer(rows[known])
            parts.append((np.flatnonzero(known), np.asarray(top), np.asarray(scores, dtype=np.float64)))
        if not known.all():
            parts.append(self._popular_rows(model, np.flatnonzero(~known), N, excluded))
        return self._answer(parts, ext, columns)

    def _external_rows(self, ids, column, kind, index, tuple_ids, unknown):
        """``(external ids, internal rows)``: the given ids deduplicated in order (every id of the
        map for None), their rows (-1 where unknown, an error for ``unknown="error"``)."""
        if ids is None:
            return (self.user_ids if kind == "user" else self.item_ids), np.arange(len(index))
        if isinstance(ids, pd.DataFrame):
            if column not in ids.columns:
                raise ValueError(
                    f"{kind}_col {column!r} is not a column of the DataFrame (columns: {list(ids.columns)})"
                )
            ids = ids[column]
        arr = _column(_as_id_list(ids, tuple_ids), f"{kind} ids")
        if pd.isna(arr).any():
            raise ValueError(f"{kind} ids contain missing values (NaN/None)")
        arr = arr[~pd.Index(arr).duplicated()]
        rows = index.get_indexer(arr).astype(np.int64) if arr.size else np.empty(0, np.int64)
        missing = rows < 0
        if unknown == "error" and missing.any():
            bad = arr[missing][:5].tolist()
            raise UnknownIdError(
                f"unknown {kind} id(s): {bad}"
                + (" ..." if missing.sum() > 5 else "")
                + "; pass unknown='skip' to leave them out or unknown='popularity' for the most popular items"
            )
        if unknown == "skip":
            arr, rows = arr[~missing], rows[~missing]
        return arr, rows

    def _check_model(self, model) -> None:
        shape = getattr(model, "user_items_", None)
        shape = None if shape is None else shape.shape
        if shape is not None and tuple(shape) != self.shape:
            raise ValueError(
                f"the model was fitted on a {shape[0]} x {shape[1]} matrix, this Interactions is "
                f"{self.n_users} x {self.n_items}: fit it on this data's matrix or on a split of it"
            )

    def _popular_rows(self, model, positions, N, excluded):
        """The popularity answer for the unknown ids at ``positions``: the model's training
        popularity (this data's when the model keeps none), ties by smaller index, score NaN."""
        popularity = getattr(model, "item_popularity_", None)
        popularity = self.item_popularity if popularity is None else np.asarray(popularity)
        order = np.lexsort((np.arange(self.n_items), -popularity))
        if excluded is not None:
            order = order[~np.isin(order, excluded)]
        top = order[:N]
        ids = np.broadcast_to(top, (positions.size, top.size))
        return positions, ids, np.full(ids.shape, np.nan)

    def _answer(self, parts, ext, names) -> pd.DataFrame:
        """One DataFrame from ``(positions, ids, scores)`` blocks: rows by position, then rank."""
        columns = {names[0]: [], names[1]: [], "score": [], "rank": [], "_position": []}
        for positions, ids, scores in parts:
            found = ids >= 0  # -1 pads users with fewer candidates than N
            r, c = np.nonzero(found)
            columns[names[0]].append(ext[positions[r]])
            columns[names[1]].append(self.item_ids[ids[found]])
            columns["score"].append(scores[found])
            columns["rank"].append(c.astype(np.int64) + 1)
            columns["_position"].append(positions[r])
        if not parts:
            empty = {
                names[0]: ext[:0],
                names[1]: self.item_ids[:0],
                "score": np.zeros(0),
                "rank": np.zeros(0, np.int64),
            }
            return pd.DataFrame(empty)
        merged = {key: np.concatenate(values) for key, values in columns.items()}
        order = np.lexsort((merged["rank"], merged.pop("_position")))
        return pd.DataFrame({key: values[order] for key, values in merged.items()})

    def __repr__(self) -> str:
        feats = "" if self.item_features is None else f", {self.item_features.shape[1]} item features"
        times = "" if self.timestamps is None else ", timestamps"
        return f"Interactions({self.n_users} users x {self.n_items} items, {self.nnz} positives{feats}{times})"


# ---------------------------------------------------------------------- helpers
def _column(values, name: str, what: str = "hashable ids (numbers, strings or tuples)") -> np.ndarray:
    if isinstance(values, (pd.Series, pd.Index)):
        arr = values.to_numpy()
    elif isinstance(values, np.ndarray):
        arr = values
    else:  # a list: let pandas infer, so that mixed ids are not all cast to strings
        arr = pd.Series(list(values)).to_numpy()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    _check_hashable(arr, name, what)
    return arr


def _entry_weights(weights, nnz: int) -> np.ndarray:
    """``weights``: one finite number per stored entry, as float64."""
    w = _numeric(_column(weights, "weights", "numbers"), "weights")
    if w.size != nnz:
        raise ValueError(f"weights has length {w.size}: one per stored entry of matrix ({nnz}) expected")
    return w


def _numeric(arr: np.ndarray, name: str) -> np.ndarray:
    if np.iscomplexobj(arr) or (arr.dtype == object and any(isinstance(v, complex) for v in arr.ravel()[:1000])):
        raise TypeError(f"{name} has complex values; weights must be real")
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be numeric, got non-numeric values") from None
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check_hashable(arr: np.ndarray, name: str, what: str) -> None:
    """Ids must be hashable scalars or tuples: a nested list or array is a 2-D id, refused."""
    if arr.dtype == object:
        bad = next((v for v in arr if isinstance(v, (list, np.ndarray, dict, set))), None)
        if bad is not None:
            raise TypeError(f"{name} must be 1-D {what}, got an element {bad!r}")


def _factorize(values: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # ids of mutually incomparable types: keep first-appearance order
        codes, uniques = pd.factorize(values, sort=False)
    if np.any(codes < 0):
        raise ValueError(f"{name} contains missing ids (NaN/None)")
    uniques = np.asarray(uniques)
    _check_one_type(uniques, name)
    return codes, uniques


def _check_one_type(uniques: np.ndarray, name: str) -> None:
    """Distinct ids of several types that print alike are an error (2 and "2" from two files)."""
    if uniques.dtype == object and pd.api.types.infer_dtype(uniques, skipna=False) not in ("string", "bytes"):
        # ids of several types: two that print alike are one id misread (2 and "2" from two files)
        spelled = pd.Series(uniques).map(repr).str.strip("'\"")
        twins = spelled[spelled.duplicated(keep=False)]
        if twins.size:
            shown = ", ".join(repr(v) for v in uniques[twins.index[:4]])
            raise ValueError(
                f"{name} holds ids of different types that read the same ({shown}): they would be different "
                "users or items; convert the column to one type (e.g. .astype(str))"
            )


def _extended(index: pd.Index, ids: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``index`` followed by those of ``ids`` it lacks (in their order), and the position
    of each of ``ids`` in that list."""
    positions = index.get_indexer(ids)
    new = positions < 0
    grown = np.concatenate([index.to_numpy(dtype=object), ids[new].astype(object)])
    if new.any():
        _check_one_type(pd.unique(grown), name)
        grown = (
            grown
            if index.dtype == object or ids.dtype == object
            else grown.astype(np.result_type(index.dtype, ids.dtype))
        )
    positions[new] = len(index) + np.arange(int(new.sum()))
    return grown, positions


def _id_array(ids, n: int, name: str) -> np.ndarray:
    if ids is None:
        return np.arange(n)
    ids = _column(ids, name)
    if ids.size != n:
        raise ValueError(f"{name} has length {ids.size} but the matrix has {n} {name.split('_')[0]}s")
    if pd.isna(ids).any():
        raise ValueError(f"{name} contains missing ids (NaN/None)")
    if not pd.Index(ids).is_unique:
        dup = pd.Index(ids)[pd.Index(ids).duplicated()][:5].tolist()
        raise ValueError(f"{name} must be unique; duplicated: {dup}")
    return ids.copy()


def _binarize(X: sp.csr_matrix, threshold, rule, name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """Keep the pairs whose (summed) weight passes the rule, as ones; and the mask of the kept
    stored entries."""
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got {rule!r}")
    data = X.data
    if threshold is None:
        if np.any(data < 0):
            raise ValueError(
                f"{name}: {int(np.sum(data < 0))} (user, item) pair(s) have negative weight; give a threshold "
                "to treat them as explicit negatives"
            )
        keep = data > 0
    else:
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise TypeError(f"threshold must be a real number or None, got {threshold!r}")
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be finite, got {threshold}")
        keep = data >= threshold if rule == ">=" else data > threshold
    X = sp.csr_matrix((keep.astype(np.float64), X.indices, X.indptr), shape=X.shape)
    X.eliminate_zeros()  # keeps the order of the other entries
    return X, keep


def _k_core(X: sp.csr_matrix, min_user: int, min_item: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns surviving the iterative k-core (each pass is vectorised)."""
    rows = np.arange(X.shape[0])
    cols = np.arange(X.shape[1])
    while True:
        r_keep = np.diff(X.indptr) >= min_user
        c_keep = np.bincount(X.indices, minlength=X.shape[1]) >= min_item
        if r_keep.all() and c_keep.all():
            return rows, cols
        X = X[r_keep][:, c_keep]
        rows, cols = rows[r_keep], cols[c_keep]
        if X.shape[0] == 0 or X.shape[1] == 0:
            return rows, cols


def check_timestamps(values, n: int, name: str = "timestamps", what: str = "stored entries") -> np.ndarray:
    """``values`` as a 1-D array of ``n`` times, one per ``what``.

    Numbers become int64 (integers) or float64 (finite: NaN and infinities are a ``ValueError``);
    ``datetime64`` / ``timedelta64`` keep their unit (NaT is a ``ValueError``); time-zone-aware
    datetimes are converted to UTC; an object array of numbers or of datetimes is converted
    likewise.  Strings, booleans and complex numbers are a ``TypeError`` (parse date strings with
    ``pandas.to_datetime`` first); a length other than ``n`` is a ``ValueError``.

    Examples
    --------
    >>> import pandas as pd
    >>> from recsys_ltr.interactions import check_timestamps
    >>> check_timestamps([3, 1, 2], 3)
    array([3, 1, 2])
    >>> times = pd.Series(pd.to_datetime(["2024-01-01 10:00", "2024-01-02 00:00"])).dt.tz_localize("Europe/Paris")
    >>> [str(pd.Timestamp(t)) for t in check_timestamps(times, 2)]  # time-zone-aware: in UTC
    ['2024-01-01 09:00:00', '2024-01-01 23:00:00']
    """
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.DatetimeTZDtype):
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    elif isinstance(values, pd.Index) and isinstance(values.dtype, pd.DatetimeTZDtype):
        values = values.tz_convert("UTC").tz_localize(None)
    if isinstance(values, (pd.Series, pd.Index)):
        arr = values.to_numpy()
    else:
        try:
            arr = np.asarray(values)
        except ValueError:  # nested sequences of unequal lengths
            raise ValueError(f"{name} must be a 1-D array of times") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size != n:
        raise ValueError(f"{name} has length {arr.size}, expected {n} (one per {what})")
    if arr.dtype == object:
        arr = _object_times(arr, name)
    kind = arr.dtype.kind
    if kind in "mM":
        if np.isnat(arr).any():
            raise ValueError(f"{name} contains missing times (NaT)")
        return arr.copy()
    if kind in "iu":
        if kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{name} has integers beyond the int64 range")
        return arr.astype(np.int64)
    if kind == "f":
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        return arr
    what_got = {"b": "booleans", "c": "complex numbers", "U": "strings", "S": "bytes"}.get(kind, f"dtype {arr.dtype}")
    hint = " (parse date strings with pandas.to_datetime first)" if kind in "US" else ""
    raise TypeError(f"{name} must be numbers or datetimes, got {what_got}{hint}")


def _object_times(arr: np.ndarray, name: str) -> np.ndarray:
    """An object array of times as a typed array (numbers or datetimes), or a clear error."""
    if pd.isna(arr).any():
        raise ValueError(f"{name} contains missing times (NaN/None/NaT)")
    inferred = pd.api.types.infer_dtype(arr, skipna=False)
    if inferred == "integer":
        try:
            return arr.astype(np.int64)
        except OverflowError:
            raise ValueError(f"{name} has integers beyond the int64 range") from None
    if inferred in ("floating", "mixed-integer-float", "decimal"):
        return arr.astype(np.float64)
    if inferred in ("datetime", "datetime64", "date"):
        return pd.DatetimeIndex(pd.to_datetime(arr, utc=True)).tz_localize(None).to_numpy()
    if inferred in ("timedelta", "timedelta64"):
        return pd.to_timedelta(arr).to_numpy()
    hint = " (parse date strings with pandas.to_datetime first)" if inferred in ("string", "bytes") else ""
    raise TypeError(f"{name} must be numbers or datetimes, got values of kind {inferred!r}{hint}")


def time_order_key(times: np.ndarray) -> np.ndarray:
    """A numeric key ordering checked ``times`` (:func:`check_timestamps`) as time: int64 for
    integers and datetimes (their count of units), float64 for floats."""
    if times.dtype.kind in "mM":
        return times.astype(np.int64)
    return times


def _latest_per_pair(u_codes, i_codes, n_items: int, times: np.ndarray) -> np.ndarray:
    """The time of each distinct (user, item) pair's latest event, pairs in (user, item) order
    (the order of the stored entries of the summed CSR matrix)."""
    pair = np.asarray(u_codes, dtype=np.int64) * n_items + np.asarray(i_codes, dtype=np.int64)
    order = np.lexsort((time_order_key(times), pair))
    ordered = pair[order]
    last = np.ones(pair.size, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    return times[order[last]]


def _submatrix(X: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """``X[rows][:, cols]`` (sorted ``rows``, ``cols``) as a canonical CSR of ones, and the position
    in ``X``'s stored entries of each kept entry (what the timestamps follow)."""
    P = sp.csr_matrix((np.arange(1, X.nnz + 1, dtype=np.float64), X.indices, X.indptr), shape=X.shape)
    S = P[rows][:, cols].tocsr()
    S.sort_indices()
    kept = sp.csr_matrix((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape)
    return kept, S.data.astype(np.int64) - 1


def _check_choice(value, name: str, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _as_id_list(ids, tuple_ids: bool):
    """A scalar id (a tuple too, when the ids are tuples) as a one-element list; sequences as given."""
    if np.ndim(ids) == 0 and not isinstance(ids, (list, np.ndarray, pd.Series, pd.Index)):
        return [ids]
    if isinstance(ids, tuple) and tuple_ids:
        return [ids]
    return ids


def _check_features(F, names, n_items: int):
    F = check_sparse(F, "item_features", allow_empty=True)  # finite, non-negative, canonical
    if F.shape[0] != n_items:
        raise ValueError(f"item_features has {F.shape[0]} rows, expected one per item ({n_items})")
    F.eliminate_zeros()
    if names is not None:
        names = _column(names, "item_feature_names")
        if names.size != F.shape[1]:
            raise ValueError(f"item_feature_names has {names.size} names for {F.shape[1]} feature columns")
    return F, names


def _holds_tuples(index: pd.Index) -> bool:
    return index.dtype == object and any(isinstance(v, tuple) for v in index)


def _lookup(index: pd.Index, ids, kind: str, tuple_ids: bool):
    # a tuple is one id when the ids include tuples, else a sequence of ids
    scalar = np.ndim(ids) == 0 or (isinstance(ids, tuple) and tuple_ids)
    arr = _column([ids] if scalar else ids, f"{kind} ids")
    pos = index.get_indexer(arr) if arr.size else np.empty(0, dtype=np.int64)
    unknown = pos < 0
    if unknown.any():
        bad = arr[unknown][:5].tolist()
        raise UnknownIdError(f"unknown {kind} id(s): {bad}" + (" ..." if unknown.sum() > 5 else ""))
    pos = pos.astype(np.int64)
    return int(pos[0]) if scalar else pos
