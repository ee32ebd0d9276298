"""Every use of an upstream internal, one module per upstream package, each with the versions
it was checked against (``tests/test_compat.py``).
"""
