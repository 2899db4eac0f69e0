"""The outcomes of a finished Workflow, read from its nodes as the exit handler sees them. Pure.

A Workflow's ``status.nodes`` (Argo's shape: a mapping of node id → ``{name, templateName, phase,
message, outputs: {parameters: [{name, value}]}}``; the local executor writes the same shape) is
all the exit handler needs: which targets ``resolve-image`` found, and under item ``i`` of the
``update-target`` fan-out what ``edit-kustomize``, ``commit-pr`` and ``verify-live`` did; for the
backup CronWorkflow, what ``backup-export`` wrote. Argo names an item's nodes
``wf[1].update-target(0:{…})[0].update…``, the local executor ``wf.update-target(0).update…``: both
carry ``.update-target(<i>`` (argo-workflows workflow/controller/steps.go ``expandStep``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from steps.notify.decide import Outcome

_ITEM = re.compile(r"\.update-target\((\d+)")
_ROLLBACK = re.compile(r"rollback ([0-9a-f]{7,40}) by (.+?) \(")
#: commit-pr's ``action`` → the outcome (``unchanged``/``branch-taken``: nothing to say).
ACTIONS = {"committed": "committed", "pr-created": "pr-opened", "pr-updated": "pr-updated"}
#: verify-live's ``result`` → the outcome. ``idle`` and ``not-verified`` go to GitHub only (they end
#: ``imagebump/live``'s ``pending``; :data:`steps.notify.decide.GITHUB_ONLY`).
LIVE = {
    "live": "live",
    "mismatch": "mismatch",
    "timeout": "timeout",
    "idle": "idle",
    "superseded": "not-verified",
    "no-application": "not-verified",
    "manual-sync": "not-verified",
    # verify-live left on without Argo CD (one machine): never proven either way, but pending ends
    "off": "not-verified",
}
FAILED = ("Failed", "Error")


def _outputs(node: Mapping[str, Any]) -> dict[str, str]:
    params = ((node.get("outputs") or {}).get("parameters")) or []
    return {str(p.get("name")): str(p.get("value", "")) for p in params if isinstance(p, dict)}


#: The most a Workflow's compressed node status may inflate to (the controller writes it; bounded
#: all the same: 64 times Argo's default MAX_WORKFLOW_SIZE of 1 MiB).
MAX_NODES_BYTES = 64 * 1024 * 1024


def nodes_of(workflow: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nodes of a Workflow object (``status.nodes``, a mapping or a list).

    A Workflow larger than the controller's ``MAX_WORKFLOW_SIZE`` (1 MiB by default) keeps its nodes
    in ``status.compressedNodes`` instead: base64 of the compressed JSON of ``status.nodes``
    (argo-workflows ``workflow/packer/packer.go`` ``compressWorkflow``, ``util/file/fileutil.go``
    ``CompressEncodeString``; gzip unless the controller's compression setting chose zstd or brotli).
    Those read as the nodes (gzip; :func:`unreadable_nodes` says why other forms cannot be)."""
    status = workflow.get("status") or {}
    nodes = status.get("nodes") or {}
    if not nodes and isinstance(status.get("compressedNodes"), str):
        nodes = _inflated(status["compressedNodes"]) or {}
    values: Iterable[Any] = nodes.values() if isinstance(nodes, dict) else nodes
    return [n for n in values if isinstance(n, dict)]


