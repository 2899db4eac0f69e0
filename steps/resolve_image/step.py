"""resolve-image (the step's I/O and ``run``): an ECR push event (or a manual image reference) → the targets to update.

Reads: the ``event`` parameter (the SQS body: the raw EventBridge event) or the ``image``
parameter (``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]``) — exactly one;
the rules file at ``$IMAGEBUMP_RULES_FILE`` (default ``/etc/imagebump/rules/rules.yaml``); ECR
(digest, push time, and the account when the event lacks it). No Git access.

Writes: the output parameters ``image``, ``targets`` (the JSON list Argo fans out over with
``withParam``), ``skipped``, ``reason``, ``event-id``, and ``gated``: the targets left to the
promotion gate (``gate: wait``), whose decision for this push is ``waiting``.

Skips (empty ``targets`` and a ``reason``, exit 0): an event that is not a successful push; an
image ECR no longer has; a tag that has moved to another digest since the push (a newer event
handles it); an image no rule matches. Bad input (both or neither parameter, a malformed event
or reference, a bad rules file) is a ConfigError; a manual reference to an image ECR does not
have is a ConfigError too.

Shape: gather (parse the input, ask ECR) → :func:`steps.resolve_image.decide.decide`, the pure
core (what ECR said and the rules → the targets, or a skip) → act (the outputs).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
from typing import Any

from steps.domain.contract import Contract
from steps.domain.errors import ConfigError
from steps.domain.models import Image
from steps.resolve_image.decide import GateWaiting, ResolveImageOutput, decide
from steps.rules import RuleSet, load_rules_file
from steps.runtime.harness import step_entry
from steps.runtime.settings import rules_file

log = logging.getLogger(__name__)
#: The name in this step's log records (its module is ``step``; the template is resolve-image).
STEP_NAME = "resolve-image"

#: Modules this step imports only when it runs (a pod that is refused early never pays for them).
#: A local executor that forks steps from a warm interpreter imports them ahead (workflows.local.forkserver_server).
LAZY_IMPORTS = (
    "steps.aws.ecr",
    "steps.domain.events",
    "steps.rules",
    "yaml",
    "steps.aws.ecr_http",  # the lean client (steps.aws.ecr.make_client), and what it imports:
    "http.client",
    # botocore's client, when the lean one cannot answer as it would (steps.aws.ecr_http.route):
    # imported ahead too, so a forked step that falls back is as quick as before
    "botocore.session",
    "botocore.config",
    "botocore.exceptions",
    "encodings.idna",  # the ECR call's socket: CPython encodes every host name with this codec
    "encodings.utf_8_sig",  # the rules file is read with it (a BOM an editor left is dropped)
)


__all__ = [
    "GateWaiting",
    "ResolveImageInput",
    "ResolveImageOutput",
    "resolve",
    "run",
]


class ResolveImageInput(Contract, frozen=True, kw_only=True):
    """The step's input: exactly one of an ECR push event (the SQS body) and an image reference."""

    event: str = ""
    image: str = ""

    @classmethod
    def of(cls, event: str = "", image: str = "") -> "ResolveImageInput":
        """Checked before any I/O. Raises ConfigError unless exactly one is given."""
        if bool(event.strip()) == bool(image.strip()):
            raise ConfigError(
                "give exactly one of the parameters 'event' (an ECR push event) and 'image' "
                f"(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG); got {'both' if event.strip() else 'neither'}"
            )
        return cls(event=event, image=image)

    @property
    def manual(self) -> bool:
        return bool(self.image.strip())


def resolve(*, event: str = "", image: str = "", rules: RuleSet, client: Any = None) -> ResolveImageOutput:
    """Gather → decide: parse the input, ask ECR, then :func:`~steps.resolve_image.decide.decide`. ``client``: an ECR client or None.

    Raises:
        ConfigError: bad input (see the module docstring).
        TransientError: ECR failed for now.
    """
    from steps.aws import ecr
    from steps.domain.events import Skip, parse_event, parse_image_reference

    given = ResolveImageInput.of(event=event, image=image)
    parsed = parse_image_reference(image) if given.manual else parse_event(event)
    if isinstance(parsed, Skip):
        return ResolveImageOutput(reason=parsed.reason, event_id=parsed.event_id or "")
    img: Image = parsed
    client = client or ecr.make_client(img.region)
    found = ecr.describe_image(
        img.repository,
        region=img.region,
        tag=img.tag or None,
        digest=None if img.tag else img.digest,
        registry_id=img.account or None,  # none given: the caller's own registry, as ECR defaults
        client=client,
    )
    # An event without its account (moto's EventBridge omits it): the image's own description
    # names its registry; only an image ECR no longer has needs a second call to learn it.
    account = img.account or (found.registry_id if found else "")
    account = account or ecr.repository_account(img.repository, region=img.region, client=client)
    part_of = None
    if not img.tag and not given.manual and found is not None and not found.subject:  # part of an index?
        part_of = ecr.index_listing(
            img.repository, found.digest, near=found.pushed_at, registry_id=account, client=client
        )
    return decide(img, manual=given.manual, account=account, found=found, rules=rules, part_of=part_of)


@step_entry
def run(event: str = "", image: str = "") -> ResolveImageOutput:
    """Resolve an ECR push event (``event``) or an image reference (``image``) into targets."""
    ResolveImageInput.of(event=event, image=image)  # before any I/O (the rules file, ECR)
    from steps.runtime.timing import timed

    with timed("rules"):
        rules = load_rules_file(rules_file())
    out = resolve(event=event, image=image, rules=rules)
    summary = out.reason or f"{len(out.targets)} target(s): " + ", ".join(
        f"{t.repo_url}/{t.path}" for t in out.targets
    )
    log.info("%s", summary)
    return out
