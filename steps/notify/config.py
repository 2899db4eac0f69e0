"""The destinations, configured once: a file (on a cluster, the ``imagebump-notify`` Secret mounted
as a file) or, on one machine, environment variables. URLs and secrets never leave this module but
into an HTTP request: each is registered for redaction the moment it is read.

The file (YAML or JSON)::

    destinations:
      team:   {type: slack,   url: https://hooks.slack.com/services/…}
      ops:    {type: teams,   url: https://….logic.azure.com/…}
      hooks:  {type: webhook, url: https://receiver.example/imagebump, secret: …}
    gh:     {type: github}   # PR comments and the imagebump/live status, with commit-pr's credentials
    default: [team]          # every outcome no rule routes
    alarms: [ops]            # optional: mismatch, timeout, failed, backup alarms go here instead
    others: [team]           # optional: every other outcome goes here instead of default

Environment (when no file exists): ``IMAGEBUMP_NOTIFY_SLACK_URL``, ``IMAGEBUMP_NOTIFY_TEAMS_URL``,
``IMAGEBUMP_NOTIFY_WEBHOOK_URL`` with ``IMAGEBUMP_NOTIFY_WEBHOOK_SECRET`` (each also as ``…_FILE``)
define destinations named ``slack``, ``teams`` and ``webhook``, all of them the default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from steps.notify.decide import NotifyConfigError, Routing
from steps.notify.payloads import KINDS
from steps.runtime.redact import register_secret

FILE_ENV = "IMAGEBUMP_NOTIFY_FILE"
DEFAULT_FILE = "/etc/imagebump/notify/notify.yaml"
LEDGER_ENV = "IMAGEBUMP_NOTIFY_LEDGER_DIR"
#: ``true``: a destination ``github`` (PR comments, the ``imagebump/live`` status) with commit-pr's token.
GITHUB_ENV = "IMAGEBUMP_NOTIFY_GITHUB"
GITHUB = "github"
_ENV_DESTINATIONS = (
    ("slack", "IMAGEBUMP_NOTIFY_SLACK_URL", None),
    ("teams", "IMAGEBUMP_NOTIFY_TEAMS_URL", None),
    ("webhook", "IMAGEBUMP_NOTIFY_WEBHOOK_URL", "IMAGEBUMP_NOTIFY_WEBHOOK_SECRET"),
)


@dataclass(frozen=True)
class Destination:
    """One place messages go. ``repr`` shows no URL and no secret."""

    name: str
    kind: str
    url: str = field(repr=False)
    secret: str = field(default="", repr=False)


@dataclass(frozen=True)
class NotifyConfig:
    destinations: Mapping[str, Destination]
    routing: Routing


def _secret_env(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value and env.get(f"{name}_FILE"):
        value = Path(env[f"{name}_FILE"]).read_text().strip()
    return value


def _names(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise NotifyConfigError(f"notifications file: {where} must be a list of destination names")


def parse(data: object, source: str = "notifications file") -> NotifyConfig:
    """A config from the file's parsed content; a bad file names the field at fault."""
    if not isinstance(data, dict) or not isinstance(data.get("destinations"), dict):
        raise NotifyConfigError(f"{source}: expected a mapping with `destinations:` (name: {{type, url}})")
    destinations = {}
    for name, spec in data["destinations"].items():
        if isinstance(spec, dict) and spec.get("type") == GITHUB:  # commit-pr's credentials, no URL
            destinations[str(name)] = Destination(str(name), GITHUB, "")
            continue
        if not isinstance(spec, dict) or spec.get("type") not in KINDS or not spec.get("url"):
            raise NotifyConfigError(
                f"{source}: destination {name!r} needs `type` ({', '.join((*KINDS, GITHUB))}) and `url` "
                f"(`github` needs none)"
            )
        if spec["type"] == "webhook" and not spec.get("secret"):
            raise NotifyConfigError(
                f"{source}: webhook destination {name!r} needs `secret` (it signs each request)"
            )
        register_secret(str(spec["url"]))
        if spec.get("secret"):
            register_secret(str(spec["secret"]))
        destinations[str(name)] = Destination(
            str(name), spec["type"], str(spec["url"]), str(spec.get("secret", ""))
        )
    default = _names(data.get("default", list(destinations)), "default")
    alarms = _names(data["alarms"], "alarms") if "alarms" in data else None
    others = _names(data["others"], "others") if "others" in data else None
    for where, names in (("default", default), ("alarms", alarms or ()), ("others", others or ())):
        for n in names:
            if n not in destinations:
                raise NotifyConfigError(f"{source}: {where} names {n!r}, which is not a destination")
    github = tuple(n for n, d in destinations.items() if d.kind == GITHUB)
    return NotifyConfig(destinations, Routing(default, alarms, others, github))


def _github_env(env: Mapping[str, str]) -> bool:
    return env.get(GITHUB_ENV, "").lower() in ("1", "true", "yes")


def configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether :func:`load` can find any destination: a file, or a destination's variable with a
    value. False means no destination, and is answered without parsing anything (no YAML, no
    pydantic): the exit handler of a Workflow with nothing configured costs about an interpreter's
    start (issue 33)."""
    env = os.environ if env is None else env
    if Path(env.get(FILE_ENV) or DEFAULT_FILE).is_file() or _github_env(env):
        return True
    return any(_secret_env(env, url_env) for _, url_env, _ in _ENV_DESTINATIONS)


def load(env: Mapping[str, str] | None = None) -> NotifyConfig:
    """The configuration: the file when it exists, else the environment; none is no destination."""
    env = os.environ if env is None else env
    path = Path(env.get(FILE_ENV) or DEFAULT_FILE)
    if path.is_file():
        import yaml  # here: a step with nothing configured never reads YAML (:func:`configured`)

        text = path.read_text()
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise NotifyConfigError(f"{path}: not YAML/JSON ({type(exc).__name__})") from None
        return parse(data, str(path))
    spec: dict[str, dict[str, str]] = {}
    for name, url_env, secret_env in _ENV_DESTINATIONS:
        url = _secret_env(env, url_env)
        if url:
            spec[name] = {"type": name, "url": url}
            if secret_env:
                spec[name]["secret"] = _secret_env(env, secret_env)
    if _github_env(env):
        spec[GITHUB] = {"type": GITHUB}
    return parse({"destinations": spec}, "environment") if spec else NotifyConfig({}, Routing())
