"""The report of a restore: one line per object, diffs indented, a summary line. Pure.

``imagebump restore`` prints it; :func:`steps.argocd_backup.restore.restore` returns it beside the plan. Imports
:mod:`steps.argocd_backup.archive` and the plan's types from :mod:`steps.argocd_backup.restore_plan`.
"""

from __future__ import annotations

from steps.argocd_backup import archive, object_diff
from steps.argocd_backup.restore_plan import CHANGE, CREATE, DELETE, EXTRA, UNCHANGED, Plan, terminating

_VERBS = {
    False: {
        CREATE: "would create",
        CHANGE: "would change",
        UNCHANGED: "unchanged",
        DELETE: "would delete",
        EXTRA: "not in archive",
    },
    True: {
        CREATE: "created",
        CHANGE: "changed",
        UNCHANGED: "unchanged",
        DELETE: "deleted",
        EXTRA: "not in archive",
    },
}


def render(result: Plan, *, applied: bool = False) -> str:
    """Human-readable report of a plan: one line per object, diffs indented, a summary line."""
    lines = [result.unverified] if result.unverified else []
    verbs = _VERBS[applied]
    for entry in result.entries:
        line = f"{verbs[entry.action]:>14}  {archive.show(entry.key)}"
        finalizers = ((entry.live or {}).get("metadata") or {}).get("finalizers")
        if entry.action == DELETE and entry.kind == "Application" and finalizers:
            line += f" (finalizers {', '.join(finalizers)} removed first: its resources stay)"
        elif entry.action == DELETE and entry.kind == "ApplicationSet":
            line += " (its Applications are orphaned, not deleted)"
        elif entry.action == EXTRA:
            line += " (kept; --prune deletes it)"
        elif entry.action == CREATE and terminating(entry.live):
            line += " (being deleted now: created again once it is gone)"
        elif entry.action == CHANGE and entry.live is not None:
            why = object_diff.immutable_change(entry.kind, entry.live, entry.obj)
            if why:
                line += f" ({why}: deleted, then created as archived)"
        lines.append(line)
        lines.extend(f"                {line}" for line in entry.diff)
    others = result.namespaces()[1:]
    where = f"in namespace {result.namespace}" + (f" (and {', '.join(others)})" if others else "")
    extra = result.count(EXTRA)
    if applied:
        parts = [
            f"{result.count(CREATE)} created",
            f"{result.count(CHANGE)} changed",
            f"{result.count(UNCHANGED)} unchanged",
        ]
        if result.prune:
            parts.append(f"{result.count(DELETE)} deleted")
        if extra:
            parts.append(f"{extra} not in the archive (kept)")
        summary = f"applied: {', '.join(parts)} {where}"
    else:
        parts = [
            f"{result.count(CREATE)} to create",
            f"{result.count(CHANGE)} to change",
            f"{result.count(UNCHANGED)} unchanged",
        ]
        if result.prune:
            parts.append(f"{result.count(DELETE)} to delete")
        if extra:
            parts.append(f"{extra} not in the archive (kept; pass --prune to delete)")
        summary = f"dry run: {', '.join(parts)} {where}; pass --apply to apply"
    lines.append(summary)
    return "\n".join(lines)
