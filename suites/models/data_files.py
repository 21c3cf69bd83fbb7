"""Read the zoo's data files (``suites/models/data/*.yaml``)."""
from __future__ import annotations

import os

import yaml

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def load_yaml(name: str):
    with open(os.path.join(DATA_DIR, name), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def data_path(*parts: str) -> str:
    return os.path.join(DATA_DIR, *parts)
