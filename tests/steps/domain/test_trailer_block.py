"""imagebump's commits are recognised by the trailer ``Imagebump-Image`` in the message's final
trailer block, as git defines one (``git interpret-trailers --parse``), never by the line quoted
anywhere else: a person's rollback whose body cites imagebump's commit (pasted, ``commit -c``, a
squash listing) stays a person's rollback.
"""

from __future__ import annotations

import subprocess

from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.domain.intent import by_imagebump, history_mark, history_trailer, trailer, trailer_block

TRAILER = trailer("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api", "2.0", None)
HISTORY = history_trailer(20, "a" * 40, "o/prod/kustomization.yaml")
QUOTED = (
    "Roll back api to 1.0: 2.0 crashes on start\n\nThe bad commit was:\n\n"
    "imagebump(prod): api 1.0 → 2.0\n\nImage:    api\n\nProduced by imagebump 0.1.0.\n\n"
    f"{TRAILER}\n{HISTORY}\n\nSigned-off-by: Person <p@example.com>\n"
)

PROSE = st.sampled_from(
    ["roll back api", "2.0 crashes on start", "see the incident", "Two words: not a trailer", "- a list item"]
)
TRAILERS = st.sampled_from(
    [
        "Signed-off-by: Ann <ann@x>",
        "Co-authored-by: B <b@x>",
        "Reviewed-by: C <c@x>",
        "(cherry picked from commit abc)",
    ]
)
LINE = st.one_of(PROSE, TRAILERS, st.just(TRAILER), st.just("  a continuation"), st.just(HISTORY))
PARAGRAPH = st.lists(LINE, min_size=1, max_size=4)
MESSAGE = st.lists(PARAGRAPH, min_size=1, max_size=4).map(
    lambda ps: "\n\n".join("\n".join(p) for p in ps) + "\n"
)


def _git_sees(message: str) -> bool:
    """Whether ``git interpret-trailers --parse`` finds the trailer (the oracle), past trailing
    paragraphs of ``Co-authored-by`` lines alone (GitHub appends one to a squash merge)."""
    paragraphs = message.strip("\n").split("\n\n")
    while len(paragraphs) > 1 and all(x.startswith("Co-authored-by:") for x in paragraphs[-1].split("\n")):
        paragraphs.pop()
    message = "\n\n".join(paragraphs) + "\n"
    out = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=message,
        capture_output=True,
        text=True,
        check=True,
        env={"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"},
    ).stdout
    return any(line.lower().startswith("imagebump-image:") for line in out.splitlines())


@given(
    before=st.lists(PARAGRAPH, min_size=0, max_size=3),
    prose=PROSE,
    after=st.lists(st.lists(st.one_of(PROSE, TRAILERS), min_size=1, max_size=3), min_size=0, max_size=2),
    last=st.one_of(st.lists(PROSE, min_size=1, max_size=3), st.lists(TRAILERS, min_size=1, max_size=3)),
)
@example(before=[], prose="roll back api", after=[], last=["Signed-off-by: Ann <ann@x>"])
@settings(max_examples=200)
def test_a_message_quoting_the_trailer_anywhere_but_its_final_block_is_a_persons(
    before, prose, after, last
) -> None:
    # the trailer line in a paragraph of the body, never in the last one (which has no trailer)
    quoted = [*before, [prose, TRAILER], *after]
    message = "title\n\n" + "\n\n".join("\n".join(p) for p in [*quoted, last]) + "\n"
    assert not by_imagebump(message)
    assert not by_imagebump(f"{TRAILER}\n")  # the title alone is never a trailer block


def test_the_audits_quoted_rollback_is_a_persons_and_imagebumps_own_message_is_imagebumps() -> None:
    assert not by_imagebump(QUOTED)
    assert history_mark(QUOTED, "a" * 40, "o/prod/kustomization.yaml") == 0
    own = f"imagebump(prod): api 1.0 → 2.0\n\nProduced by imagebump.\n\n{TRAILER}\n{HISTORY}\n"
    assert by_imagebump(own) and by_imagebump(own.replace("\n", "\r\n"))
    assert history_mark(own, "a" * 40, "o/prod/kustomization.yaml") == 20
    # cherry-pick -x and a sign-off land in the same block: still imagebump's
    assert by_imagebump(own + "(cherry picked from commit abc)\nSigned-off-by: Ann <ann@x>\n")
    # GitHub's squash merge appends its co-authors in a paragraph of their own: still imagebump's
    assert by_imagebump(own + "\nCo-authored-by: A <a@x>\n")
    assert history_mark(own + "\nCo-authored-by: A <a@x>\n", "a" * 40, "o/prod/kustomization.yaml") == 20


@given(message=MESSAGE)
@example(message=QUOTED)
@example(message=f"t\n\nsome prose\n{TRAILER}\nSigned-off-by: A <a@x>\n")
@settings(max_examples=60, deadline=None)
def test_the_trailer_is_found_exactly_where_git_interpret_trailers_finds_it(message) -> None:
    assert by_imagebump(message) == _git_sees(message)
    assert not trailer_block(message) or message.rstrip("\n").endswith(trailer_block(message)[-1])


@given(message=MESSAGE)
@settings(max_examples=60)
def test_co_authors_appended_never_make_a_persons_message_imagebumps(message) -> None:
    assert by_imagebump(message + "\nCo-authored-by: A <a@x>\n") == by_imagebump(message)