def _inflated(text: str) -> Any:
    """``status.compressedNodes`` as JSON, or None when it is not gzip or inflates beyond the bound."""
    import base64
    import binascii
    import zlib

    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if raw[:2] != b"\x1f\x8b":
        return None
    inflate = zlib.decompressobj(wbits=31)  # gzip
    try:
        data = inflate.decompress(raw, MAX_NODES_BYTES + 1)
    except zlib.error:
        return None
    if len(data) > MAX_NODES_BYTES:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def unreadable_nodes(workflow: Mapping[str, Any]) -> str:
    """Why the Workflow's nodes cannot be read ("" when they can): offloaded to Argo's database
    (``status.offloadNodeStatusVersion``: persistence with ``nodeStatusOffLoad``, for a Workflow too
    large even compressed, or always with ``ALWAYS_OFFLOAD_NODE_STATUS``;
    ``workflow/hydrator/hydrator.go``), or compressed other than with gzip."""
    status = workflow.get("status") or {}
    if not workflow or nodes_of(workflow) or status.get("nodes"):
        return ""
    if status.get("offloadNodeStatusVersion"):
        return (
            "its node status is offloaded to Argo's database (status.offloadNodeStatusVersion): the "
            "Workflow is too large even compressed (fewer targets per image: narrow the rules), or the "
            "workflow controller runs with ALWAYS_OFFLOAD_NODE_STATUS=true (unset it)"
        )
    if status.get("compressedNodes"):
        return (
            "its node status is compressed other than with gzip (status.compressedNodes); keep the "
            "workflow controller's compression at its default, gzip"
        )
    return ""


#: An attempt's node name ends in its number: ``NAME(0)``, ``NAME(1)``, … (Argo's retry children).
_ATTEMPT = re.compile(r"\((\d+)\)$")


def _final(nodes: list[dict[str, Any]], template: str) -> dict[str, Any] | None:
    """The node that holds ``template``'s final phase and outputs among ``nodes`` (one step's).

    Argo runs a retried template under a ``Retry`` node that carries its last attempt's phase and
    outputs (argo-workflows ``workflow/controller/operator.go``, ``processNodeRetries``); an earlier
    attempt failed and still has outputs (its parameters' defaults: the wait container saves them
    whatever the exit code). ``status.nodes`` is a map and comes sorted by node id, a hash of the
    name: the order says nothing of which attempt was last. So: the Retry node when there is one,
    else the attempt with the highest number (``NAME(N)``), else the last node of the template."""
    found = [n for n in nodes if n.get("templateName") == template]
    retry = [n for n in found if n.get("type") == "Retry"]
    if retry:
        return retry[-1]

    def attempt(pair: tuple[int, dict[str, Any]]) -> tuple[int, int]:
        m = _ATTEMPT.search(str(pair[1].get("name", "")))
        return (int(m.group(1)) if m else -1, pair[0])

    return max(enumerate(found), key=attempt)[1] if found else None


def _cause(nodes: list[dict[str, Any]], final: dict[str, Any]) -> str:
    """Why ``final`` (a step's final node) failed: its own message, unless it is a Retry node's
    generic one (:data:`_PASSED_ON`), then its last attempt's (``main: Error (exit code 2): …``, with
    the step's termination message)."""
    message = str(final.get("message", ""))
    if final.get("type") != "Retry" and not _PASSED_ON.match(message):
        return message
    template = final.get("templateName")
    attempts = [n for n in nodes if n.get("templateName") == template and n.get("type") != "Retry"]
    last = _final(attempts, str(template)) if attempts else None
    return str((last or {}).get("message") or message)


#: The messages Argo gives a node that only passes a failure on: a step group ("child 'ID' failed",
#: ``workflow/controller/steps.go``) and a Retry node out of attempts (``operator.go``).
#: A Retry node's own messages, which name no cause (``processNodeRetries``): the cause is its last
#: attempt's message.
_PASSED_ON = re.compile(
    r"^(child '[^']*' failed|No more retries left|retryStrategy\.expression evaluated to false"
    r"|Max duration limit exceeded|Backoff would exceed max duration limit|retry exceeded workflow deadline"
    r"|Stopped with strategy)"
)


def decode_failures(text: str) -> list[dict[str, Any]]:
    """``{{workflow.failures}}`` as the exit handler's parameter holds it: the list of failed nodes.

    Argo writes ``strconv.Quote`` of the JSON list (``operator.go``; argo-workflows
    docs/variable-flow/variables.md: "consumers must JSON-decode twice"), and the quoted ``"null"``
    when nothing failed. Go's quoting may escape as ``\\xNN``, which JSON lacks: such a string is read
    as the (safe) Python string literal it also is. Anything else is no failures."""
    import ast

    value: Any = text
    for _ in range(3):
        if not isinstance(value, str):
            break
        raw = value.strip()
        if not raw:
            return []
        try:
            value = json.loads(raw)
        except ValueError:
            if not (len(raw) >= 2 and raw[0] == raw[-1] == '"'):
                return []
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                return []
    return [f for f in value if isinstance(f, dict)] if isinstance(value, list) else []


