"""The programs the distributed suite's tests run on every rank (``launch.run_ranks``).

Each is ``function(ctx) -> dict``: it runs the same computation twice in one process
group, once on CPU tensors (gloo) and once on the device's (its c10d backend), from the
same seed and data, and asserts that the device's results equal the CPU's within the
profile's tolerances.  The dict it returns (JSON) is what the test records.
"""
