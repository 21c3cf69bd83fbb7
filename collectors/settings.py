"""The plugin's resolved settings, one dataclass shared by worker and controller."""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import subprocess
from dataclasses import dataclass

from torchconform.errors import UserError
from torchconform import settings as tc_settings
from torchconform.collectors.session import option
from torchconform.core.profile import load_profile, shipped_profile_for
from torchconform.skiplists.backend_setup import CLI_FLAGS, resolve_backend


@dataclass
class Settings:
    device: str
    profile: object            # BackendProfile
    backend_module: str = ""
    build: str = ""
    junit: str = ""
    jsonl: str = ""
    db: str = ""
    timeout: float = 0.0
    suite: str = ""
    selection: str = ""
    ops: str = ""
    shard: str = ""
    branch: str = ""
    commit: str = ""
    # failures a declared trait may explain, rerun with the trait off at the session's end
    trait_reruns: int = 200
    # strict mode (run --no-fallback): a test that ran an operator through the CPU fallback
    # is a fail of kind fallback_forbidden; the profile's no_fallback_env is set
    no_fallback: bool = False


def default_build_name(device: str, profile: str, now: _dt.datetime | None = None) -> str:
    """``<device>-<profile>-<UTC time to the microsecond>-<pid>``.

    Running the same job twice must keep both builds, even within one second
    (the store refuses to mix builds), so the stamp has microseconds; the pid
    separates two processes that start in the same microsecond.  Fixed-width
    fields keep names of one device/profile sortable by time.
    """
    if now is None:
        now = _dt.datetime.now(_dt.timezone.utc)
        while _last_stamp and now == _last_stamp[0]:  # same process, same microsecond
            now = _dt.datetime.now(_dt.timezone.utc)
        _last_stamp[:] = [now]
    stamp = now.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{device}-{profile}-{stamp}-{os.getpid() % 100000:05d}"


_last_stamp: list = []


def _git(cwd: str, *args: str) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def source_revision(branch: str = "", commit: str = "", cwd: str | None = None, env=None) -> tuple[str, str]:
    """(branch, commit) the run tests: given values (``--tc-branch``/``--tc-commit``,
    which also read TORCHCONFORM_BRANCH/COMMIT), else GitHub Actions' variables
    (GITHUB_HEAD_REF for pull requests, else GITHUB_REF_NAME; GITHUB_SHA), else the
    git checkout of ``cwd``; quietly empty when none applies.  The gate picks its
    baseline per branch, so every build should know its branch."""
    env = os.environ if env is None else env
    branch = branch or env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or ""
    commit = commit or env.get("GITHUB_SHA") or ""
    cwd = cwd or os.getcwd()
    if (not branch or not commit) and _git(cwd, "rev-parse", "--is-inside-work-tree") == "true":
        if not branch:
            head = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
            branch = "" if head == "HEAD" else head  # detached HEAD: no branch to name
        if not commit:
            commit = _git(cwd, "rev-parse", "HEAD")
    return branch, commit


def probed_profile(device: str, backend_module: str, config=None):
    """The defaults ``torchconform run`` probes for a device without a profile (the device
    brought up in a child, the profile written to .torchconform/profiles/<device>.yaml, one
    line saying so), for direct pytest users; xdist workers read the written file (the plugin
    exports TORCHCONFORM_PROFILE before they start).  Errors in the plugin's flags."""
    from types import SimpleNamespace

    args = SimpleNamespace(device=device, profile=None, backend_module=backend_module,
                           refdev_profile=tc_settings.given("TORCHCONFORM_REFDEV_PROFILE"))
    capman = config.pluginmanager.getplugin("capturemanager") if config is not None else None
    try:
        # its one line ("no profile for ...: probed defaults ...") is said, not captured
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            backend = resolve_backend(args, check=False)
    except UserError as exc:
        raise UserError(plugin_wording(str(exc))) from None
    # what the device needed in the child (torch's autoload off), set before torch loads here
    os.environ.update(backend.env)
    return backend.profile


def plugin_wording(text: str) -> str:
    """``text`` with the CLI's flags written as the plugin's ``--tc-*`` (cli_wording's inverse)."""
    import re

    flags = "|".join(sorted(map(re.escape, CLI_FLAGS.values()), key=len, reverse=True))
    return re.sub(rf"(?<![\w-])--({flags})\b(?!-)", r"--tc-\1", text)


def settings_from(config, namespace=None) -> Settings:
    def get(dest):
        return option(config, dest, namespace) or ""

    device = get("tc_device")
    profile_name = get("tc_profile") or shipped_profile_for(device)
    profile = load_profile(profile_name) if profile_name else probed_profile(device, get("tc_backend_module"), config)
    if profile.device != device:
        raise UserError(f"profile {profile.name!r} is for device {profile.device!r}, not {device!r}; pick a matching --tc-profile")
    try:
        timeout = float(get("tc_timeout") or 0)
    except ValueError:
        raise UserError(f"--tc-timeout {get('tc_timeout')!r} is not a number; give seconds, e.g. --tc-timeout 300")
    raw = get("tc_trait_reruns") or "200"
    if not raw.isdigit():
        raise UserError(f"--tc-trait-reruns {raw!r} is not a count; give a whole number, e.g. --tc-trait-reruns 200 "
                        "(0: rerun none)")
    return Settings(
        device=device, profile=profile, backend_module=get("tc_backend_module"),
        build=get("tc_build"), junit=get("tc_junit"), jsonl=get("tc_jsonl"), db=get("tc_db"),
        timeout=timeout, suite=get("tc_suite"), selection=get("tc_selection"), ops=get("tc_ops"),
        shard=get("tc_shard"), branch=get("tc_branch"), commit=get("tc_commit"), trait_reruns=int(raw),
        no_fallback=no_fallback_flag(get("tc_no_fallback")),
    )


def no_fallback_flag(value: str) -> bool:
    """``--tc-no-fallback`` / $TORCHCONFORM_NO_FALLBACK: 1, true, yes or on."""
    text = str(value or "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise UserError(f"--tc-no-fallback {value!r} is not a switch; give 1 (strict: no CPU fallback) or 0")