def telling_failure(failures: Any) -> dict[str, Any]:
    """The entry of ``{{workflow.failures}}`` that says what failed: a step's own failure (not a
    group or a Retry node passing one on), the last to finish, its highest attempt.

    Argo lists every failed node, groups and retried attempts included, in a Go map's iteration
    order, which is random (``operator.go``: ``for _, node := range woc.wf.Status.Nodes``): the
    first entry is any of them. ``finishedAt`` is RFC 3339 in whole seconds, so ties are broken by
    the attempt's number (``NAME(N)``)."""
    entries = [f for f in failures if isinstance(f, dict)] if isinstance(failures, list) else []

    def rank(pair: tuple[int, dict[str, Any]]) -> tuple[bool, str, int, int]:
        index, entry = pair
        attempt = _ATTEMPT.search(str(entry.get("displayName", "")))
        return (
            not _PASSED_ON.match(str(entry.get("message", ""))),
            str(entry.get("finishedAt") or ""),
            int(attempt.group(1)) if attempt else -1,
            -index,
        )

    return max(enumerate(entries), key=rank)[1] if entries else {}


def image_outcomes(
    nodes: list[dict[str, Any]], event_id: str, workflow_link: str = "", image: str = ""
) -> list[Outcome]:
    """Each target's outcomes: its commit or PR, held/pinned, live/mismatch/timeout, or failed."""
    resolve = _final(nodes, "resolve-image")
    try:
        targets = json.loads(_outputs(resolve).get("targets") or "[]") if resolve else []
    except ValueError:
        targets = []
    if not isinstance(targets, list):
        targets = []
    per_item: dict[int, list[dict[str, Any]]] = {}
    for node in nodes:
        m = _ITEM.search(str(node.get("name", "")))
        if m:
            per_item.setdefault(int(m.group(1)), []).append(node)
    image = image or resolved_image(_outputs(resolve).get("image", "") if resolve else "")
    found: list[Outcome] = []
    for i, target in enumerate(targets):
        if not isinstance(target, dict):
            continue
        key = f"{target.get('repo_url', '')}/{target.get('path', '')}"
        notify = tuple(target.get("notify") or ())
        mine = per_item.get(i, [])
        base = {
            "image": image or str(target.get("image", "")),
            "overlay": str(target.get("path", "")),
            "repo": str(target.get("repo_url", "")),  # GitHub as a destination: which repository
        }

        def add(kind: str, fields: dict[str, str], key: str = key, notify: tuple[str, ...] = notify) -> None:
            found.append(Outcome(kind, event_id, key, fields, notify))

        edit = _final(mine, "edit-kustomize")
        commit = _final(mine, "commit-pr")
        live = _final(mine, "verify-live")
        if any(n is not None and n.get("phase") in FAILED for n in (edit, commit)):
            bad = edit if edit is not None and edit.get("phase") in FAILED else commit
            error = _cause(mine, bad or {})[:300]
            add("failed", {**base, "workflow_link": workflow_link, "error": error})
            continue
        if edit is not None and _outputs(edit).get("decision") in ("held", "pinned"):
            out = _outputs(edit)
            reason = out.get("reason", "")
            who = _ROLLBACK.search(reason)  # steps.domain.intent.Rollback.describe: who, which commit
            by = {"by": who.group(2), "commit": who.group(1)} if who else {}
            add(out["decision"], {**base, **by, "reason": reason, **_proposal(target, out)})
        sha = _outputs(commit).get("commit-sha", "") if commit is not None else ""
        if commit is not None and commit.get("phase") == "Succeeded":
            out = _outputs(commit)
            if out.get("action") in ACTIONS:
                verifying = live is not None and live.get("phase") != "Skipped"
                number = out.get("pr-number", "0")
                add(
                    ACTIONS[out["action"]],
                    {
                        **base,
                        "link": out.get("pr-url") or commit_link(str(target.get("repo_url", "")), sha),
                        "commit": sha,
                        "pr": number if number not in ("", "0") else "",
                        "verifying": "true" if verifying else "",
                    },
                )
        if live is not None and live.get("phase") != "Skipped":
            out = _outputs(live)
            kind = LIVE.get(out.get("result", ""))
            if kind:
                apps = _applications(out.get("applications", ""))
                app = next((a for a in apps if a.get("state") == kind), apps[0] if apps else {})
                add(
                    kind,
                    {
                        **base,
                        "commit": sha,
                        "seconds": out.get("seconds-push-to-healthy", ""),
                        "application": f"{app.get('namespace', '')}/{app.get('name', '')}" if app else "",
                        "revision": str(app.get("revision", "")),
                        "git_image": out.get("image", ""),
                        "running_image": ", ".join(app.get("images") or []),
                        "message": out.get("message", "")[:300],
                        "result": out.get("result", ""),
                    },
                )
    return found


