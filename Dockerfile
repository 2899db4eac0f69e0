# The steps image every WorkflowTemplate and CronWorkflow names: imagebump.IMAGE,
# ghcr.io/imagebump/imagebump:<package version>. Build it with that tag:
#   docker build -t "ghcr.io/imagebump/imagebump:$(python -c 'import imagebump; print(imagebump.__version__)')" .
# It holds this package (steps.runtime.launcher calls steps.<module>:run), Hera and git. Non-root
# (10001, as the manifests' securityContext says), and fine with a read-only root filesystem:
# scratch, HOME and outputs all live under /tmp, an emptyDir in every pod.

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY imagebump ./imagebump
COPY steps ./steps
COPY workflows ./workflows
COPY sensors ./sensors
COPY render ./render
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ARG UID=10001
RUN apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid "${UID}" imagebump \
    && useradd --uid "${UID}" --gid "${UID}" --home-dir /tmp --no-create-home --shell /usr/sbin/nologin imagebump
COPY --from=build /wheels /wheels
# Bytecode is compiled at build time: the root filesystem is read-only in the pod, and every step
# process would otherwise compile what it imports on each start (bench/: ~1.5 s per step). The
# standard library too: the python image ships it without bytecode (its Dockerfile deletes every
# *.pyc, docker-library/python#615), which cost each step ~0.2 s more (bench/README.md, cold start).
# setuptools and wheel (which the python image keeps for 3.11) go: no step imports them, and
# setuptools' distutils-precedence.pth ran at every interpreter start, in every step pod
# (0.3-1.3 ms each; bench/README.md). tests/test_manifests.py checks that no step needs them.
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && pip uninstall --yes --no-input setuptools wheel \
    && python -m compileall -q -x '/(idlelib|tkinter|turtledemo|lib2to3|ensurepip)/' \
        "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
        "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    hera__outputs_directory=/tmp/hera-outputs
USER 10001:10001
WORKDIR /tmp
LABEL org.opencontainers.image.source="https://github.com/imagebump/imagebump" \
      org.opencontainers.image.licenses="Apache-2.0"
# Argo runs `python -m steps.runtime.launcher -e steps.<module>:run <args file>` (workflows/common.py
# StepRunner; Hera's own `python -m hera.workflows.runner` takes the same arguments); by hand:
CMD ["imagebump", "--help"]
