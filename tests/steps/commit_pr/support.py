"""Builders shared by the commit-pr, GitHub and token-hygiene tests (area D)."""

from __future__ import annotations

from datetime import UTC, datetime

from steps.domain.models import ImagesEntry, Plan, Target

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def kustomization(tag: str = "1.0.0", name: str = "api") -> str:
    """A small overlay whose ``images`` entry ``name`` has ``newTag: tag`` (comments kept on edit)."""
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        "resources:\n"
        "  - ../../base\n"
        "images:\n"
        f"  - name: {name}  # the API server\n"
        f"    newName: {IMAGE}\n"
        f'    newTag: "{tag}"\n'
    )


def overlay_files(*paths: str, tag: str = "1.0.0") -> dict[str, str]:
    return {f"{p}/kustomization.yaml": kustomization(tag) for p in paths}


def target(
    repo_url: str,
    path: str = "overlays/prod",
    *,
    tag: str = "1.1.0",
    mode: str = "commit",
    provider: str = "local",
    env: str = "prod",
    order: str = "push-time",
    **extra,
) -> Target:
    return Target(
        rule=0,
        repo_url=repo_url,
        path=path,
        env=env,
        image=IMAGE,
        tag=tag,
        mode=mode,
        provider=provider,
        order=order,
        pushed_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        event_id="6f0e8b2c-1111-2222-3333-444455556666",
        **extra,
    )


def plan(
    path: str = "overlays/prod",
    *,
    old: str | None = "1.0.0",
    new: str = "1.1.0",
    new_digest: str | None = None,
    changed: bool = True,
) -> Plan:
    return Plan(
        changed=changed,
        decision="update" if changed else "current",
        file=f"{path}/kustomization.yaml",
        image_name="api",
        old=ImagesEntry(name="api", newName=IMAGE, newTag=old) if old else None,
        new=ImagesEntry(name="api", newName=IMAGE, newTag=new, digest=new_digest),
        base_branch="main",
    )


def write_app_key(path) -> None:
    """Write a fresh 2048-bit RSA private key (PEM) for GitHub App auth tests."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


#: The identity commit-pr commits as by default (``IMAGEBUMP_GIT_AUTHOR_*`` unset).
IMAGEBUMP_AUTHOR = "imagebump <imagebump@users.noreply.github.com>"
PERSON = "Dana Reviewer <dana@example.com>"


def imagebump_commit(remote, branch: str, tag: str, path: str = "overlays/prod") -> str:
    """A commit on ``branch`` as an earlier commit-pr run made it (its identity, its trailer)."""
    return remote.commit_files(
        {f"{path}/kustomization.yaml": kustomization(tag)},
        f"imagebump(prod): api → {tag}\n\nImagebump-Image: {IMAGE}:{tag}\n",
        branch=branch,
        author=IMAGEBUMP_AUTHOR,
    )
