"""Neighbourhoods and affinity matrices: cosine KNN, ktrunc, cosine / KUNN / SLIM affinities."""

from .affinity import Affinity, cosine_affinity, kunn_affinity, slim_affinity
from .content import ContentAffinity, top_fraction
from .knn import KnnIndex, cosine_knn, knn_index, knn_query, ktrunc, truncate_rows, weighted_cosine_knn

__all__ = [
    "Affinity",
    "ContentAffinity",
    "KnnIndex",
    "cosine_affinity",
    "cosine_knn",
    "knn_index",
    "knn_query",
    "ktrunc",
    "kunn_affinity",
    "slim_affinity",
    "top_fraction",
    "truncate_rows",
    "weighted_cosine_knn",
]
