from .util_b import B

A = B
