"""Neighbourhoods and affinity matrices: cosine KNN, ktrunc, cosine / KUNN / SLIM affinities."""

from .affinity import Affinity, cosine_affinity, kunn_affinity, slim_affinity
from .knn import cosine_knn, ktrunc, truncate_rows, weighted_cosine_knn

__all__ = [
    "Affinity",
    "cosine_affinity",
    "cosine_knn",
    "kunn_affinity",
    "ktrunc",
    "slim_affinity",
    "truncate_rows",
    "weighted_cosine_knn",
]
