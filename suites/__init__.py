"""What runs: one package per suite (ops, modules, upstream, models), and plans of them."""


def known_suites() -> list[str]:
    """Names of the suites (the packages of this folder)."""
    import os
    import pkgutil

    return sorted(i.name for i in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]) if i.ispkg)
