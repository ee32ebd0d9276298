"""What the app calls: the checkpointer, the callback handler, the store. Sources hand events
and captures to the pipeline and import nothing below it but the record.
"""
