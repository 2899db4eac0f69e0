"""``imagebump backup --bucket B``: back up Argo CD's configuration to S3 from a workstation.

Runs the same code as the ``backup-export`` step (:func:`steps.argocd_backup.export.export_backup`), with
the Kubernetes API reached through the kubeconfig (``--context``, else the current context; the
in-cluster service account when run in a pod) and S3 through boto3 (``--profile``, else the
standard AWS environment). Prints the archive URL, its sha256, counts per kind and any archives
retention deleted; never a Secret value.

Refuses, writing nothing, when it finds no Argo CD (its namespace, ``argocd-cm`` or
``argocd-secret`` missing: a wrong ``--namespace`` or ``--context``). A backup holding far fewer
objects than the last healthy one is written but marked suspect (``suspect …`` line, index field
``suspect``), and retention keeps the archives before it; ``--accept-shrink`` says the smaller
Argo CD is real.

Exit codes: 0 written; 2 bad input, no Argo CD found, or a permission/bucket/KMS problem (the
message names it); 75 a transient failure (API server or S3 unavailable).
"""

from __future__ import annotations

import argparse

EXAMPLE = """\
examples:
  imagebump backup --bucket acme-argocd-backups --cluster prod-eu --context prod-eu
  imagebump backup --bucket acme-argocd-backups --kms-key-id alias/argocd-backup --keep 14 --keep-days 30
"""


#: The flags that are backup settings (``--kms-key-id`` → ``kms_key_id``).
SETTINGS = ("bucket", "prefix", "cluster", "namespace", "kms_key_id", "keep", "keep_days")


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each setting's default from :class:`steps.argocd_backup.settings.BackupSettings`, read only when
    help is printed."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = super()._get_help_string(action) or ""
        if action.dest in SETTINGS and "%(default)s" in text:
            from steps.argocd_backup.settings import DEFAULTS

            text = text.replace("%(default)s", str(DEFAULTS[action.dest]))
        return text


def settings_of(args: argparse.Namespace):
    """The :class:`~steps.argocd_backup.settings.BackupSettings` the flags give (unset flags: its defaults)."""
    from steps.argocd_backup.settings import BackupSettings

    return BackupSettings.parse(**{n: getattr(args, n) for n in SETTINGS if getattr(args, n) is not None})


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "backup",
        help="back up Argo CD's Applications, ApplicationSets, projects, Secrets and ConfigMaps to S3",
        description="Export Argo CD's configuration — its namespace, plus the Applications and ApplicationSets "
        "of the namespaces argocd-cmd-params-cm enables — into one sanitised, gzip-compressed, "
        "server-side-encrypted archive at s3://BUCKET/PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ.yaml.gz (never "
        "overwriting), with an index beside it; then delete archives beyond the retention.",
        epilog=EXAMPLE,
        formatter_class=_Help,
    )
    parser.add_argument("--bucket", required=True, help="S3 bucket to write to")
    # Defaults are BackupSettings' (steps.argocd_backup.settings), filled in by `run` and shown by _Help, so
    # building the parser does not import pydantic (every `imagebump` invocation builds it).
    parser.add_argument("--prefix", help="key prefix (default: %(default)s)")
    parser.add_argument("--cluster", help="cluster name in the key (default: %(default)s)")
    parser.add_argument("--namespace", help="Argo CD's namespace (default: %(default)s)")
    parser.add_argument("--kms-key-id", help="KMS key for SSE-KMS (default: the bucket's default encryption)")
    parser.add_argument(
        "--keep", type=int, help="keep the newest N archives (0: no count rule; default: %(default)s)"
    )
    parser.add_argument(
        "--keep-days", type=int, help="keep archives newer than D days (0: no age rule; default: %(default)s)"
    )
    parser.add_argument(
        "--accept-shrink",
        action="store_true",
        help="Argo CD really holds far fewer objects than at the last healthy backup: do not mark this "
        "backup suspect (a suspect backup keeps retention from deleting the archives before it)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    parser.add_argument("--profile", default=None, help="AWS profile (default: the standard AWS environment)")
    parser.set_defaults(func=run)
    return parser


def s3_client(profile: str | None):
    """A boto3 S3 client for ``profile`` (honours AWS_ENDPOINT_URL / AWS_REGION like every client)."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    from steps.domain.errors import ConfigError

    try:
        return boto3.Session(profile_name=profile).client("s3")
    except ProfileNotFound:
        raise ConfigError(
            f"AWS profile {profile!r} not found in ~/.aws/config; pass an existing --profile"
        ) from None


def run(args: argparse.Namespace) -> int:
    from steps.argocd_backup import export as backup_export
    from steps.kube import client as kube_client

    settings = settings_of(args)  # bad input is refused before the cluster or S3 is reached
    api = kube_client.KubernetesApi.from_config(context=args.context)
    out = backup_export.export_backup(
        api=api, s3=s3_client(args.profile), settings=settings, accept_shrink=args.accept_shrink
    )
    print(f"wrote {out.url}")
    print(f"index {out.index_url}")
    print(f"sha256 {out.sha256}")
    print("counts " + ", ".join(f"{kind}={n}" for kind, n in out.counts.items()))
    if out.suspect:
        print(f"suspect {out.suspect_reason}")
    for url in out.deleted:
        print(f"deleted {url}")
    return 0
