"""commit-pr's settings (its environment), read and validated before any I/O.

The commit identity's variables and defaults are :mod:`steps.runtime.settings`' (git's commits
read them too); the message template's are :mod:`steps.commit_pr.message`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from steps.commit_pr.message import DEFAULT_TEMPLATE, TEMPLATE_ENV, validate_template
from steps.domain.contract import Contract
from steps.domain.errors import ConfigError
from steps.runtime.settings import (
    AUTHOR_EMAIL_ENV,
    AUTHOR_NAME_ENV,
    DEFAULT_AUTHOR_EMAIL,
    DEFAULT_AUTHOR_NAME,
)

PUSH_ATTEMPTS_ENV = "IMAGEBUMP_PUSH_ATTEMPTS"
DEFAULT_PUSH_ATTEMPTS = 10
#: ``true``: every rule behaves as if it said ``requireVerified: true`` (commit-pr).
REQUIRE_VERIFIED_ENV = "IMAGEBUMP_REQUIRE_VERIFIED"
#: Seconds one commit-pr step may sit out GitHub rate limits in all; beyond it the step exits 75.
RATE_LIMIT_BUDGET_ENV = "IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET"
#: 13 min: what commit-pr's pod (a 15-min deadline) can wait and still land the change in that attempt.
DEFAULT_RATE_LIMIT_BUDGET = 780.0
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class CommitPrSettings(Contract, frozen=True, kw_only=True):
    """commit-pr's runtime configuration (environment), validated before any I/O.

    ``IMAGEBUMP_GIT_AUTHOR_NAME`` / ``IMAGEBUMP_GIT_AUTHOR_EMAIL`` (the commit identity),
    ``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` (:mod:`steps.commit_pr.message`), ``IMAGEBUMP_PUSH_ATTEMPTS``,
    ``IMAGEBUMP_REQUIRE_VERIFIED`` (``requireVerified`` for every rule) and
    ``IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET`` (seconds of rate-limit waits one step sits out, default 780).
    """

    author_name: Annotated[str, Meta(min_length=1, pattern=r"^[^<>\n\r]+$")] = DEFAULT_AUTHOR_NAME
    author_email: Annotated[str, Meta(pattern=r"^[^\s<>@]+@[^\s<>@]+$")] = DEFAULT_AUTHOR_EMAIL
    template: str = "{subject}\n\n{details}"
    push_attempts: Annotated[int, Meta(ge=1, le=50)] = DEFAULT_PUSH_ATTEMPTS
    require_verified: bool = False
    rate_limit_budget: Annotated[float, Meta(ge=0)] = DEFAULT_RATE_LIMIT_BUDGET

    @property
    def author(self) -> str:
        return f"{self.author_name} <{self.author_email}>"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CommitPrSettings:
        """Read and validate. Raises ConfigError naming the variable and the fix."""
        env = os.environ if env is None else env
        name = env.get(AUTHOR_NAME_ENV) or DEFAULT_AUTHOR_NAME
        email = env.get(AUTHOR_EMAIL_ENV) or DEFAULT_AUTHOR_EMAIL
        if re.search(r"[<>\n\r]", name) or not name.strip():
            raise ConfigError(
                f"{AUTHOR_NAME_ENV}={name!r} is not a usable author name (no <, >, newlines)",
                field=AUTHOR_NAME_ENV,
            )
        if not re.fullmatch(r"[^\s<>@]+@[^\s<>@]+", email):
            raise ConfigError(
                f"{AUTHOR_EMAIL_ENV}={email!r} is not an e-mail address like bot@example.com",
                field=AUTHOR_EMAIL_ENV,
            )
        template = env.get(TEMPLATE_ENV) or DEFAULT_TEMPLATE
        validate_template(template)
        raw_attempts = env.get(PUSH_ATTEMPTS_ENV) or str(DEFAULT_PUSH_ATTEMPTS)
        try:
            attempts = int(raw_attempts)
        except ValueError:
            attempts = 0
        if not 1 <= attempts <= 50:
            raise ConfigError(
                f"{PUSH_ATTEMPTS_ENV}={raw_attempts!r} must be a whole number from 1 to 50",
                field=PUSH_ATTEMPTS_ENV,
            )
        raw_verified = (env.get(REQUIRE_VERIFIED_ENV) or "false").strip().lower()
        if raw_verified not in _BOOLS:
            raise ConfigError(
                f"{REQUIRE_VERIFIED_ENV}={raw_verified!r} must be true or false", field=REQUIRE_VERIFIED_ENV
            )
        raw_budget = env.get(RATE_LIMIT_BUDGET_ENV) or str(DEFAULT_RATE_LIMIT_BUDGET)
        try:
            budget = float(raw_budget)
        except ValueError:
            budget = -1.0
        if not 0 <= budget <= 3600:
            raise ConfigError(
                f"{RATE_LIMIT_BUDGET_ENV}={raw_budget!r} must be seconds from 0 to 3600 (how long one step may "
                "wait on GitHub's rate limits before it exits 75 to be retried later)",
                field=RATE_LIMIT_BUDGET_ENV,
            )
        return cls(
            author_name=name.strip(),
            author_email=email,
            template=template,
            push_attempts=attempts,
            require_verified=_BOOLS[raw_verified],
            rate_limit_budget=budget,
        )
