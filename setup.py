"""Only here for the optional C extension (pyproject.toml holds everything else).

sandbox_kernel._fastgates speeds up the three hottest gates; when it cannot be compiled (no compiler,
no Python headers) the install still succeeds and the gates run their Python fast paths instead.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("sandbox_kernel._fastgates", ["sandbox_kernel/_fastgates.c"], optional=True)])
