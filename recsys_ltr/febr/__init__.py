"""FEBR: learning to rank on per-(user, item) features extracted from the feedback matrix
(dissertation sec. 4.5-4.6), trained by OPT-ADG (Alg. 4.2) through the shared WARP engine.

* :class:`FEBR` -- stacked FEBR (:mod:`recsys_ltr.febr.model`): the scores of base recommenders
  as features (:mod:`~recsys_ltr.febr.stacking`, :mod:`~recsys_ltr.febr.bases`), leak-free, optionally
  re-ranked by LambdaMART;
* :class:`AffinityFEBR` -- the dissertation's FEBRi / FEBRu / FEBRiu (:mod:`recsys_ltr.febr.dissertation`)
  on an affinity's active items / users (:mod:`~recsys_ltr.febr.features`: six aggregators and the
  missing indicator, sec. 4.5.2-4.5.4);
* :mod:`recsys_ltr.febr.training` -- OPT-ADG, the training both share;
* :func:`febr_features` -- either model's features of blocks of users, on any executor.
"""

from functools import partial

from .._memory import TASK_BYTES, rows_per_block
from ..executors import check_model_users, method_block, user_stream
from .dissertation import AffinityFEBR
from .features import AGGREGATORS, FeatureExtractor, build_affinities, feature_names
from .model import FEBR
from .training import OptADGRecommender

__all__ = [
    "AGGREGATORS",
    "FEBR",
    "AffinityFEBR",
    "FeatureExtractor",
    "build_affinities",
    "feature_names",
    "febr_features",
]


def febr_features(model, users=None, *, batch_size=None, executor=None, show_progress=None):
    """FEBR's features of blocks of training users, yielded as ``(user_ids, features)`` when each
    block finishes; the fitted model is shipped once and each task extracts one block.

    ``features`` is :meth:`FEBR.head_features <recsys_ltr.febr.FEBR.head_features>` ``(user_ids)``
    -- ``(indptr, items, phi)``, the features of every pair of each user's head (the items the
    scorer ranks; the bases score every item to find it) -- or :meth:`AffinityFEBR.transform
    <recsys_ltr.febr.AffinityFEBR.transform>` ``(user_ids)``: a ``(B, n_items, n_features)`` array,
    every item of every user of the block.

    The default ``batch_size`` bounds a task's dense arrays (the bases' ``n_bases`` rows of scores
    per user, or the ``n_items x n_features`` features per user) to about
    :data:`recsys_ltr._memory.TASK_BYTES`.  See :func:`recsys_ltr.executors.map_user_blocks` for
    the other arguments.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.febr import AffinityFEBR, febr_features
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = AffinityFEBR(affinity="cosine", k=20, max_iter=20_000, random_state=0).fit(X)
    >>> blocks = febr_features(model, users=range(250), batch_size=100)
    >>> [(users.size, phi.shape) for users, phi in blocks]
    [(100, (100, 100, 7)), (100, (100, 100, 7)), (50, (50, 100, 7))]
    """
    if not isinstance(model, OptADGRecommender):
        raise TypeError(f"model must be a fitted FEBR or AffinityFEBR, got {type(model).__name__}")
    users, _ = check_model_users(model, users, "users")
    if batch_size is None:
        batch_size = rows_per_block(8 * model._feature_floats(), TASK_BYTES)
    fn = partial(method_block, method=model._features_method)
    stream = user_stream(fn, model, users, batch_size, executor, show_progress)
    return ((block, result) for _, block, result in stream)
