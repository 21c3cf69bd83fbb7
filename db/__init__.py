"""The results store: schema (models), migrations, opening (opening), writing (store, bulk, sink,
ingest), export, and the readers (read_rows, read_builds, read_changes, read_ops) with their pure
shapers (shapes) used by the CLI, the gate and the site."""
