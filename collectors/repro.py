"""Repro commands the runner records with every outcome: a command another machine runs
from its own torchconform checkout (the site showing it is public), so no path of this
machine: the environment the backend needs, ``python -m pytest``, the test, the run's
options that decide collection (an upstream test exists under its recorded name only with
the suite's ``-c``/``-p``) and the plugin's.  Every test of a run gets the same command but
for its id and op, so one template serves the run (outcome.repro_template)."""
from __future__ import annotations

import importlib.util
import os

from torchconform.core.backend_env import AUTOLOAD_ENV, collection_options, portable_path, repro_command
from torchconform import settings as tc_settings
from torchconform.core.profile import PROFILE_DIR


def checkout_root() -> str:
    """The torchconform checkout repro commands run in (suites/ and skiplists/ below it)."""
    # Found, not imported: the plugin sits below the suites it runs.
    suites = importlib.util.find_spec("torchconform.suites").submodule_search_locations[0]
    return os.path.dirname(os.path.abspath(suites))


def repro_for(node_path: str, nodeid: str, args, device: str, profile, settings, op: str = "",
              environ=None) -> str:
    """The repro of test ``nodeid`` (at ``node_path``, absolute) of a run started with pytest
    arguments ``args``; ``op`` for the ops suite, which instantiates only the ops it is told."""
    environ = os.environ if environ is None else environ
    root = checkout_root()
    file = node_path.partition("::")[0]
    if os.path.isabs(file) and not portable_path(file, root, environ):
        node_path = nodeid   # a test outside the checkout: as pytest names it from its rootdir
    options = collection_options(args) + ["--tc-device", device] + profile_option(profile)
    if op:
        options += ["--tc-ops", op]
    if settings.selection:
        options += ["--tc-selection", settings.selection]
    if settings.backend_module:
        options += ["--tc-backend-module", settings.backend_module]
    if getattr(settings, "no_fallback", False):
        options += ["--tc-no-fallback", "1"]
    return repro_command(node_path, options, repro_env(profile, root, environ), root, environ)


def profile_option(profile) -> list[str]:
    """``--tc-profile`` as another checkout has it: a shipped profile by its folder's name;
    none for defaults probed at start-up (the plugin probes them again there); else the
    path (repro_command writes it relative to the checkout or under $HOME where it can)."""
    path = os.path.abspath(profile.path)
    folder = os.path.dirname(path)
    if os.path.basename(path) == "profile.yaml" and os.path.dirname(folder) == os.path.abspath(PROFILE_DIR):
        return ["--tc-profile", os.path.basename(folder)]
    if folder.endswith(os.sep + os.path.join(".torchconform", "profiles")):
        return []
    return ["--tc-profile", path]


def repro_env(profile, root: str, environ) -> dict:
    """What the backend's process needs set: the profile's env, refdev's operator profile
    (a path relative to the checkout), torch's autoload off where this run needed that."""
    env = dict(profile.env)
    refdev = tc_settings.given("TORCHCONFORM_REFDEV_PROFILE", environ)
    if refdev:
        # a value is quoted whole, so only a checkout-relative form (never $VAR) replaces a path
        env["TORCHCONFORM_REFDEV_PROFILE"] = (portable_path(refdev, root, {}) or refdev) if os.path.isabs(refdev) \
            else refdev
    if environ.get(AUTOLOAD_ENV) == "0":
        env[AUTOLOAD_ENV] = "0"
    return env
