"""``imagebump restore --from s3://…|FILE [--apply]``: read a backup back into Argo CD's namespace.

Dry run by default: prints, object by object, what would be created, changed (with a diff against
the live object; Secret values shown as ``***``) or left alone. ``--apply`` server-side-applies
in a safe order (ConfigMaps and Secrets, AppProjects, then ApplicationSets and Applications).

The archive is checked before the cluster is contacted: its sha256 must match the index beside it
(``X.index.json`` for ``X.yaml.gz``, or ``X.yaml.gz.index.json``) — a missing index is refused
unless ``--no-verify`` — and it must be a readable gzip of valid YAML. A refused archive applies
nothing. ``--namespace`` restores into another namespace (only ``metadata.namespace`` changes).

Exit codes: 0 done (dry run or applied); 2 refused archive, bad input or missing permission;
75 a transient failure.
"""

from __future__ import annotations

import argparse

EXAMPLE = """\
examples:
  imagebump restore --from s3://acme-argocd-backups/argocd-backups/prod/2026/01/02/030405Z.yaml.gz
  imagebump restore --from ./030405Z.yaml.gz --namespace argocd-staging --apply
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "restore",
        help="show (or with --apply, apply) what restoring a backup archive would change",
        description="Restore Argo CD's configuration from a backup archive made by `imagebump backup` or the "
        "backup-export step. Dry run unless --apply.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="source", required=True, metavar="s3://BUCKET/KEY|FILE",
                        help="the archive (.yaml.gz) in S3 or on disk")
    parser.add_argument("--apply", action="store_true", help="apply (server-side) instead of a dry run")
    parser.add_argument("--namespace", default=None,
                        help="namespace to restore into (default: the one the backup was taken from)")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    parser.add_argument("--profile", default=None, help="AWS profile for s3:// sources")
    parser.add_argument("--no-verify", action="store_true",
                        help="restore an archive that has no index (skips only the sha256 check)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from imagebump.commands.backup import s3_client
    from steps import kube, restore

    s3 = s3_client(args.profile) if args.source.startswith("s3://") else None
    _, report = restore.restore(
        args.source,
        api_factory=lambda: kube.KubernetesApi.from_config(context=args.context),
        s3=s3,
        do_apply=args.apply,
        namespace=args.namespace,
        verify=not args.no_verify,
    )
    print(report)
    return 0
