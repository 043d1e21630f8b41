"""Only here for the optional C extensions (pyproject.toml holds everything else).

sandbox_kernel._fastgates speeds up the hottest gates; sandbox_kernel._numpyguard holds numpy's C-level
guards (an allocator that refuses arrays a cell's memory limit cannot hold, a check in ndarray's
constructor). When they cannot be compiled (no compiler, no Python headers) the install still succeeds:
the gates run their Python fast paths, numpy allocations are bounded only by the memory sampler (and,
at the worker levels, RLIMIT_AS), and numpy's classes are handed out as checking stand-ins.
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("sandbox_kernel._fastgates", ["sandbox_kernel/_fastgates.c"], optional=True),
    Extension("sandbox_kernel._numpyguard", ["sandbox_kernel/_numpyguard.c"], optional=True),
])
