"""The record itself: the event envelope and its chain, what a checkpoint's event holds, keys
and tags, redaction, readable rendering. Imports nothing of this package above it.
"""
