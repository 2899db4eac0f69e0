"""resolve-image's pure core: what ECR said about the pushed image, and the rules → the targets.

:func:`decide` reads nothing and writes nothing: :mod:`steps.resolve_image.step` gathers (the
event or the reference, ECR's description of the image, the rules file) and acts (the outputs).
Its result is the step's output, :class:`ResolveImageOutput`: the targets, the rules that refused
the image (``skipped``), the targets left to the promotion gate (``gated``), or a skip's reason.
"""

# No `from __future__ import annotations`: the step's output model is read by Hera's runner.
from typing import TYPE_CHECKING, Any

from msgspec import field

from steps.domain.contract import Contract
from steps.domain.errors import ConfigError
from steps.domain.models import Image, Target, image_ref
from steps.rules import RuleSet, SkippedRule

if TYPE_CHECKING:
    from steps.aws.ecr import EcrImage


class GateWaiting(Contract, kw_only=True):
    """A target this push left to the promotion gate (``promoteAfter`` with ``gate: wait``): its
    decision for the push is ``waiting`` (the decision metric counts it, as it counts
    edit-kustomize's decision of an ungated target)."""

    decision: str = "waiting"
    env: str = ""
    rule: int
    waiting_on: str


class ResolveImageOutput(Contract, kw_only=True):
    image: Image | None = None
    targets: list[Target] = field(default_factory=list)
    skipped: list[SkippedRule] = field(default_factory=list)
    reason: str = ""
    event_id: str = ""
    gated: list[GateWaiting] = field(default_factory=list)


def decide(
    img: Image,
    *,
    manual: bool,
    account: str,
    found: "EcrImage | None",
    rules: RuleSet,
    part_of: "EcrImage | None" = None,
) -> ResolveImageOutput:
    """The pure core: what ECR said about the pushed image (``found``, None when ECR does not
    have it) → the targets, or a skip with its reason (a ConfigError for a manual reference).

    ``part_of``: for a push without a tag, the tagged image index that lists the pushed manifest
    (one platform's manifest or an attestation of a multi-platform push): the index's own push
    updates the overlays, so this one is skipped; so is an artifact about another image (a
    signature, an SBOM: ECR's ``subjectManifestDigest``).
    """
    event_id = img.event_id or ""
    update: dict[str, Any] = {} if account == img.account else {"account": account}

    def skip(reason: str) -> ResolveImageOutput:
        if manual:
            raise ConfigError(reason)
        return ResolveImageOutput(image=img.model_copy(update=update), reason=reason, event_id=event_id)

    if img.tag:
        if found is None:
            where = f"image {img.repository}:{img.tag} is not in ECR (registry {account}, {img.region})"
            return skip(f"{where}: check the tag" if manual else f"{where} any more: deleted since the push?")
        if img.digest and found.digest != img.digest:
            if manual:
                raise ConfigError(
                    f"tag {img.tag} of {img.repository} points to {found.digest}, not {img.digest}: "
                    "give the tag alone, or the digest it has now"
                )
            return skip(
                f"tag {img.tag} moved from {img.digest} to {found.digest} since the push; "
                "a newer event handles it"
            )
    elif found is None:
        where = (
            f"image {image_ref(None, img.digest, name=img.repository)} is not in ECR "
            f"(registry {account}, {img.region})"
        )
        return skip(f"{where}: check the digest" if manual else f"{where} any more: deleted since the push?")
    elif found.subject:
        return skip(
            f"{image_ref(None, found.digest, name=img.repository)} is an artifact about "
            f"{found.subject} (a signature, SBOM or attestation), not an image to deploy"
        )
    elif part_of is not None:
        return skip(
            f"{image_ref(None, found.digest, name=img.repository)} is one manifest of the image index "
            f"{image_ref(part_of.tags[0] if part_of.tags else None, part_of.digest, name=img.repository)} "
            "(a platform or attestation of a multi-platform push): the index's push updates the overlays"
        )
    update["digest"] = found.digest
    if found.pushed_at is not None:
        update["pushed_at"] = found.pushed_at
    # model_copy does not validate: re-validate so a bad value from ECR cannot slip through.
    resolved = Image.model_validate(img.model_copy(update=update).model_dump())
    match = rules.match(resolved)
    waits = [t for t in match.targets if t.settings.promote_after is not None and t.settings.gate == "wait"]
    if waits:  # issue 35: a gated target gets no commit or PR now; the gate promotes it after the soak
        match.targets = [
            t
            for t in match.targets
            if not (t.settings.promote_after is not None and t.settings.gate == "wait")
        ]
        match.skipped += [
            SkippedRule(
                rule=t.rule,
                reason=f"gate: wait: promoteAfter {t.settings.promote_after.env} ({t.settings.promote_after.soak_seconds}s soak); "
                "the gate promotes it after the soak",
            )
            for t in waits
            if t.settings.promote_after is not None
        ]
    gated = [
        GateWaiting(env=t.env or "", rule=t.rule, waiting_on=t.settings.promote_after.env)
        for t in waits
        if t.settings.promote_after is not None
    ]
    reason = ""
    if not match.targets:
        reason = f"no rule yields a target for {resolved.reference}" + (
            f" ({len(match.skipped)} rule(s) refused it; see skipped)"
            if match.skipped
            else " (no rule matches its repository)"
        )
    return ResolveImageOutput(
        image=resolved,
        targets=match.targets,
        skipped=match.skipped,
        reason=reason,
        event_id=event_id,
        gated=gated,
    )
