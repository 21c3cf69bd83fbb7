"""The plugin's resolved settings, one dataclass shared by worker and controller."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from torchconform.errors import UserError


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


def default_build_name(device: str, profile: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{device}-{profile}-{stamp}"


def settings_from(config, namespace=None) -> Settings:
    from torchconform.collectors.plugin import option
    from torchconform.skiplists.profile import available_profiles, load_profile

    def get(dest):
        return option(config, dest, namespace) or ""

    device = get("tc_device")
    profile_name = get("tc_profile")
    if not profile_name:
        profile_name = device if device in available_profiles() else ""
    if not profile_name:
        raise UserError(
            f"no backend profile for device {device!r}; pass --tc-profile with one of "
            f"{', '.join(available_profiles())} or a path to a profile.yaml"
        )
    profile = load_profile(profile_name)
    if profile.device != device:
        raise UserError(f"profile {profile.name!r} is for device {profile.device!r}, not {device!r}; pick a matching --tc-profile")
    try:
        timeout = float(get("tc_timeout") or 0)
    except ValueError:
        raise UserError(f"--tc-timeout {get('tc_timeout')!r} is not a number; give seconds, e.g. --tc-timeout 300")
    return Settings(
        device=device, profile=profile, backend_module=get("tc_backend_module"),
        build=get("tc_build"), junit=get("tc_junit"), jsonl=get("tc_jsonl"), db=get("tc_db"),
        timeout=timeout, suite=get("tc_suite"), selection=get("tc_selection"), ops=get("tc_ops"),
        shard=get("tc_shard"),
    )
