"""Alembic migrations for the store (run by ``torchconform db upgrade``)."""
