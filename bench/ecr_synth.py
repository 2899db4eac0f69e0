"""A synthetic ECR for reconcile's memory axis: DescribeRepositories and DescribeImages, paged as
ECR pages them, for registries far larger than moto can be filled with in a benchmark.

moto (server mode) takes about 5 ms per ``PutImage`` and answers ``DescribeImages`` with every
image at once (no ``nextToken``): 200,000 images would take minutes to push and arrive as one
response, which is not what reconcile meets in a real registry. This server generates each page on
request from ``(repositories, images per repository)`` — nothing is stored — and speaks ECR's JSON
protocol (``X-Amz-Target: AmazonEC2ContainerRegistry_V20150921.<Operation>``) on 127.0.0.1 behind
the boto client's endpoint (``AWS_ENDPOINT_URL``). Pages hold at most ``maxResults`` items (ECR's
limit: 1,000) and a ``nextToken`` while more remain. Image ``i`` of a repository has two tags, a
short hash ``f"{i:07x}"`` and a version ``1.<i // 1000>.<i % 1000>``, and was pushed ``i``
seconds after :data:`EPOCH`: the last image is the newest.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

ACCOUNT = "123456789012"
#: Push time (epoch seconds) of image 0 of every repository.
EPOCH = 1_780_000_000
MAX_PAGE = 1000


def repository_names(prefix: str, repositories: int) -> list[str]:
    return [f"{prefix}/svc{r:04d}" for r in range(repositories)]


def tags_of(i: int) -> list[str]:
    """Image ``i``'s two tags: a short hash and a version."""
    return [f"{i:07x}", f"1.{i // 1000}.{i % 1000}"]


def digest_of(repository: str, i: int) -> str:
    return "sha256:" + hashlib.sha256(f"{repository}:{i}".encode()).hexdigest()


class SyntheticEcr:
    """``with SyntheticEcr(prefix, repositories=100, images=2000, region=...) as ecr: ecr.url``."""

    def __init__(self, prefix: str, *, repositories: int, images: int, region: str) -> None:
        self.names = repository_names(prefix, repositories)
        self.known = set(self.names)
        self.images = images
        self.region = region
        self.calls = 0
        self._lock = threading.Lock()
        synth = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                operation = (self.headers.get("X-Amz-Target") or "").rpartition(".")[2]
                with synth._lock:
                    synth.calls += 1
                status, answer = synth.answer(operation, body)
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer(self, operation: str, body: dict) -> tuple[int, dict]:
        start = int(body.get("nextToken") or 0)
        size = min(int(body.get("maxResults") or 100), MAX_PAGE)
        if operation == "DescribeRepositories":
            page = self.names[start : start + size]
            items = [
                {
                    "repositoryName": name,
                    "registryId": ACCOUNT,
                    "repositoryArn": f"arn:aws:ecr:{self.region}:{ACCOUNT}:repository/{name}",
                    "repositoryUri": f"{ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com/{name}",
                }
                for name in page
            ]
            answer: dict = {"repositories": items}
            total = len(self.names)
        elif operation == "DescribeImages":
            name = body.get("repositoryName", "")
            if name not in self.known:
                return 400, {"__type": "RepositoryNotFoundException", "message": f"{name} not found"}
            end = min(start + size, self.images)
            answer = {
                "imageDetails": [
                    {
                        "registryId": ACCOUNT,
                        "repositoryName": name,
                        "imageDigest": digest_of(name, i),
                        "imageTags": tags_of(i),
                        "imageSizeInBytes": 1469,
                        "imagePushedAt": EPOCH + i,
                        "imageManifestMediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    }
                    for i in range(start, end)
                ]
            }
            total = self.images
        else:
            return 400, {"__type": "InvalidParameterException", "message": f"{operation} is not synthesised"}
        if start + size < total:
            answer["nextToken"] = str(start + size)
        return 200, answer

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
