"""moto's AWS emulator in server mode on 127.0.0.1 — for tests, the demo and benchmarks."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-west-2",
}


@dataclass(frozen=True)
class MotoServer:
    endpoint_url: str
    region: str = "us-west-2"

    def client(self, service: str):
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


#: moto servers running in this process. They share moto's in-process backends (the accounts'
#: state), so the last one to stop resets them: a later world starts empty, as a new server would.
_running = 0
_lock = threading.Lock()


@contextmanager
def moto_server(region: str = "us-west-2") -> Iterator[MotoServer]:
    """Start ``moto.server.ThreadedMotoServer`` on 127.0.0.1, a free port; stop it on exit.

    When the last server of this process stops, moto's state is reset (its ``/moto-api/reset``),
    so two worlds opened one after the other (the benchmarks do) do not see each other's ECR
    repositories, queues or stacks.
    """
    global _running
    from moto.server import ThreadedMotoServer

    _list_modules_once()
    keep_every_sqs_message()
    parse_each_event_path_once()
    for key, value in FAKE_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with _lock:
        _running += 1
    try:
        yield MotoServer(endpoint_url=f"http://{host}:{port}", region=region)
    finally:
        with _lock:
            _running -= 1
            last = _running == 0
        if last:
            _reset(f"http://{host}:{port}")
        server.stop()


def _list_modules_once() -> None:
    """moto's server finds a request's service through ``moto.backends.list_of_moto_modules()``,
    which lists moto's package directory (~175 ``stat`` calls) — twice per request (moto 5.2.1,
    ``moto_server/werkzeug_app.py`` ``get_backend_for_host``): ~3 ms of every emulated AWS call on
    this machine's disk. The directory does not change while we run: it is listed once."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "listed_once", False):
        return
    modules = tuple(backends.list_of_moto_modules())

    def list_of_moto_modules():
        return iter(modules)

    list_of_moto_modules.listed_once = True  # type: ignore[attr-defined]
    backends.list_of_moto_modules = list_of_moto_modules


def parse_each_event_path_once() -> None:
    """Make moto's EventBridge parse each JSONPath of a target's input template once; idempotent.

    moto (5.2.6, ``events/utils.py`` ``EventTemplateParser.parse``) calls ``jsonpath_ng.ext.parse``
    for each path of the target's ``InputPathsMap`` (without one, the eight of its default template)
    on every delivery, and jsonpath-ng (1.17) builds a new parser, ply's lexer and LALR tables,
    for each call: ~8 ms of every emulated ``PutEvents`` that reaches our SQS queue, spent on the
    CPUs the steps run on (in production that work is AWS's, on its own machines). A parsed path is
    a read-only expression (``find`` does not change it), so one parse per distinct path string
    answers every later delivery the same. Measured here (a ``PutEvents`` call through boto3, p50 of
    20): one that reaches the queue 16.4-16.8 ms before, 7.9-8.8 ms after; one that matches no rule
    5.7-8.0 ms either way (bench/README.md, "Waste found").
    """
    import functools

    from jsonpath_ng import ext

    if hasattr(ext.parse, "cache_info"):
        return
    ext.parse = functools.lru_cache(maxsize=256)(ext.parse)  # type: ignore[assignment]


def keep_every_sqs_message() -> None:
    """Make moto's SQS ``DeleteMessage`` keep the messages it was not asked to delete; idempotent.

    moto (5.2.6, ``sqs/models.py``) deletes in ``Queue.delete_message`` by copying the queue's
    other messages into a new list and assigning it, without the queue's ``_messages_lock`` that
    ``Queue.add_message`` appends under. Two things can happen in between, each losing a message
    no consumer ever sees, with nothing in the queue's counts or the DLQ to show for it:

    * a message delivered (an EventBridge rule's target, a ``SendMessage``) after the copy is
      dropped by the assignment;
    * a ``ReceiveMessage`` that moves a message past ``maxReceiveCount`` to the dead-letter queue
      (``SQSBackend.receive_message``, ``queue._messages.remove``) shifts the list under the copy,
      which then skips the next message (and keeps the moved one, a second copy).

    Real SQS never loses an accepted message (a standard queue stores it redundantly before
    acknowledging ``SendMessage`` and delivers it at least once: AWS, "Amazon SQS standard queues",
    docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/standard-queues.html); an
    emulator that does would fail our "never lose an event" checks for a loss that is moto's (the chaos run met it once in thousands of deliveries).
    Here the delete, and the receive that can move messages, run under the queue's lock (a
    ``Condition`` over an ``RLock``: a long poll's wait releases it).
    """
    from moto.sqs import models

    if getattr(models.Queue.delete_message, "serialized", False):
        return
    delete = models.Queue.delete_message
    receive = models.SQSBackend.receive_message

    def delete_message(self, receipt_handle: str) -> None:
        with self._messages_lock:
            delete(self, receipt_handle)

    def receive_message(self, queue_name: str, *args, **kwargs):
        with self.get_queue(queue_name)._messages_lock:
            return receive(self, queue_name, *args, **kwargs)

    delete_message.serialized = True  # type: ignore[attr-defined]
    models.Queue.delete_message = delete_message  # type: ignore[method-assign]
    models.SQSBackend.receive_message = receive_message  # type: ignore[method-assign]


def _reset(endpoint_url: str) -> None:
    import urllib.request

    try:
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint_url}/moto-api/reset", method="POST"), timeout=10
        )
    except OSError:  # a server that is already gone has nothing left to reset
        pass
