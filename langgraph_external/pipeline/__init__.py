"""Capture -> seal -> project: what the sources hand over, the capture that commits with a
checkpoint, the sealer, the write-ahead log, the projection runner, the sealing service and
its processes.
"""
