"""kubeconfig discovery, merging and credentials, the way kubectl resolves them."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpushare.kube import config as kc
from kubectl_gpushare.kube.errors import EXIT_CONFIG, ConfigError


def write_kubeconfig(
    path: Path,
    *,
    current: str | None = "ctx",
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": b} for n, b in (clusters or {}).items()],
        "users": [{"name": n, "user": b} for n, b in (users or {}).items()],
        "contexts": [{"name": n, "context": b} for n, b in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def simple(path: Path, server: str = "https://10.0.0.1:6443", user: dict[str, Any] | None = None) -> Path:
    return write_kubeconfig(
        path,
        clusters={"c": {"server": server}},
        users={"u": user if user is not None else {"token": "abc"}},
        contexts={"ctx": {"cluster": "c", "user": "u", "namespace": "team"}},
    )


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), **extra}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", None),
        ("5", 5.0),
        ("+5", 5.0),
        ("2.5s", 2.5),
        ("5s", 5.0),
        ("1m", 60.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("2562047h", 2562047 * 3600.0),
        (7, 7.0),
        (None, None),
    ],
)
def test_request_timeout_accepts_kubectl_syntax(text: Any, seconds: float | None) -> None:
    assert kc.parse_request_timeout(text) == seconds


@pytest.mark.parametrize(
    "text",
    # Past Go's longest duration (2562047h): socket timeouts overflowed with a traceback
    ["", "abc", "5x", "1m 30s", "-5", "-1s", "2.5", " 5", "\u0661\u0662",  # kubectl refuses these three too
     "1d", "s", "5s5", "99999999999999999999h", "2562048h", "9999999999999",
     "9" * 5000, "+" + "1" * 5000,  # past Python's 4,300-digit int() limit: was a ValueError traceback
     float("nan"), float("inf")],
)
def test_request_timeout_rejects_garbage_with_one_line(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        kc.parse_request_timeout(text)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == EXIT_CONFIG


def test_token_user_from_default_home_path(tmp_path: Path) -> None:
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    simple(home / "config")
    cfg = kc.load_config(environ=env_for(tmp_path))
    assert cfg.server == "https://10.0.0.1:6443"
    assert cfg.namespace == "team" and cfg.context == "ctx"
    assert cfg.auth_headers() == {"Authorization": "Bearer abc"}
    assert cfg.timeout == kc.DEFAULT_TIMEOUT


def test_missing_kubeconfig_names_the_paths_tried(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(ConfigError, match=f"tried {a}, {b}"):
        kc.load_config(environ=env_for(tmp_path, KUBECONFIG=f"{a}{os.pathsep}{b}"))
    with pytest.raises(ConfigError, match="does not exist"):
        kc.load_config(kubeconfig=str(a), environ=env_for(tmp_path))


def test_kubeconfig_list_merges_first_file_wins(tmp_path: Path) -> None:
    first = write_kubeconfig(
        tmp_path / "first",
        current=None,
        clusters={"c": {"server": "https://first:6443"}},
        users={"u": {"token": "first-token"}},
    )
    second = write_kubeconfig(
        tmp_path / "second",
        current="ctx",
        clusters={"c": {"server": "https://second:6443"}, "other": {"server": "http://127.0.0.1:1"}},
        users={"u": {"token": "second-token"}},
        contexts={"ctx": {"cluster": "c", "user": "u"}, "alt": {"cluster": "other", "user": "u"}},
    )
    environ = env_for(tmp_path, KUBECONFIG=os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)]))
    cfg = kc.load_config(environ=environ)
    assert cfg.server == "https://first:6443"
    assert cfg.auth_headers()["Authorization"] == "Bearer first-token"
    assert cfg.namespace == "default"
    alt = kc.load_config(context="alt", environ=environ)
    assert alt.server == "http://127.0.0.1:1" and not alt.is_https
    assert alt.ssl_context() is None


def test_explicit_kubeconfig_beats_the_environment(tmp_path: Path) -> None:
    explicit = simple(tmp_path / "explicit", server="https://explicit:1")
    env_file = simple(tmp_path / "env", server="https://env:1")
    cfg = kc.load_config(kubeconfig=str(explicit), environ=env_for(tmp_path, KUBECONFIG=str(env_file)))
    assert cfg.server == "https://explicit:1"


def test_context_cluster_and_user_overrides(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "cfg",
        clusters={"c1": {"server": "https://one:1"}, "c2": {"server": "https://two:2/prefix/"}},
        users={"u1": {"token": "t1"}, "u2": {"username": "admin", "password": "s3cret"}},
        contexts={"ctx": {"cluster": "c1", "user": "u1"}},
    )
    cfg = kc.load_config(kubeconfig=str(path), cluster="c2", user="u2")
    assert cfg.server == "https://two:2/prefix"
    assert cfg.auth_headers()["Authorization"] == "Basic " + base64.b64encode(b"admin:s3cret").decode()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context": "nope"}, 'context "nope" not found.*; `kubectl config get-contexts` lists'),
        ({"cluster": "nope"}, 'cluster "nope" not found'),
        ({"user": "nope"}, 'user "nope" not found'),
        ({"request_timeout": "soon"}, "invalid request timeout"),
        ({"as_groups": ["devs"]}, "--as-group needs --as"),
    ],
)
def test_unknown_names_are_one_line_config_errors(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    path = simple(tmp_path / "cfg")
    with pytest.raises(ConfigError, match=message) as info:
        kc.load_config(kubeconfig=str(path), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("clusters: [\n", "not valid YAML"),
        ("- a\n- b\n", "not a mapping"),
        ("clusters: 5\n", "clusters must be a list"),
        ("current-context: x\n", 'context "x" not found'),
        ("clusters: []\n", "no current context"),
    ],
)
def test_malformed_files_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "cfg"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        kc.load_config(kubeconfig=str(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"users: [{name: u, user: {token: \"\xff\"}}]\n", r"not valid YAML \(not UTF-8\)"),
        (b"clusters: " + b"[" * 20_000 + b"]" * 20_000 + b"\n", r"not valid YAML \(nested too deeply\)"),
        (b"- " * 5_000 + b"x\n", r"not valid YAML \(nested too deeply\)"),
        (b"current-context: " + b"9" * 5_000 + b"\n", r"not valid YAML \(a value out of range\)"),
        (b"current-context: 2026-13-45\n", r"not valid YAML \(a value out of range\)"),
        (b"current-context: !!bool x\n", r"not valid YAML \(a value out of range\)"),  # PyYAML: KeyError
        (b"current-context: !!int\n", r"not valid YAML \(a value out of range\)"),  # PyYAML: IndexError
        (b"current-context: !!timestamp x\n", r"not valid YAML \(a value out of range\)"),  # AttributeError
    ],
    ids=["not-utf-8", "deep-flow", "deep-block", "5000-digits", "no-such-date", "not-a-bool", "empty-int",
         "not-a-timestamp"],
)
def test_hostile_files_are_one_line_config_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "cfg"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as info:
        kc.load_config(kubeconfig=str(path))
    assert "\n" not in str(info.value)


def test_impersonation_headers(tmp_path: Path) -> None:
    cfg = kc.load_config(kubeconfig=str(simple(tmp_path / "cfg")), as_user="jane", as_groups=["devs", "ops"])
    assert cfg.auth_headers()["Impersonate-User"] == "jane"
    assert cfg.impersonation_group_headers() == [("Impersonate-Group", "devs"), ("Impersonate-Group", "ops")]


@pytest.mark.parametrize(
    ("user", "groups", "header"),
    [
        ({"token": "a\nX-Injected: 1"}, [], "Authorization"),  # a second header, were it sent
        ({"token": "euro-\u20ac"}, [], "Authorization"),  # beyond Latin-1: http.client cannot encode it
        ({"token": "t"}, ["ops\r\n"], "Impersonate-Group"),
    ],
    ids=["line-break", "beyond-latin-1", "group-line-break"],
)
def test_credentials_no_header_can_carry_are_a_one_line_error_that_keeps_them_secret(
    tmp_path: Path, user: dict[str, str], groups: list[str], header: str
) -> None:
    cfg = kc.load_config(kubeconfig=str(simple(tmp_path / "cfg", user=user)), as_user="jane", as_groups=groups)
    with pytest.raises(ConfigError, match=f"credentials' {header} header would hold") as info:
        cfg.auth_headers()
        cfg.impersonation_group_headers()
    assert "\n" not in str(info.value) and "Injected" not in str(info.value) and "euro" not in str(info.value)


def test_a_token_file_not_in_utf_8_is_a_config_error(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"abc\xff")
    cfg = kc.load_config(kubeconfig=str(simple(tmp_path / "cfg", user={"tokenFile": str(token)})))
    with pytest.raises(ConfigError, match=r"cannot read token file .*: not UTF-8"):
        cfg.auth_headers()


def test_relative_paths_resolve_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    sub = tmp_path / "dir"
    sub.mkdir()
    (sub / "token").write_text("from-file\n")
    path = write_kubeconfig(
        sub / "cfg",
        clusters={"c": {"server": "https://x:1", "certificate-authority": "ca.pem"}},
        users={"u": {"tokenFile": "token", "client-certificate": "c.pem", "client-key": "k.pem"}},
        contexts={"ctx": {"cluster": "c", "user": "u"}},
    )
    cfg = kc.load_config(kubeconfig=str(path))
    assert cfg.ca_file == str(sub / "ca.pem")
    assert cfg.client_cert_file == str(sub / "c.pem") and cfg.client_key_file == str(sub / "k.pem")
    assert cfg.auth_headers()["Authorization"] == "Bearer from-file"
    with pytest.raises(ConfigError, match="cannot load the cluster CA"):
        cfg.ssl_context()


def test_token_file_is_reread_on_refresh(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    path = simple(tmp_path / "cfg", user={"tokenFile": str(token)})
    cfg = kc.load_config(kubeconfig=str(path))
    assert cfg.auth_headers()["Authorization"] == "Bearer one"
    token.write_text("two")
    assert cfg.auth_headers()["Authorization"] == "Bearer one"  # cached
    assert cfg.auth_headers(refresh=True)["Authorization"] == "Bearer two"


def test_bad_base64_data_is_a_config_error(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "cfg",
        clusters={"c": {"server": "https://x:1", "certificate-authority-data": "%%%not base64 at all\xff"}},
        users={"u": {}},
        contexts={"ctx": {"cluster": "c", "user": "u"}},
    )
    with pytest.raises(ConfigError):
        kc.load_config(kubeconfig=str(path)).ssl_context()


def test_proxy_url_is_refused_with_a_workaround(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "cfg",
        clusters={"c": {"server": "https://x:1", "proxy-url": "socks5://127.0.0.1:1080"}},
        users={"u": {}},
        contexts={"ctx": {"cluster": "c", "user": "u"}},
    )
    with pytest.raises(ConfigError, match="kubectl proxy"):
        kc.load_config(kubeconfig=str(path))


def test_server_without_scheme_defaults_to_https(tmp_path: Path) -> None:
    cfg = kc.load_config(kubeconfig=str(simple(tmp_path / "cfg", server="10.1.2.3:6443")))
    assert cfg.server == "https://10.1.2.3:6443"


def test_insecure_skip_tls_verify_builds_an_unverified_context(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "cfg",
        clusters={"c": {"server": "https://x:1", "insecure-skip-tls-verify": True}},
        users={"u": {}},
        contexts={"ctx": {"cluster": "c", "user": "u"}},
    )
    context = kc.load_config(kubeconfig=str(path)).ssl_context()
    assert context is not None
    assert context.check_hostname is False


# --- in-cluster -----------------------------------------------------------------------------------------


def service_account(tmp_path: Path) -> Path:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "namespace").write_text("gpushare\n")
    return sa


def test_in_cluster_fallback_when_no_kubeconfig(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    environ = env_for(tmp_path, KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    cfg = kc.load_config(environ=environ, service_account_dir=str(sa), request_timeout="3s")
    assert cfg.server == "https://10.96.0.1:443"
    assert cfg.namespace == "gpushare" and cfg.source == "in-cluster"
    assert cfg.timeout == 3.0
    assert cfg.auth_headers()["Authorization"] == "Bearer sa-token"
    assert cfg.ca_file is None


def test_in_cluster_ipv6_host_is_bracketed(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert kc.in_cluster_config(environ, str(sa)).server == "https://[fd00::1]:443"


def test_in_cluster_without_token_is_a_config_error(tmp_path: Path) -> None:
    environ = env_for(tmp_path, KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    with pytest.raises(ConfigError, match="no service-account token"):
        kc.load_config(environ=environ, service_account_dir=str(tmp_path / "none"))


# --- exec credential plugins -------------------------------------------------------------------------------


def exec_plugin(tmp_path: Path, reply: dict[str, Any] | str, exit_code: int = 0, name: str = "plugin") -> Path:
    """A small script that prints an ExecCredential and records how often it ran."""
    script = tmp_path / name
    counter = tmp_path / f"{name}.runs"
    body = reply if isinstance(reply, str) else json.dumps(reply)
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"counter = {str(counter)!r}\n"
        "runs = int(open(counter).read()) if os.path.exists(counter) else 0\n"
        "open(counter, 'w').write(str(runs + 1))\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "assert info['kind'] == 'ExecCredential' and info['spec']['interactive'] is False\n"
        "assert os.environ.get('PLUGIN_FLAVOUR') == 'test'\n"
        f"sys.stdout.write({body!r})\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def exec_config(tmp_path: Path, script: Path, api_version: str) -> kc.ClientConfig:
    path = simple(
        tmp_path / "cfg",
        user={
            "exec": {
                "apiVersion": api_version,
                "command": str(script),
                "args": ["--flag"],
                "env": [{"name": "PLUGIN_FLAVOUR", "value": "test"}],
                "installHint": "install the plugin",
            }
        },
    )
    return kc.load_config(kubeconfig=str(path))


@pytest.mark.parametrize("api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
def test_exec_plugin_token_is_used_and_cached(tmp_path: Path, api_version: str) -> None:
    reply = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {"token": "exec-token", "expirationTimestamp": "2999-01-01T00:00:00Z"},
    }
    script = exec_plugin(tmp_path, reply)
    cfg = exec_config(tmp_path, script, api_version)
    assert cfg.auth_headers()["Authorization"] == "Bearer exec-token"
    assert cfg.auth_headers()["Authorization"] == "Bearer exec-token"
    assert (tmp_path / "plugin.runs").read_text() == "1"
    cfg.auth_headers(refresh=True)
    assert (tmp_path / "plugin.runs").read_text() == "2"


def test_exec_plugin_expired_credential_is_fetched_again(tmp_path: Path) -> None:
    version = "client.authentication.k8s.io/v1"
    reply = {
        "apiVersion": version,
        "kind": "ExecCredential",
        "status": {"token": "t", "expirationTimestamp": "2000-01-01T00:00:00Z"},
    }
    cfg = exec_config(tmp_path, exec_plugin(tmp_path, reply), version)
    cfg.auth_headers()
    cfg.auth_headers()
    assert (tmp_path / "plugin.runs").read_text() == "2"


@pytest.mark.parametrize(
    ("reply", "exit_code", "message"),
    [
        ("not json", 0, "did not print an ExecCredential"),
        ({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {}}, 0, "neither"),
        ({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"}, 0, "answered"),
        ("", 3, "exited with 3"),
        ("[" * 100_000, 0, "did not print an ExecCredential"),
    ],
    ids=["garbage", "empty-status", "wrong-version", "failing", "nested-too-deeply"],
)
def test_exec_plugin_failures_are_config_errors(
    tmp_path: Path, reply: dict[str, Any] | str, exit_code: int, message: str
) -> None:
    cfg = exec_config(tmp_path, exec_plugin(tmp_path, reply, exit_code), "client.authentication.k8s.io/v1")
    with pytest.raises(ConfigError, match=message):
        cfg.auth_headers()


@pytest.mark.parametrize("field", ["args", "env"])
def test_exec_plugin_with_a_nul_in_its_arguments_or_env_is_a_config_error(tmp_path: Path, field: str) -> None:
    # subprocess refuses an embedded NUL with ValueError, which was a traceback.
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(tmp_path / "plugin"),
                     "args": ["a\x00b"] if field == "args" else [],
                     "env": [{"name": "X", "value": "a\x00b"}] if field == "env" else []}}
    cfg = kc.load_config(kubeconfig=str(simple(tmp_path / "cfg", user=user)))
    with pytest.raises(ConfigError, match="failed: embedded null byte"):
        cfg.auth_headers()


def test_exec_plugin_not_installed_shows_the_hint(tmp_path: Path) -> None:
    cfg = exec_config(tmp_path, tmp_path / "absent", "client.authentication.k8s.io/v1")
    with pytest.raises(ConfigError, match="install the plugin"):
        cfg.auth_headers()


def test_exec_unsupported_api_version(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not supported"):
        exec_config(tmp_path, tmp_path / "x", "client.authentication.k8s.io/v2")


def test_auth_provider_with_cached_oidc_token_needs_no_kubernetes_package(tmp_path: Path) -> None:
    path = simple(
        tmp_path / "cfg",
        user={"auth-provider": {"name": "oidc", "config": {"id-token": "oidc-token", "client-id": "x"}}},
    )
    assert kc.load_config(kubeconfig=str(path)).auth_headers()["Authorization"] == "Bearer oidc-token"


@pytest.mark.parametrize("text", ["9" * 5000, "9" * 5000 + "s", "x" * 5000])
def test_request_timeout_error_does_not_echo_a_5000_character_value(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        kc.parse_request_timeout(text)
    assert len(str(info.value)) < 200 and repr(text[:64]) in str(info.value)
