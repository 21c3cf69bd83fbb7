"""The results store: schema (models), migrations, writing (store, sink, ingest), export, and the
one read module (queries) used by the CLI, the gate and the site."""
