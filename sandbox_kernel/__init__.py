"""Sandboxed Python: a Jupyter kernel that runs untrusted Python under an enforced policy."""
__version__ = "0.1.0"
