"""Neighbourhoods and affinity matrices: cosine KNN, ktrunc, cosine / KUNN / SLIM / RP3β / content affinities."""

from .affinity import Affinity, cosine_affinity, kunn_affinity, rp3beta_affinity, slim_affinity
from .content import ContentAffinity, blend_affinity, coconsumption_relevance, top_fraction
from .knn import KnnIndex, cosine_knn, knn_index, knn_query, ktrunc, truncate_rows, weighted_cosine_knn
from .rp3beta import rp3beta_similarity, rp3beta_weights

__all__ = [
    "Affinity",
    "ContentAffinity",
    "KnnIndex",
    "blend_affinity",
    "coconsumption_relevance",
    "cosine_affinity",
    "cosine_knn",
    "knn_index",
    "knn_query",
    "ktrunc",
    "kunn_affinity",
    "rp3beta_affinity",
    "rp3beta_similarity",
    "rp3beta_weights",
    "slim_affinity",
    "top_fraction",
    "truncate_rows",
    "weighted_cosine_knn",
]
