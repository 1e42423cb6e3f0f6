"""Counter-free random numbers for numba kernels, with the state passed explicitly.

Kernels never touch ``np.random`` (global, and shared between threads): each independent
stream is one row of a ``uint64`` state array and every draw names its row.

* Generator: xoroshiro128++ (Blackman & Vigna 2019), two 64-bit words per stream.
* Seeding: splitmix64 expands ``(seed, salt, row)`` into the two words, so stream ``r`` depends
  only on ``(seed, salt, r)``; adding rows later never changes existing streams.
* Rows are padded to :data:`STATE_WIDTH` words (one 64-byte cache line) so that threads drawing
  from neighbouring rows do not false-share.

Example
-------
>>> from recsys_ltr._rng import randint, seed_state
>>> state = seed_state(42, n_streams=2)
>>> x = randint(state, 0, 10)   # uniform in [0, 10), stream 0 (inside or outside numba)
"""

from __future__ import annotations

import numbers

import numpy as np
from numba import njit

from ._validation import check_seed

__all__ = ["STATE_WIDTH", "next_u64", "randint", "seed_state", "uniform"]

STATE_WIDTH = 8
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK32 = np.uint64(0xFFFFFFFF)


@njit(cache=True)
def _mix64(z):
    """splitmix64 finaliser: a bijective avalanche of one 64-bit word."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def _fill(state, seed, salt):
    base = _mix64(seed ^ _mix64(salt * _GOLDEN + _GOLDEN))
    for r in range(state.shape[0]):
        z = base + np.uint64(2 * r + 1) * _GOLDEN
        s0 = _mix64(z)
        s1 = _mix64(z + _GOLDEN)
        if s0 == 0 and s1 == 0:  # the one forbidden state of xoroshiro
            s1 = _GOLDEN
        state[r, 0] = s0
        state[r, 1] = s1


def seed_state(seed, n_streams: int, salt: int = 0) -> np.ndarray:
    """Return a fresh ``(n_streams, STATE_WIDTH)`` uint64 state array.

    Parameters
    ----------
    seed : int, None or numpy.random.Generator
        An int in ``[0, 2**64)`` (larger or negative ints are refused: they would alias other
        seeds' streams); ``None`` draws a seed from OS entropy; a Generator gives one 64-bit
        seed (and advances).
    n_streams : int
        Number of independent streams (rows), >= 1.
    salt : int
        Separates families of streams made from the same seed (e.g. per-thread SGD streams
        versus per-slot minibatch streams).
    """
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63, dtype=np.int64))
    elif seed is None:
        seed = int(np.random.SeedSequence().entropy) % 2**64
    else:
        seed = check_seed(seed, "seed")
    if isinstance(n_streams, bool) or not isinstance(n_streams, numbers.Integral) or n_streams < 1:
        raise ValueError(f"n_streams must be a positive integer, got {n_streams!r}")
    state = np.zeros((int(n_streams), STATE_WIDTH), dtype=np.uint64)
    _fill(state, np.uint64(seed), np.uint64(int(salt) % 2**64))
    return state


@njit(cache=True)
def next_u64(state, row):
    """Advance stream ``row`` and return 64 random bits (xoroshiro128++)."""
    s0 = state[row, 0]
    s1 = state[row, 1]
    result = _rotl(s0 + s1, 17) + s0
    s1 ^= s0
    state[row, 0] = _rotl(s0, 49) ^ s1 ^ (s1 << np.uint64(21))
    state[row, 1] = _rotl(s1, 28)
    return result


@njit(cache=True)
def randint(state, row, n):
    """Uniform integer in ``[0, n)`` for ``1 <= n < 2**32``, exactly unbiased.

    Lemire's multiply-shift on the top 32 bits with rejection of the biased low zone.
    """
    n64 = np.uint64(n)
    m = (next_u64(state, row) >> np.uint64(32)) * n64
    low = m & _MASK32
    if low < n64:
        threshold = (np.uint64(0x100000000) - n64) % n64
        while low < threshold:
            m = (next_u64(state, row) >> np.uint64(32)) * n64
            low = m & _MASK32
    return np.int64(m >> np.uint64(32))


@njit(cache=True)
def uniform(state, row):
    """Uniform float in ``[0, 1)`` with 53 random bits."""
    return np.float64(next_u64(state, row) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
