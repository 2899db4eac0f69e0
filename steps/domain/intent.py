"""Intent: what people decided stays decided — imagebump's trailer, pins, hold markers, rollbacks.

Pure: no git, no ECR, no clock. The steps gather the facts (the entry, its ``# imagebump:hold``
marker, the last commit that changed the entry's image, ECR push times) and ask here:

- :func:`trailer` / :func:`by_imagebump`: every commit imagebump makes ends with the git trailer
  ``Imagebump-Image: REPO:TAG@DIGEST`` whatever ``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` says; a
  commit without it in its final trailer block (:func:`trailer_block`, git's rules) was made by
  someone else, whatever its body quotes.
- :func:`history_trailer` / :func:`history_mark`: imagebump's commit may also say, in the trailer
  ``Imagebump-History: N PARENT PATH``, that when it was made on ``PARENT`` the last ``N`` commits
  that touched ``PATH`` were all imagebump's (its rollback check's fast path held there), so a later
  read can stop at it instead of walking those ``N`` again. Believed only on a commit whose parent
  is ``PARENT`` (a squash, rebase or cherry-pick that carries the line elsewhere says nothing).
- :func:`pinned`: an entry whose ``newName`` names a repository other than the pushed one is never
  changed by an event or a reconcile run (writing the pushed tag would render an image nobody pushed).
- :func:`marker_hold`: ``# imagebump:hold [reason]`` on an entry holds it until the comment goes.
- :func:`rollback`: a commit that changed the entry's image, made by someone else, to an image
  older by the rule's ``order`` (``order: none``: any change) — a rollback;
  :func:`standing_rollbacks` judges EVERY change of the entry's history read (not only the last):
  a rollback stands until a person moves the entry forward, or imagebump writes the rolled-back
  image or a newer one by the order (an image that lifted it); a hotfix older than the rolled-back
  image that imagebump lands in between lifts nothing.
  :func:`held_by_standing` says whether one of them holds against the image that would be written:
  only an image pushed after the rollback commit passes (the team shipped a fix), and with
  ``order: semver`` never one of the rolled-back image's version.

Held and pinned are terminal outcomes (decision / state ``held``, ``pinned``), never errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from steps.domain.models import ImagesEntry, Order, entry_ref, image_ref, same_entry
from steps.domain.version_order import compare_semver, parse_semver

#: The git trailer imagebump appends to every commit message (and pull request body) it writes.
TRAILER_KEY = "Imagebump-Image"
#: The trailer that records how far back imagebump's commit found only imagebump's commits.
HISTORY_KEY = "Imagebump-History"
#: The comment that holds an images entry: ``# imagebump:hold`` or ``# imagebump:hold REASON``.
HOLD_MARKER = "imagebump:hold"
#: How many commits that touched the kustomization are read, newest first, to find a rollback.
HISTORY_LIMIT = 20
#: The most characters of a marker's reason a report repeats (outputs stay small).
MARKER_REASON_LIMIT = 200

_TRAILER_RE = re.compile(rf"{TRAILER_KEY}[ \t]*:[ \t]*(\S+)[ \t]*$", re.IGNORECASE)
_HISTORY_RE = re.compile(
    rf"{HISTORY_KEY}[ \t]*:[ \t]*([0-9]{{1,4}}) ([0-9a-f]{{40}}|[0-9a-f]{{64}}) (.+?)[ \t]*$", re.IGNORECASE
)
#: A trailer line as git reads one (trailer.c ``find_separator``): a token of letters, digits and
#: ``-``, optional blanks, then ``:``.
_TRAILER_LINE = re.compile(r"[A-Za-z0-9-]+[ \t]*:")
_CO_AUTHOR = re.compile(r"Co-authored-by[ \t]*:", re.IGNORECASE)
#: Lines git itself writes into a trailer block (trailer.c ``git_generated_prefixes``).
_GIT_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")


def trailer_block(message: str) -> list[str]:
    """The lines of ``message``'s trailer block as git finds it (``git interpret-trailers --parse``,
    trailer.c ``find_trailer_block_start``): its last paragraph, when that is not the title (the
    first paragraph never is one) and every line in it is ``Token: value`` or a continuation (a
    line starting with a blank), or git wrote a line of it (``Signed-off-by: ``, ``(cherry picked
    from commit``) and at least a quarter of its lines are trailers. [] when it has none.

    A line that only looks like a trailer elsewhere — a quoted commit in the body, a pasted log, a
    squash's listing before the last paragraph — is not one.
    """
    lines = [line.rstrip("\r") for line in message.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    if start == 0:  # one paragraph: the title, never trailers
        return []
    block = lines[start:]
    trailers = others = continuations = 0
    recognised = False
    for line in reversed(block):  # as git counts: a continuation belongs to the line above it
        if line.startswith("#"):
            others, continuations = others + continuations, 0
        elif line.startswith(_GIT_PREFIXES):
            trailers, continuations, recognised = trailers + 1, 0, True
        elif _TRAILER_LINE.match(line):
            trailers, continuations = trailers + 1, 0
        elif line[:1].isspace():
            continuations += 1
        else:
            others, continuations = others + 1 + continuations, 0
    others += continuations
    if trailers and (not others or (recognised and trailers * 3 >= others)):
        return block
    return []


def trailer(image: str, tag: str | None, digest: str | None) -> str:
    """``Imagebump-Image: REPO:TAG@DIGEST`` for the image a commit writes."""
    return f"{TRAILER_KEY}: {image_ref(tag, digest, name=image)}"


def by_imagebump(message: str) -> bool:
    """Was the commit with this message made by imagebump: does its final trailer block
    (:func:`trailer_block`, git's rules) carry ``Imagebump-Image``? The line quoted anywhere else
    (a person's message citing imagebump's commit, ``commit -c``, a squash listing) does not count.
    """
    return bool(trailer_values(message))


def trailer_values(message: str) -> list[str]:
    """The ``Imagebump-Image`` values of ``message``'s final trailer block (:func:`trailer_block`)."""
    if TRAILER_KEY.lower() not in message.lower():
        return []
    return [m.group(1) for line in _own_block(message) if (m := _TRAILER_RE.match(line))]


def _own_block(message: str) -> list[str]:
    """:func:`trailer_block`, looking past trailing paragraphs of ``Co-authored-by:`` lines alone:
    GitHub appends one to a squash merge's message (imagebump's message, trailer last, then the
    co-authors), which git then reads as the only trailer block."""
    while True:
        block = trailer_block(message)
        if not block or not all(_CO_AUTHOR.match(line) for line in block):
            return block
        message = message.rstrip("\r\n")
        message = message[: len(message) - len("\n".join(block))].rstrip("\r\n")


def with_trailer(message: str, line: str) -> str:
    """``message`` ending with the trailer ``line`` (a blank line before it; not twice)."""
    if by_imagebump(message):
        return message if message.endswith("\n") else message + "\n"
    return message.rstrip("\n") + "\n\n" + line + "\n"


def history_trailer(count: int, parent: str, path: str) -> str:
    """``Imagebump-History: COUNT PARENT PATH``: made on ``parent``, the last ``count`` commits that
    touched ``path`` were imagebump's (or the file began among them). "" when it cannot be said on
    one line (a path with a line break or edge whitespace, no parent, no count)."""
    if count < 1 or not parent or not path or path != path.strip() or any(c in path for c in "\r\n"):
        return ""
    return f"{HISTORY_KEY}: {count} {parent} {path}"


def history_mark(message: str, parent: str, path: str) -> int:
    """How many commits before this one that touched ``path`` its message says were imagebump's
    (:func:`history_trailer`), believed only when said for ``parent`` — the commit's own first and
    only parent; 0 when it says nothing for that parent and path."""
    if not parent or HISTORY_KEY not in message:
        return 0
    found = (_HISTORY_RE.match(line) for line in _own_block(message))
    return max(
        (int(m[1]) for m in found if m is not None and m[2] == parent and m[3] == path),
        default=0,
    )


def with_history(message: str, line: str) -> str:
    """``message`` with the :func:`history_trailer` ``line`` after its last line ("" adds nothing)."""
    if not line:
        return message
    return message.rstrip("\n") + "\n" + line + "\n"


def pinned(entry: ImagesEntry, image: str) -> str | None:
    """Why ``entry`` is pinned against the pushed repository ``image`` (None: it is not).

    Pinned: its ``newName`` names another repository (a disaster-recovery copy in another region, a
    hotfix repository). Writing the pushed tag there would render ``newName:TAG``, an image nobody
    pushed; so nothing is written, not even the tag alone.
    """
    new_name = (entry.newName or "").strip()
    if not new_name or _repository(new_name) == _repository(image):
        return None
    renders = image_ref(entry.newTag, entry.digest, name=new_name, short=True, mark="…")
    return (
        f"{entry.name} is pinned to another repository: it renders {renders}, not {image}; "
        "imagebump never rewrites a pinned entry (set newName to the pushed repository to follow it)"
    )


def _repository(name: str) -> str:
    """A repository name as compared: no trailing slash, the registry host lowercased."""
    name = name.strip().rstrip("/")
    host, slash, rest = name.partition("/")
    return f"{host.lower()}{slash}{rest}"


def marker_hold(marker: str | None) -> str | None:
    """The held reason for an entry whose hold marker says ``marker`` (None: no marker)."""
    if marker is None:
        return None
    why = marker.strip()
    why = why if len(why) <= MARKER_REASON_LIMIT else why[:MARKER_REASON_LIMIT] + "…"
    return (
        f"held by '# {HOLD_MARKER}{' ' + why if why else ''}' on the entry; remove the comment to release it"
    )


@dataclass(frozen=True)
class ImageChange:
    """One commit that changed an entry's image (``before`` → ``after``), as git tells it."""

    commit: str
    author: str
    committed_at: datetime
    message: str
    before: ImagesEntry
    after: ImagesEntry
    #: Why a commit without the trailer is imagebump's all the same ("" when it is not): its pull
    #: request's head carries the trailer for the image it set (a squash merge with the title only).
    via_pull_request: str = ""

    @property
    def by_imagebump(self) -> bool:
        return bool(self.via_pull_request) or by_imagebump(self.message)

    def describe(self) -> str:
        """``rollback abc1234 by Ann <ann@x> (1.5.0 → 1.4.1, 2026-12-03T10:00:00Z)``."""
        when = _utc(self.committed_at).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"rollback {self.commit[:7]} by {self.author} "
            f"({entry_ref(self.before)} → {entry_ref(self.after)}, committed {when})"
        )


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def changed_image(before: ImagesEntry | None, after: ImagesEntry | None) -> bool:
    """Did the entry's image (newName, tag, digest) change between two versions of the file?"""
    if before is None or after is None:
        return False
    return not same_entry(before, after)


#: ECR's push time of an entry's image (None: unknown, or not asked for this order).
PushTimeOf = Callable[[ImagesEntry], "datetime | None"]


def older(before: ImagesEntry, after: ImagesEntry, order: Order, pushed_at: PushTimeOf) -> bool:
    """Is ``after`` older than ``before`` by the rule's ``order``? (``none``: any change counts)

    ``semver``: by version precedence (a tag that is not a version is no evidence).
    ``push-time``: by ECR push time; the same digest is the same image; an unknown time is no evidence.
    """
    if order == "none":
        return True
    if before.digest and before.digest == after.digest:
        return False
    if order == "semver":
        a, b = parse_semver(after.newTag), parse_semver(before.newTag)
        return a is not None and b is not None and compare_semver(a, b) < 0
    a_at, b_at = pushed_at(after), pushed_at(before)
    return a_at is not None and b_at is not None and _utc(a_at) < _utc(b_at)


def rollback(change: ImageChange | None, order: Order, pushed_at: PushTimeOf) -> ImageChange | None:
    """The rollback that ``change`` — the last commit that changed the entry's image — is, or None.

    A rollback: made by someone else than imagebump (no trailer), to an image older by ``order``.
    """
    if change is None or change.by_imagebump:
        return None
    return change if older(change.before, change.after, order, pushed_at) else None


def lifts(later: ImageChange, found: ImageChange, order: Order, pushed_at: PushTimeOf) -> bool:
    """Does the ``later`` change lift the rollback ``found``?

    A person's change that moves the entry forward (not a rollback itself) does: people decide.
    imagebump's change does only when it set the rolled-back image or a newer one by ``order`` (it
    wrote an image that lifted the rollback); imagebump landing a hotfix older than the rolled-back
    image lifts nothing. With ``order: none`` there is no "newer": any later change takes the
    rollback's place.
    """
    if order == "none":
        return True
    if not later.by_imagebump:
        return not older(later.before, later.after, order, pushed_at)
    return not older(found.before, later.after, order, pushed_at)


def standing_rollbacks(
    changes: list[ImageChange] | tuple[ImageChange, ...], order: Order, pushed_at: PushTimeOf
) -> list[ImageChange]:
    """The rollbacks among ``changes`` (an entry's image changes, newest first) that still stand,
    newest first: each a :func:`rollback` no later change :func:`lifts`."""
    standing: list[ImageChange] = []
    for change in reversed(changes):  # oldest first
        standing = [r for r in standing if not lifts(change, r, order, pushed_at)]
        if rollback(change, order, pushed_at) is not None:
            standing.append(change)
    return standing[::-1]


def same_version(a: ImagesEntry, b: ImagesEntry, order: Order) -> bool:
    """Is ``a`` the rolled-back image ``b`` again: the same reference, or (``semver``) the same
    version by precedence (a rebuild under the same tag, ``1.5.0+build.2``)?"""
    if image_ref(a.newTag, a.digest) == image_ref(b.newTag, b.digest) or (a.digest and a.digest == b.digest):
        return True
    if order != "semver":
        return False
    va, vb = parse_semver(a.newTag), parse_semver(b.newTag)
    return va is not None and vb is not None and compare_semver(va, vb) == 0


def held_by_standing(
    standing: list[ImageChange],
    new: ImagesEntry,
    new_pushed_at: datetime | None,
    order: Order,
) -> str | None:
    """Why one of the ``standing`` rollbacks (newest first) holds the entry against writing ``new``
    (pushed at ``new_pushed_at``), or None.

    Each holds unless ``new`` was pushed after its commit (:func:`rollback_hold`), and, with
    ``order: semver``, ``new`` is not the rolled-back version again: a fix newer than it lifts the
    rollback, a hotfix older than it is welcome and lifts nothing.
    """
    ref = image_ref(new.newTag, new.digest)
    for found in standing:
        why = rollback_hold(found, new_pushed_at, ref)
        if why is None and order == "semver" and same_version(new, found.before, order):
            why = (
                f"held: {found.describe()}; {ref} is the rolled-back version {entry_ref(found.before)} "
                "again; waiting for a newer version pushed after the rollback, or a person moving the entry forward"
            )
        if why is not None:
            return why
    return None


def rollback_hold(found: ImageChange | None, new_pushed_at: datetime | None, new_ref: str) -> str | None:
    """Why a rollback still holds the entry against writing ``new_ref`` (pushed at ``new_pushed_at``).

    It lifts only for an image pushed after the rollback commit (committer time); an image whose
    push time is unknown cannot show that, so the rollback holds. Git's commit time has whole
    seconds (and so may ECR's, as an emulator gives it): an image pushed within the rollback's
    second lifts it too, unless it is the image the rollback moved away from (or back to).
    """
    if found is None:
        return None
    if new_pushed_at is not None:
        pushed, committed = _utc(new_pushed_at), _utc(found.committed_at)
        if pushed > committed:
            return None
        undone = {image_ref(e.newTag, e.digest) for e in (found.before, found.after)}
        if int(pushed.timestamp()) == int(committed.timestamp()) and new_ref not in undone:
            return None
    return (
        f"held: {found.describe()}; not writing {new_ref} until an image pushed after the rollback "
        "exists, or a person moves the entry forward"
    )
