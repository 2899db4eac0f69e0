"""The suite-wide secret scan finds a token in captured output, and its HTTP Basic form too."""

from __future__ import annotations

import base64
import logging

import pytest

from tests.secret_scan import find_leaks, redact, register


@pytest.mark.parametrize(
    ("text", "leaks"),
    [
        pytest.param("push failed for https://example/ibt_s3cret", True, id="token"),
        pytest.param(
            "Authorization: Basic " + base64.b64encode(b"x-access-token:ibt_s3cret").decode(),
            True,
            id="basic-header",
        ),
        pytest.param("push failed for https://***@example/", False, id="redacted"),
        pytest.param("", False, id="empty"),
    ],
)
def test_find_leaks(text: str, leaks: bool) -> None:
    secrets = {"ibt_s3cret", base64.b64encode(b"x-access-token:ibt_s3cret").decode()}
    assert find_leaks([("Captured log call", text)], secrets) == (["Captured log call"] if leaks else [])


def test_register_covers_basic_auth_forms() -> None:
    token = register("ibt_test_" + "0" * 12)
    found = find_leaks([("stderr", base64.b64encode(f"x-access-token:{token}".encode()).decode())])
    assert found == ["stderr"]


def test_debug_log_records_are_captured_for_the_scan(caplog: pytest.LogCaptureFixture) -> None:
    """log_level = DEBUG in pyproject: DEBUG lines reach the report sections the scan reads."""
    logging.getLogger("imagebump.test").debug("a debug line the scan must see")
    assert "a debug line the scan must see" in caplog.text


def test_redact_masks_every_form_and_keeps_the_rest() -> None:
    """A failing test whose report carries a secret is shown with the secret masked, not hidden."""
    basic = base64.b64encode(b"x-access-token:ibt_s3cret_value").decode()
    text = f"AssertionError: push to https://h/r failed\ngit_token = 'ibt_s3cret_value'\nBasic {basic}"
    masked = redact(text, {"ibt_s3cret_value", basic})
    assert masked == "AssertionError: push to https://h/r failed\ngit_token = '***'\nBasic ***"
    assert find_leaks([("x", masked)], {"ibt_s3cret_value", basic}) == []
