"""The data mover: kiln's orchestration and bookkeeping around a well-kept transfer engine (rclone).

kiln decides *what* moves (a manifest per link, globs, conflicts, commit markers), hands the list to the
engine (which owns parallelism, multipart uploads and retries), then verifies every moved file by checksum
before it is renamed into place and recorded. kiln moves bytes itself only where rclone cannot do what the
guarantees need: the ranged, resumable download of large objects (fetch.py), symlinks, directory markers and
a checkpoint's index. See docs/dataflow.md.
"""
