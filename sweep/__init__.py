"""The nightly sweep: sharded, resumable, crash-proof runs; one module per engine."""
