"""The human-readable mirror: the file workspace, its layout and line formats, and the
projection that writes it.
"""
