"""Read the zoo's data files (``suites/models/data/*.yaml``)."""
from __future__ import annotations

import os

from torchconform.core.yamlpos import load_data

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def load_yaml(name: str):
    return load_data(os.path.join(DATA_DIR, name))


def data_path(*parts: str) -> str:
    return os.path.join(DATA_DIR, *parts)
