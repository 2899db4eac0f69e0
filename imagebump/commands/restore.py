"""``imagebump restore --from s3://…|FILE [--apply] [--prune]``: make Argo CD equal to a backup.

Reads the archive (its sha256 checked against the index beside it, unless ``--no-verify``; a plain
``argocd admin export`` file is accepted as unverified) and the live Argo CD objects; a dry run by
default prints what would be created, replaced or left alone (Secret values as ``***``).
``--apply`` writes, object by object in a safe order; ``--prune`` deletes live objects the
archive does not hold. What it refuses, the write order and the exit codes: docs/backup-restore.md
and :mod:`steps.argocd_backup.restore`.
"""

from __future__ import annotations

import argparse

EXAMPLE = """\
examples:
  imagebump restore --from s3://acme-argocd-backups/argocd-backups/prod/2026/01/02/030405Z.yaml.gz
  imagebump restore --from ./030405Z.yaml.gz --namespace argocd-staging --apply
  imagebump restore --from s3://…/030405Z.yaml.gz --prune            # list what --apply would delete
  imagebump restore --from ./argocd-export.yaml --apply             # a plain `argocd admin export` file
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "restore",
        help="show (or with --apply, apply) what restoring a backup archive would change",
        description="Restore Argo CD's configuration from a backup archive made by `imagebump backup` or the "
        "backup-export step (or a plain `argocd admin export` file): each object is made equal to the "
        "archive. Dry run unless --apply.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="s3://BUCKET/KEY|FILE",
        help="the archive (.yaml.gz) in S3 or on disk",
    )
    parser.add_argument(
        "--apply", action="store_true", help="create and replace objects instead of a dry run"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="also delete live Argo CD objects the archive does not hold, of those the archive's "
        "producer selects (never argocd-secret or ConfigMaps; Applications and ApplicationSets lose "
        "their finalizers first); only listed unless --apply",
    )
    parser.add_argument(
        "--namespace",
        default=None,
        help="Argo CD's namespace to restore into (default: the one the backup was taken "
        "from); objects of other namespaces go back to their own",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    parser.add_argument("--profile", default=None, help="AWS profile for s3:// sources")
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="restore an archive that has no index (skips only the sha256 check)",
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from imagebump.commands.backup import s3_client
    from steps.argocd_backup import restore
    from steps.kube import client as kube_client

    s3 = s3_client(args.profile) if args.source.startswith("s3://") else None

    from steps.domain.terminal import for_terminal

    def progress(line: str) -> None:  # each write as it is done, before the next one is tried
        print(for_terminal(line, 4000), flush=True)  # object names come from the archive

    _, report = restore.restore(
        args.source,
        api_factory=lambda: kube_client.KubernetesApi.from_config(context=args.context),
        s3=s3,
        do_apply=args.apply,
        namespace=args.namespace,
        verify=not args.no_verify,
        prune=args.prune,
        progress=progress,
        on_outcome=_notify(args.source),  # issue 36: restore finished / stopped halfway
    )
    print(for_terminal(report, None, newlines=True))
    return 0


def _notify(source: str):
    """Send a restore's outcome to the configured destinations (``IMAGEBUMP_NOTIFY_*``); never raises."""
    import time

    from steps.notify.decide import Outcome
    from steps.notify.step import send_now

    event = f"restore-{time.time_ns()}"  # each run of the command is its own event
    return lambda kind, fields: send_now([Outcome(kind, event, source, fields)])
