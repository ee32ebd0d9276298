"""Reading the record: inspection, diffs, thread views, timelines, prices."""
