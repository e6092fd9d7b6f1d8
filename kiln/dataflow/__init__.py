"""The data mover: kiln's orchestration and bookkeeping around a well-kept transfer engine (rclone).

kiln decides *what* moves (a size + ETag manifest per link, globs, commit markers), hands the list to the
engine (which owns parallelism, multipart and retries), then verifies every moved file by checksum before
recording it. Nothing here implements multipart or retry logic. See docs/dataflow.md.
"""
