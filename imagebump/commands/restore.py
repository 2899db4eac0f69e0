"""``imagebump restore --from s3://…|FILE [--apply] [--prune]``: make Argo CD equal to a backup.

Dry run by default: prints, object by object, what would be created, changed (with a diff against
the live object showing every difference, removed keys included; Secret values shown as ``***``)
or left alone, and the live Argo CD objects the archive does not hold. ``--apply`` creates what
is missing and replaces what differs (each object becomes equal to the archive, not a merge) in a
safe order (ConfigMaps and Secrets, AppProjects, ApplicationSets, Applications). ``--prune``
deletes the live Argo CD objects the archive does not hold — only those the archive's producer
would have taken (a plain ``argocd admin export``: upstream's selection; our archives: the
selection of the format their index names), never ``argocd-secret`` or a ConfigMap; Applications
and ApplicationSets lose their finalizers first, so nothing they made is deleted with them;
without ``--apply`` it only lists them. An archive whose producer is unknown (no index, or a
format newer than this imagebump) refuses ``--prune``.

Every namespace the restore writes into (Argo CD's, or ``--namespace``, and those of other
Applications) is read first: the dry run names the missing ones and ``--apply`` refuses before any
write (create them, or pass ``--namespace``).

The archive is checked before the cluster is contacted: its sha256 must match the index beside it
(``X.index.json`` for ``X.yaml.gz``, or ``X.yaml.gz.index.json``) — a missing index is refused
unless ``--no-verify`` — and it must be a readable gzip of valid YAML. A plain ``argocd admin
export`` file (not gzip, no index) is accepted as *unverified* and sanitised like our archives. A
refused archive applies nothing. ``--namespace`` moves Argo CD's own namespace only; Applications
and ApplicationSets of other namespaces go back to their own.

``--apply`` prints each write as it is done (``created …``, ``replaced …``, ``deleted …``), then
the report. A write that fails stops the restore with ``N of M writes done; re-run the same command
to finish``, the object and the API server's reason: every write makes one object equal to the
archive, so running the same command again does what is left.

Exit codes: 0 done (dry run or applied); 2 refused archive, bad input, missing namespace, --prune
of an archive whose producer is unknown, missing permission, or a write the API server refused
(4xx, such as an admission webhook's 422); 75 a transient failure (5xx, 429, a lost connection, a
timeout, an object that kept changing while it was replaced).
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
    )
    print(for_terminal(report, None, newlines=True))
    return 0
