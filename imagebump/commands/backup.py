"""``imagebump backup --bucket B``: back up Argo CD's configuration to S3 from a workstation.

Runs the same code as the ``backup-export`` step (:func:`steps.backup_export.export_backup`), with
the Kubernetes API reached through the kubeconfig (``--context``, else the current context; the
in-cluster service account when run in a pod) and S3 through boto3 (``--profile``, else the
standard AWS environment). Prints the archive URL, its sha256, counts per kind and any archives
retention deleted; never a Secret value.

Exit codes: 0 written; 2 bad input or a permission/bucket/KMS problem (the message names it);
75 a transient failure (API server or S3 unavailable).
"""

from __future__ import annotations

import argparse

EXAMPLE = """\
examples:
  imagebump backup --bucket acme-argocd-backups --cluster prod-eu --context prod-eu
  imagebump backup --bucket acme-argocd-backups --kms-key-id alias/argocd-backup --keep 14 --keep-days 30
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "backup",
        help="back up Argo CD's Applications, ApplicationSets, projects, Secrets and ConfigMaps to S3",
        description="Export Argo CD's configuration — its namespace, plus the Applications and ApplicationSets "
        "of the namespaces argocd-cmd-params-cm enables — into one sanitised, gzip-compressed, "
        "server-side-encrypted archive at s3://BUCKET/PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ.yaml.gz (never "
        "overwriting), with an index beside it; then delete archives beyond the retention.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bucket", required=True, help="S3 bucket to write to")
    parser.add_argument("--prefix", default="argocd-backups", help="key prefix (default: %(default)s)")
    parser.add_argument(
        "--cluster", default="in-cluster", help="cluster name in the key (default: %(default)s)"
    )
    parser.add_argument("--namespace", default="argocd", help="Argo CD's namespace (default: %(default)s)")
    parser.add_argument("--kms-key-id", default="", help="KMS key for SSE-KMS (default: SSE-S3, AES256)")
    parser.add_argument("--keep", type=int, default=30, help="keep the newest N archives (0: no count rule)")
    parser.add_argument(
        "--keep-days", type=int, default=0, help="keep archives newer than D days (0: no age rule)"
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    parser.add_argument("--profile", default=None, help="AWS profile (default: the standard AWS environment)")
    parser.set_defaults(func=run)
    return parser


def s3_client(profile: str | None):
    """A boto3 S3 client for ``profile`` (honours AWS_ENDPOINT_URL / AWS_REGION like every client)."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    from steps.errors import ConfigError

    try:
        return boto3.Session(profile_name=profile).client("s3")
    except ProfileNotFound:
        raise ConfigError(
            f"AWS profile {profile!r} not found in ~/.aws/config; pass an existing --profile"
        ) from None


def run(args: argparse.Namespace) -> int:
    from steps import backup_export, kube

    api = kube.KubernetesApi.from_config(context=args.context)
    out = backup_export.export_backup(
        api=api,
        s3=s3_client(args.profile),
        bucket=args.bucket,
        prefix=args.prefix,
        cluster=args.cluster,
        namespace=args.namespace,
        kms_key_id=args.kms_key_id,
        keep=args.keep,
        keep_days=args.keep_days,
    )
    print(f"wrote {out.url}")
    print(f"index {out.index_url}")
    print(f"sha256 {out.sha256}")
    print("counts " + ", ".join(f"{kind}={n}" for kind, n in out.counts.items()))
    for url in out.deleted:
        print(f"deleted {url}")
    return 0
