"""The demo's push → live part: a SIMULATED Argo CD watching the demo's staging overlay.

:func:`simulated_argocd` starts the Kubernetes API fake (:mod:`imagebump.local.kube_fake`, over HTTP
on 127.0.0.1, reached through a kubeconfig context as ``--argocd-context`` does) with one Application
deploying the staging overlay, :class:`~imagebump.local.argocd_sim.ArgoCDSimulator` playing Argo
CD's application controller and :class:`~imagebump.local.argocd_sim.ArgoCDApiServer` answering the
refresh verify-live asks for (``IMAGEBUMP_ARGOCD_REFRESH=api``, as on a cluster so configured); the
world's executors then run verify-live against it. The simulator
renders overlays with ``kubectl kustomize``: without ``kubectl`` on ``PATH`` the live part is
skipped with a line that says so (the rest of the demo needs only git). ``wrong_manifest`` makes it
run the previous image while reporting the new revision synced: verify-live raises the alarm.
:func:`live_lines` is the report's section.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from imagebump.local.argocd_sim import ArgoCDApiServer, ArgoCDSimulator, application, kubectl_available
from imagebump.local.demo_repo import HELM_VALUES_PATH, STAGING_PATH

CONTEXT = "imagebump-demo"
APPLICATION = "api-staging"
#: The Application of the Helm values target: the chart from a Helm repository, its values from Git.
HELM_APPLICATION = "api-helm"
SKIPPED = (
    "kubectl not found: push → live skipped (the simulated Argo CD renders overlays with kubectl kustomize)"
)


@dataclass
class LiveDemo:
    """What the live part started (``skipped`` says why it did not start)."""

    sim: ArgoCDSimulator | None = None
    skipped: str = ""


@contextmanager
def simulated_argocd(
    world: Any, *, wrong_manifest: bool = False, say: Callable[[str], None] = lambda _m: None
) -> Iterator[LiveDemo]:
    """Argo CD, simulated, deploying the world's staging overlay; verify-live on for the world."""
    if not kubectl_available():
        say(SKIPPED)
        yield LiveDemo(skipped=SKIPPED)
        return
    from imagebump.local.kube_fake import FakeKube, FakeKubeServer

    kube = FakeKube()
    with FakeKubeServer(kube) as server, ArgoCDApiServer(kube) as argocd_api:
        kubeconfig = server.write_kubeconfig(world.root / "kubeconfig", context=CONTEXT)
        world.set_live(CONTEXT, "2m", kubeconfig=str(kubeconfig))
        world.set_env_config({"IMAGEBUMP_LIVE_POLL_SECONDS": "0.2"})
        # verify-live asks Argo CD's API server to refresh (an account with `applications, get`)
        world.set_argocd_api(argocd_api.url, argocd_api.token)
        kube.seed(application(APPLICATION, world.manifests_url, STAGING_PATH))
        if not wrong_manifest:  # the wrong-manifest demo shows the one alarm, staging's
            kube.seed(helm_application(world.manifests_url))
        sim = ArgoCDSimulator(kube, git_token=world.token, poll=0.1)
        say(f"simulated Argo CD: Application argocd/{APPLICATION} deploys {STAGING_PATH} (automated sync)")
        if not wrong_manifest:
            say(
                f"simulated Argo CD: Application argocd/{HELM_APPLICATION} deploys the api chart with "
                f"$values/{HELM_VALUES_PATH} (multi-source, automated sync)"
            )
        sim.reconcile_once()  # synced at the first commit before the push
        sim.wrong_manifest = wrong_manifest
        with sim:
            yield LiveDemo(sim=sim)


def helm_application(manifests_url: str) -> dict[str, Any]:
    """The common multi-source pattern: the chart from a Helm repository, the values file from Git
    through a ``ref: values`` source (``$values/…``)."""
    app = application(HELM_APPLICATION, manifests_url, "")
    app["spec"].pop("source")
    app["spec"]["sources"] = [
        {
            "repoURL": "https://charts.example.com",
            "chart": "api",
            "targetRevision": "1.2.0",
            "helm": {"valueFiles": [f"$values/{HELM_VALUES_PATH}"]},
        },
        {"repoURL": manifests_url, "targetRevision": "HEAD", "ref": "values"},
    ]
    return app


def live_lines(targets: list[Any], skipped: str = "") -> list[str]:
    """``push → committed 1.9s → synced 3.0s → live 3.4s`` for each verified target, or the alarm."""
    if skipped:
        return [skipped]
    lines = []
    for t in targets:
        out = t.live_outputs
        if not t.live:
            continue
        if t.live == "live":
            lines.append(
                f"{t.env}: push → committed {float(out.get('seconds-push-to-committed') or 0):.1f}s → synced "
                f"{float(out.get('seconds-push-to-synced') or 0):.1f}s → live "
                f"{float(out.get('seconds-push-to-healthy') or 0):.1f}s (running {out.get('image', '')})"
            )
        elif t.live == "idle":
            lines.append(
                f"{t.env}: push → committed {float(out.get('seconds-push-to-committed') or 0):.1f}s → synced "
                f"{float(out.get('seconds-push-to-synced') or 0):.1f}s → idle (no Pod runs the image now: "
                f"{out.get('image', '')} runs when one starts)"
            )
        elif t.live == "mismatch":
            lines.append(
                f"{t.env}: ALARM: Argo CD runs another image than Git holds — {out.get('message', '')}"
            )
        else:
            lines.append(f"{t.env}: {t.live}: {out.get('message', '')}")
    return lines
