"""Values merged as Helm merges them: the documents of one values file (Helm 4), and a helmfile
release's ``--values`` sources in order, the later winning key by key. What is edited is the scalar
that decides what is deployed, never one a later document or source overrides."""

from __future__ import annotations

import pytest
import yaml

from steps.domain.errors import ImageNotFoundError
from steps.kustomize.values import edit_values

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
REPO = f"{ECR}/team/app"
OTHER = f"{ECR}/team/pinned"


def image(tag: str, repository: str = REPO) -> str:
    return f'image:\n  repository: {repository}\n  tag: "{tag}"\n'


def documents(text: str) -> list[dict]:
    return list(yaml.safe_load_all(text))


# --- the documents of one values file (Helm 4 merges them, the later winning) -----------------------


def test_a_later_document_that_overrides_only_the_tag_is_the_one_edited() -> None:
    before = image("1.0") + '---\nimage:\n  tag: "1.1"\n'
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert first["image"]["tag"] == "1.0"  # the losing document: untouched
    assert second["image"]["tag"] == "2.0"


def test_a_later_document_with_the_whole_image_wins_over_the_earlier() -> None:
    before = image("1.0") + "---\n" + image("0.9")
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert (first["image"]["tag"], second["image"]["tag"]) == ("1.0", "2.0")


def test_a_later_document_naming_another_repository_is_not_the_pushed_image() -> None:
    before = image("1.0") + f"---\nimage:\n  repository: {OTHER}\n"
    with pytest.raises(ImageNotFoundError):
        edit_values(before, REPO, tag="2.0", digest=None)


def test_a_digest_an_earlier_document_keeps_is_emptied_with_the_later_tag() -> None:
    before = image("1.0") + f"  digest: sha256:{'a' * 64}\n---\nimage:\n  tag: '1.1'\n"
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert (first["image"]["digest"], first["image"]["tag"], second["image"]["tag"]) == ("", "1.0", "2.0")
