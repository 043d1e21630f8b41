"""Only here for the C extensions (pyproject.toml holds everything else).

sandbox_kernel._fastgates holds the hottest gates and the tick; sandbox_kernel._numpyguard holds numpy's
C-level guards (an allocator that refuses arrays a cell's memory limit cannot hold, checks in ndarray's
constructor and buffer export) and type's (class creation and class writes). They are `optional` only so
that an install without a compiler still succeeds and can say what is missing: without them no engine
starts (engine.GuardsNotBuilt names the fix) unless the operator accepts the Python fallbacks
(SANDBOX_KERNEL_PYTHON_GUARDS=1).
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("sandbox_kernel._fastgates", ["sandbox_kernel/_fastgates.c"], optional=True),
    Extension("sandbox_kernel._numpyguard", ["sandbox_kernel/_numpyguard.c"], optional=True),
])