def commit_link(repo_url: str, sha: str) -> str:
    """A commit's page (``https://HOST/OWNER/REPO/commit/SHA``, GitHub's path) for an https
    repository; the bare SHA otherwise (a local remote has no page)."""
    from steps.domain.errors import ConfigError
    from steps.domain.repo_url import parse_repo_url

    if not sha or not repo_url.lower().startswith("https://"):
        return sha
    try:
        host, owner, repo = parse_repo_url(repo_url)
    except ConfigError:
        return sha
    return f"https://{host}/{owner}/{repo}/commit/{sha}"


def _proposal(target: dict[str, Any], edit_outputs: dict[str, str]) -> dict[str, str]:
    """A ``mode: pr`` target's proposal branch and base: where GitHub finds imagebump's open PR."""
    if target.get("mode") != "pr":
        return {}
    from steps.domain.branches import branch_name
    from steps.domain.models import Target

    try:
        branch = branch_name(Target.model_validate(target))
        base = str(json.loads(edit_outputs.get("plan") or "{}").get("base_branch") or "")
    except ValueError:  # pydantic's ValidationError is one
        return {}
    return {"branch": branch, "base": base or str(target.get("base_branch") or "")}


def resolved_image(text: str) -> str:
    """resolve-image's ``image`` output as a reference (the output as it is when not an image)."""
    from steps.domain.models import Image

    if not text:
        return ""
    try:
        return Image.model_validate_json(text).reference
    except ValueError:
        return text


def _applications(text: str) -> list[dict[str, Any]]:
    try:
        apps = json.loads(text or "[]")
    except ValueError:
        return []
    return [a for a in apps if isinstance(a, dict)] if isinstance(apps, list) else []


def backup_outcomes(nodes: list[dict[str, Any]], event_id: str, target: str = "") -> list[Outcome]:
    """The backup run's alarm when ``backup-export`` wrote a suspect (shrunken) archive."""
    export = _final(nodes, "backup-export")
    if export is None or export.get("phase") != "Succeeded":
        return []
    out = _outputs(export)
    if out.get("suspect") != "true":
        return []
    try:
        counts = json.loads(out.get("counts") or "{}")
        objects = str(sum(int(v) for v in counts.values())) if isinstance(counts, dict) else ""
    except (ValueError, TypeError):
        objects = ""
    previous = re.search(r"of the (\d+) in|, (\d+) before\)", out.get("suspect-reason", ""))
    fields = {
        "archive": out.get("url", ""),
        "objects": objects,
        "previous_objects": next((g for g in previous.groups() if g), "") if previous else "",
        "reason": out.get("suspect-reason", ""),
    }
    return [Outcome("backup-suspect", event_id, target or out.get("url", ""), fields)]
