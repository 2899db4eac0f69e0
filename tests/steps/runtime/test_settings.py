"""steps.runtime.settings (``$NAME`` / ``$NAME_FILE``) and steps.runtime.redact: the one home of each, as tables."""

from __future__ import annotations

import base64
import json

import pytest

from steps.domain.errors import ConfigError
from steps.runtime import redact, settings


@pytest.mark.parametrize(
    ("env", "kwargs", "expected"),
    [
        pytest.param({"X_TOKEN": " t0ken-value \n"}, {}, "t0ken-value", id="variable-stripped"),
        pytest.param({"X_TOKEN": "v1-value", "X_TOKEN_FILE": "FILE"}, {}, "v1-value", id="variable-wins"),
        pytest.param({"X_TOKEN_FILE": "FILE"}, {}, "from-the-file", id="file"),
        pytest.param({}, {}, None, id="neither"),
        pytest.param({"X_TOKEN_FILE": "ABSENT"}, {"absent_file_is_unset": True}, None, id="optional-absent"),
        pytest.param({"X_TOKEN_FILE": "EMPTY"}, {}, None, id="empty-is-unset"),
    ],
)
def test_read_secret(tmp_path, env, kwargs, expected) -> None:
    (tmp_path / "file").write_text("from-the-file\n")
    (tmp_path / "empty").write_text("\n")
    paths = {"FILE": tmp_path / "file", "ABSENT": tmp_path / "absent", "EMPTY": tmp_path / "empty"}
    env = {k: str(paths.get(v, v)) for k, v in env.items()}
    assert settings.read_secret("X_TOKEN", env, **kwargs) == expected


@pytest.mark.parametrize(
    ("name", "kwargs", "reason"),
    [
        pytest.param("absent", {}, "file-missing"),
        pytest.param("empty", {"empty_file_is_error": True}, "file-empty"),
        pytest.param(".", {"label": "the git token file"}, "file-unreadable"),
    ],
)
def test_read_secret_errors_name_the_variable_and_the_fix(tmp_path, name, kwargs, reason) -> None:
    (tmp_path / "empty").write_text("")
    with pytest.raises(ConfigError) as info:
        settings.read_secret("X_TOKEN", {"X_TOKEN_FILE": str(tmp_path / name)}, **kwargs)
    assert (info.value.reason, info.value.field) == (reason, "X_TOKEN_FILE")
    assert str(tmp_path / name) in str(info.value)  # the file it could not read


def test_a_secret_read_is_redacted_everywhere_after(tmp_path) -> None:
    (tmp_path / "token").write_text("s3cr3t-from-a-file\n")
    settings.read_secret("X_TOKEN", {"X_TOKEN_FILE": str(tmp_path / "token")})
    basic = base64.b64encode(b"x-access-token:s3cr3t-from-a-file").decode()
    text = redact.redact(f"token s3cr3t-from-a-file, header Basic {basic}")
    assert "s3cr3t" not in text and basic not in text


@pytest.mark.parametrize(
    ("text", "shapes", "expected"),
    [
        pytest.param("Authorization: Bearer abc.def", False, "Authorization: Bearer ***", id="header"),
        pytest.param("https://user:pw@host/o/r", False, "https://***@host/o/r", id="url-password"),
        pytest.param("x?access_token=abc&y=1", True, "x?access_token=***&y=1", id="query"),
        pytest.param(
            "x?access_token=abc&y=1", False, "x?access_token=abc&y=1", id="query-kept-in-git-output"
        ),
        pytest.param("ghp_" + "a" * 36, True, "***", id="github-shape"),
    ],
)
def test_redact(text, shapes, expected) -> None:
    assert redact.redact(text, shapes=shapes) == expected


