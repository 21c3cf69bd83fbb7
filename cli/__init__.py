"""The ``torchconform`` console script: a thin layer over library functions.

Each sub-command lives in its own module ``cmd_<name>.py`` in this package and
exposes ``register(subparsers)``; ``main`` discovers them, so adding a command
touches no shared file.
"""
