"""The fixed request body: the same bytes every run (CHAPTER12.md C7 fixes the input).

``body(size, seed)`` is SHA-256 in counter mode: block i = sha256(seed || i as 8 bytes
big-endian), concatenated and cut to ``size``.  Incompressible, reproducible, and identified
by ``digest()`` (sha256 of the body), which the apps record in their logs.
"""
from __future__ import annotations

import functools
import hashlib

DEFAULT_SIZE = 354_640
DEFAULT_SEED = b"testbed-request-body-v1"


@functools.lru_cache(maxsize=8)
def body(size: int = DEFAULT_SIZE, seed: bytes = DEFAULT_SEED) -> bytes:
    if size < 0:
        raise ValueError(f"body size {size} is negative; give a size >= 0 bytes")
    blocks = (size + 31) // 32
    out = b"".join(hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(blocks))
    return out[:size]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