def test_mask_secrets_masks_every_form_and_nothing_else() -> None:
    """The local executor's masking: the given secret in clear, base64 and HTTP Basic form; a JSON
    line stays JSON (the header pattern of :func:`redact` would swallow its closing quote)."""
    basic = base64.b64encode(b"x-access-token:tok-12345").decode()
    line = json.dumps({"message": f"Authorization: Basic {basic}", "raw": "tok-12345", "x": "https://h/?a=1"})
    masked = redact.mask_secrets(line, ["tok-12345", None, ""])
    assert json.loads(masked) == {"message": "Authorization: Basic ***", "raw": "***", "x": "https://h/?a=1"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("https://u:pw@h/o/r", "https://***@h/o/r", id="userinfo"),
        pytest.param("https://git@h/o/r", "https://git@h/o/r", id="ssh-user-kept"),
        pytest.param("https://h/o/r?ref=main#x", "https://h/o/r?ref=***#***", id="query-and-fragment"),
        pytest.param("https://h/o/r?ghp_abc", "https://h/o/r?***", id="bare-query-value"),
    ],
)
def test_redact_url(text, expected) -> None:
    """A URL a user wrote in a rules file, as the rules' messages show it back (steps.runtime.redact)."""
    assert redact.redact_url(text) == expected


def test_missing_write_token_names_the_secret_and_the_local_variable(monkeypatch) -> None:
    """A pod without the imagebump-git Secret is told which Secret to create (and a laptop, which variable)."""
    from steps.git.auth import WRITE_SECRET, GitAuth
    from workflows import names

    for name in ("IMAGEBUMP_GIT_TOKEN", "IMAGEBUMP_GIT_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError) as err:
        GitAuth.from_env(write=True)
    message = str(err.value)
    assert WRITE_SECRET == names.GIT_SECRET  # the Secret the rendered template mounts
    assert f"create secret generic {names.GIT_SECRET} --from-file=token=" in message
    assert "export IMAGEBUMP_GIT_TOKEN" in message


def test_the_github_app_key_is_a_registered_secret(tmp_path) -> None:
    """The App's private key is read like every secret: registered, so not even git's output (which
    is redacted without the PEM shape) or a message quoting it can show it; a bad file is named."""
    from steps.forge import github

    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "k" * 40
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    (tmp_path / "app.pem").write_text(pem)
    env = {
        "IMAGEBUMP_GITHUB_APP_ID": "1",
        "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID": "2",
        "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE": str(tmp_path / "app.pem"),
    }
    got = github.GitHubSettings.from_env(env)
    assert got.uses_app and got.app_private_key == pem.strip()
    assert body not in redact.redact(f"fatal: {pem}", shapes=False)

    (tmp_path / "app.pem").write_bytes(b"")
    with pytest.raises(ConfigError) as info:
        github.GitHubSettings.from_env(env)
    assert (info.value.reason, info.value.field) == ("file-empty", "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE")
    (tmp_path / "app.pem").write_text("not a key")
    with pytest.raises(ConfigError) as info:
        github.GitHubSettings.from_env(env)
    assert (info.value.reason, info.value.field) == ("not-a-pem-key", "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE")


def test_settings_several_modules_read_come_from_here(tmp_path, monkeypatch) -> None:
    """The commit identity, the rules file and the read-token file are read by steps.runtime.settings (one
    reading: stripped, blank is unset), whoever asks for them."""
    from steps.git import auth as git_auth
    from steps.git import commit as git_commit

    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_NAME", " Release Bot ")
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_EMAIL", "")
    assert settings.author_identity() == ("Release Bot", settings.DEFAULT_AUTHOR_EMAIL)
    assert git_commit.identity(None, None) == settings.author_identity()
    assert git_commit.identity("A <a@example.com>", None) == ("A", "a@example.com")

    monkeypatch.setenv("IMAGEBUMP_RULES_FILE", "  ")
    assert settings.rules_file() == settings.DEFAULT_RULES_FILE
    monkeypatch.setenv("IMAGEBUMP_RULES_FILE", str(tmp_path / "rules.yaml"))
    assert settings.rules_file() == str(tmp_path / "rules.yaml")

    monkeypatch.setenv("IMAGEBUMP_GIT_READ_TOKEN_FILE", f" {tmp_path / 'absent'} ")
    assert f"({tmp_path / 'absent'} does not exist)" in git_auth.anonymous_read_fix()
