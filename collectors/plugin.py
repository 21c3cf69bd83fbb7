"""pytest plugin entry point (registered as ``pytest11``); filled in by the runner."""
