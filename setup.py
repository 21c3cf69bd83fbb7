"""Package discovery for torchconform's split layout.

The repository keeps its components as visible top-level folders (suites/,
skiplists/, collectors/, dashboard/, db/, ci/, cli/, refdev/) and maps them all
under one import namespace, ``torchconform``.  Sub-packages are discovered here
so that adding a folder with an ``__init__.py`` needs no edit to pyproject.toml.
"""
import os

from setuptools import setup

COMPONENTS = ["cli", "refdev", "suites", "skiplists", "collectors", "dashboard", "db", "ci", "sweep", "census"]


def _discover():
    package_dir = {"torchconform": "torchconform"}
    packages = ["torchconform"]
    for folder in COMPONENTS:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            if "__init__.py" not in files:
                continue
            name = "torchconform." + root.replace(os.sep, ".")
            packages.append(name)
            package_dir[name] = root
    return packages, package_dir


packages, package_dir = _discover()
setup(packages=packages, package_dir=package_dir)
