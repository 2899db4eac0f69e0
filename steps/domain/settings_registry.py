"""Every ``IMAGEBUMP_*`` environment setting, as data: its name, who reads it, its default and
what it means.

The settings page of the documentation (docs/reference/settings.md) is generated from
:data:`SETTINGS`, and the generator refuses a tree whose code names an ``IMAGEBUMP_*`` variable this
registry does not list. Pure data: reads and writes nothing (the readers are
:mod:`steps.runtime.settings` and each step's own settings).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Who a setting is for: the operator of a cluster or a machine, or the project's own tooling.
OPERATOR, INTERNAL = "operator", "internal"


@dataclass(frozen=True)
class Setting:
    """One environment variable.

    ``secret``: the value is a secret, also read from the file ``$NAME_FILE`` names (the
    ``_FILE`` variant is listed with it, never on its own). ``readers``: the steps or commands that
    read it. ``audience``: :data:`OPERATOR` (documented for users) or :data:`INTERNAL` (set by
    imagebump itself or its tests; documented so nobody wonders).
    """

    name: str
    readers: tuple[str, ...]
    meaning: str
    default: str = ""
    secret: bool = False
    audience: str = OPERATOR

    @property
    def names(self) -> tuple[str, ...]:
        """The variable, and ``NAME_FILE`` for a secret."""
        return (self.name, f"{self.name}_FILE") if self.secret else (self.name,)


_STEPS_WITH_GIT_READS = (
    "edit-kustomize",
    "reconcile",
    "verify-live",
    "live-states",
    "imagebump run --local",
    "imagebump reconcile",
)

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "IMAGEBUMP_RULES_FILE",
        ("resolve-image", "reconcile"),
        "the rules file (the `imagebump-rules` ConfigMap mounted there on a cluster)",
        default="/etc/imagebump/rules/rules.yaml",
    ),
    Setting(
        "IMAGEBUMP_GIT_TOKEN",
        ("commit-pr", "imagebump run --local", "imagebump reconcile --apply"),
        "the token that may push (sent as an HTTP header, never in a URL or `.git/config`); "
        "also the read token when no read token is given",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_GIT_READ_TOKEN",
        _STEPS_WITH_GIT_READS,
        "an optional read-only token for clones and history reads (else anonymous, or the GitHub "
        "App's installation token when the App is configured)",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_GITHUB_API_URL",
        ("commit-pr", "reconcile", "edit-kustomize"),
        "GitHub's API (Enterprise: `https://HOST/api/v3`); its host is also how a repository URL is spelled",
        default="https://api.github.com",
    ),
    Setting(
        "IMAGEBUMP_GITHUB_APP_ID",
        ("commit-pr", "edit-kustomize", "reconcile"),
        "a GitHub App's id: with the key file and the installation id, the App authenticates "
        "instead of a token (its installation token is cached until it expires)",
    ),
    Setting(
        "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE",
        ("commit-pr", "edit-kustomize", "reconcile"),
        "the file holding the GitHub App's private key (PEM; only ever a file)",
    ),
    Setting(
        "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID",
        ("commit-pr", "edit-kustomize", "reconcile"),
        "the GitHub App's installation id on the repositories' owner",
    ),
    Setting(
        "IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET",
        ("commit-pr",),
        "seconds one commit-pr step may sit out GitHub's rate limits in all; beyond it the step "
        "exits 75 and Argo retries it",
        default="780",
    ),
    Setting("IMAGEBUMP_GIT_AUTHOR_NAME", ("commit-pr",), "the commits' author name", default="imagebump"),
    Setting(
        "IMAGEBUMP_GIT_AUTHOR_EMAIL",
        ("commit-pr",),
        "the commits' author e-mail",
        default="imagebump@users.noreply.github.com",
    ),
    Setting(
        "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE",
        ("commit-pr",),
        "the commit message, a Python `str.format` string over the fields `steps/commit_pr/message.py` "
        "lists (unknown fields are refused before any I/O)",
        default="{subject}\\n\\n{details}",
    ),
    Setting(
        "IMAGEBUMP_PUSH_ATTEMPTS",
        ("commit-pr",),
        "bounded rebase-and-retry attempts of a push in `mode: commit` (1–50)",
        default="10",
    ),
    Setting(
        "IMAGEBUMP_REQUIRE_VERIFIED",
        ("commit-pr",),
        "`true`: every rule behaves as if it said `requireVerified: true`",
        default="false",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_NAMESPACE",
        ("verify-live", "live-states"),
        "Argo CD's namespace, where verify-live looks for Applications",
        default="argocd",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES",
        ("verify-live", "live-states"),
        "Argo CD's `application.namespaces` (comma-separated names or patterns): the other "
        "namespaces whose Applications verify-live reads (its Role reads no ConfigMap)",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_CONTEXT",
        ("verify-live", "imagebump run --local", "imagebump demo"),
        "off a cluster: the kubeconfig context (`KUBECONFIG` or `~/.kube/config`) whose Argo CD "
        "verify-live watches (`--argocd-context` sets it)",
    ),
    Setting(
        "IMAGEBUMP_GATE_INTERVAL",
        ("imagebump run --local",),
        "how often the promotion gate (`promoteAfter`) is evaluated: a gated target is promoted within "
        "one interval after its soak ends (`30s`, `1m`; at most `1m`, so within 2 minutes; on a cluster "
        "the CronWorkflow `image-gate` runs every minute)",
        default="60s",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_REFRESH",
        ("verify-live",),
        "`none`: no refresh (Argo CD's Git webhook or poll brings the commit in); `api`: refresh "
        "each Application through Argo CD's API server (`GET /api/v1/applications/NAME?refresh=normal`, "
        "an account allowed only `applications, get`). imagebump never writes to an Application",
        default="none",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_SERVER",
        ("verify-live",),
        "with `IMAGEBUMP_ARGOCD_REFRESH=api`: Argo CD's API server URL (e.g. `https://argocd-server.argocd.svc`)",
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_TOKEN",
        ("verify-live",),
        "with `IMAGEBUMP_ARGOCD_REFRESH=api`: an Argo CD account token allowed only `applications, get` "
        "(Secret `imagebump-argocd`, key `token`)",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_ARGOCD_CA_FILE",
        ("verify-live",),
        "with `IMAGEBUMP_ARGOCD_REFRESH=api`: an optional CA bundle for the API server's certificate",
    ),
    Setting(
        "IMAGEBUMP_LIVE_POLL_SECONDS",
        ("verify-live",),
        "seconds between two reads of an Application while verify-live waits",
        default="5",
    ),
    Setting(
        "IMAGEBUMP_NAMESPACE",
        ("backup-export",),
        "the namespace backup-export's pod runs in (the template sets it from the pod's metadata): "
        "its settings ConfigMap is there",
        audience=INTERNAL,
    ),
    Setting(
        "IMAGEBUMP_LOG_LEVEL",
        ("every step",),
        "the steps' log level (`DEBUG`, `INFO`, `WARNING`, `ERROR`)",
        default="INFO",
    ),
    Setting(
        "IMAGEBUMP_LOG_FORMAT",
        ("imagebump backup", "imagebump restore", "imagebump reconcile", "imagebump set-image"),
        "how these commands log on stderr: `text` or `json` (`--log-format` wins)",
        default="text",
    ),
    Setting(
        "IMAGEBUMP_DEBUG",
        ("every command",),
        "set: an unexpected error prints its traceback",
    ),
    Setting(
        "IMAGEBUMP_LOCAL_PREFORK",
        ("imagebump run --local", "imagebump reconcile", "imagebump demo"),
        "`0`: the local executor starts a new interpreter per step instead of forking a warm one",
        default="1",
    ),
    Setting(
        "IMAGEBUMP_TMPDIR_DELETED_AFTER_STEP",
        ("every step",),
        "`1`: whoever started the step deletes its `TMPDIR` afterwards (the local executor sets it)",
        audience=INTERNAL,
    ),
    # notifications (issue 36; docs/notifications.md)
    Setting(
        "IMAGEBUMP_NOTIFY_FILE",
        ("notify", "imagebump run --local"),
        "the notifications file: destinations (with their URLs and secrets) and routing; on a "
        "cluster the `imagebump-notify` Secret mounted there",
        default="/etc/imagebump/notify/notify.yaml",
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_SLACK_URL",
        ("notify", "imagebump run --local"),
        "without a notifications file: a Slack incoming webhook (destination `slack`)",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_TEAMS_URL",
        ("notify", "imagebump run --local"),
        "without a notifications file: a Microsoft Teams incoming webhook (destination `teams`)",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_WEBHOOK_URL",
        ("notify", "imagebump run --local"),
        "without a notifications file: a generic JSON webhook (destination `webhook`), signed",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_WEBHOOK_SECRET",
        ("notify", "imagebump run --local"),
        "the HMAC-SHA256 key that signs the generic webhook's requests (`X-Imagebump-Signature`)",
        secret=True,
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_LEDGER_DIR",
        ("notify", "imagebump run --local"),
        'where the "already sent" record of each notification is kept (one file per key)',
        default="~/.cache/imagebump/notifications",
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_LEDGER_BUCKET",
        ("notify",),
        'on a cluster: an S3 bucket for the "already sent" record (conditional puts); else the directory',
    ),
    Setting(
        "IMAGEBUMP_NOTIFY_GITHUB",
        ("notify", "imagebump run --local"),
        "`true`: GitHub is a destination (PR comments, the `imagebump/live` commit status), with "
        "commit-pr's credentials",
    ),
    Setting(
        "IMAGEBUMP_ARGO_UI_URL",
        ("notify",),
        "the Argo Workflows UI's URL: a failed Workflow's message links to its page there (else names it)",
    ),
    Setting(
        "IMAGEBUMP_WORKFLOW_FILE",
        ("notify",),
        "set by the local executor for an exit handler: the finished Workflow as JSON (on a cluster "
        "notify reads it from the Kubernetes API)",
    ),
)

#: Every variable name the registry knows, ``_FILE`` variants included.
NAMES: frozenset[str] = frozenset(name for setting in SETTINGS for name in setting.names)
