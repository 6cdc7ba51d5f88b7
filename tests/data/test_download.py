"""Checksummed downloads (benchlib.data.download) against a real HTTP server and a real FTP
server on 127.0.0.1: a good file arrives and is cached, a wrong checksum, a truncated transfer or
a file over its size bound stops with a clear one-line error and leaves no file behind."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess

import pytest
from conftest import benchlib_exe, tool_env
from helpers.ftp_server import serve_ftp
from helpers.http_server import serve_directory

from benchlib.data.download import RemoteFile, check_remote, fetch, remote_file, remote_files
from benchlib.primitives.errors import BenchlibError

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "data.bin").write_bytes(PAYLOAD)
    with serve_directory(root) as (url, requests):
        yield url, requests


def test_fetch_downloads_verifies_and_then_uses_the_cache(served, tmp_path):
    url, requests = served
    remote = RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA)
    path = fetch(remote, tmp_path / "cache", retries=0)
    assert path == tmp_path / "cache" / "data.bin"
    assert path.read_bytes() == PAYLOAD
    assert requests == ["/data.bin"]
    # A second fetch finds the verified copy and does not touch the network.
    assert fetch(remote, tmp_path / "cache", retries=0) == path
    assert requests == ["/data.bin"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["data.bin"]


def test_a_damaged_cached_copy_is_replaced(served, tmp_path):
    url, requests = served
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "data.bin").write_bytes(PAYLOAD[:1000])
    path = fetch(RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA), cache, retries=0)
    assert path.read_bytes() == PAYLOAD
    assert requests == ["/data.bin"]


def test_checksum_mismatch_is_a_clear_error_and_leaves_no_file(served, tmp_path):
    url, _ = served
    wrong = "0" * 64
    remote = RemoteFile("data.bin", f"{url}/data.bin", wrong)
    with pytest.raises(BenchlibError) as info:
        fetch(remote, tmp_path / "cache", retries=0, context="datasets.femnist.params")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"checksum mismatch for {url}/data.bin: expected sha256 {wrong}")
    assert f"got {PAYLOAD_SHA}" in message
    assert "datasets.femnist.params.sha256" in message
    assert list((tmp_path / "cache").iterdir()) == []


def test_truncated_transfer_is_a_clear_error_and_leaves_no_file(served, tmp_path):
    url, requests = served
    remote = RemoteFile("data.bin", f"{url}/truncated/data.bin", PAYLOAD_SHA)
    with pytest.raises(BenchlibError, match=r"^download of .*/truncated/data.bin failed \("):
        fetch(remote, tmp_path / "cache", retries=1)
    assert requests == ["/truncated/data.bin"] * 2  # one retry
    assert list((tmp_path / "cache").iterdir()) == []


def test_unreachable_server_is_a_clear_error(tmp_path):
    with serve_directory(tmp_path) as (url, _):
        pass  # the port is closed again
    remote = RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA)
    with pytest.raises(BenchlibError, match=r"check the network, the proxy .* or point params.url"):
        fetch(remote, tmp_path / "cache", retries=0, timeout=5)
    assert not (tmp_path / "cache" / "data.bin").exists()


def _unpinned(url: str) -> RemoteFile:
    return RemoteFile("data.bin", url, "", pinned=False)


@pytest.mark.parametrize("pinned", [True, False])
@pytest.mark.parametrize(
    "case, phrase",
    [
        ("bad_port", "Failed to parse"),  # requests' InvalidURL is a ValueError
        ("redirect_to_file", "No connection adapters were found for 'file:///etc/hostname'"),
        ("malformed_proxy", "Please check proxy URL"),
    ],
)
def test_a_failed_request_is_not_called_a_checksum_mismatch(
    served, tmp_path, monkeypatch, case, phrase, pinned
):
    """Nothing was downloaded: the error says the download failed and why, for pinned and
    unpinned files alike (an unpinned one crashed with AttributeError before)."""
    url, _ = served
    target = {
        "bad_port": "http://127.0.0.1:99999/data.bin",
        "redirect_to_file": f"{url}/redirect-to-file/data.bin",
        "malformed_proxy": "http://localhost.invalid/data.bin",
    }[case]
    if case == "malformed_proxy":
        monkeypatch.setenv("http_proxy", "http://")
        monkeypatch.setenv("HTTP_PROXY", "http://")
    remote = RemoteFile("data.bin", target, PAYLOAD_SHA) if pinned else _unpinned(target)
    with pytest.raises(BenchlibError) as info:
        fetch(remote, tmp_path / "cache", retries=0, timeout=5)
    message = str(info.value)
    assert message.startswith(f"download of {target} failed (") and phrase in message, message
    assert "checksum" not in message and "\n" not in message
    assert not (tmp_path / "cache" / "data.bin").exists()


@pytest.mark.parametrize(
    "url,sha,message",
    [
        ("file:///etc/passwd", PAYLOAD_SHA, r"not an http/https/ftp URL; fix ctx.url"),
        ("https://example.org/a.bin", "abc", r"not a 64-digit hex sha256; fix ctx.sha256"),
    ],
)
def test_bad_url_or_checksum_rejected_before_any_download(url, sha, message):
    with pytest.raises(BenchlibError, match=message):
        check_remote(RemoteFile("a.bin", url, sha), "ctx")


def test_source_remote_files_and_config_overrides():
    (default,) = remote_files("femnist_tff")
    assert default.name == "fed_emnist.tar.bz2"
    assert default.url == "https://storage.googleapis.com/tff-datasets-public/fed_emnist.tar.bz2"
    assert default.sha256 == "fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0"
    mirror = remote_file(
        "femnist_tff", "fed_emnist.tar.bz2", {"url": "http://127.0.0.1:1/x", "sha256": "A" * 64}
    )
    assert (mirror.url, mirror.sha256) == ("http://127.0.0.1:1/x", "a" * 64)
    assert remote_files("mnist5k") == []
    with pytest.raises(BenchlibError, match=r"downloads no file named 'other.zip'"):
        remote_file("femnist_tff", "other.zip")


def test_cli_download_checksum_mismatch_one_line_error(served, tmp_path):
    url, _ = served
    params = {"url": f"{url}/data.bin", "sha256": "1" * 64, "retries": 0}
    spec = json.dumps({"dataset": "femnist", "source": "femnist_tff", "params": params})
    out = tmp_path / "downloads" / "fed_emnist.tar.bz2"
    result = subprocess.run(
        [benchlib_exe(), "-q", "download", "--spec", spec, "--out", str(out)],
        env={**tool_env(), "NO_PROXY": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: checksum mismatch for {url}/data.bin: expected sha256 1111")
    assert "datasets.femnist.params.sha256" in lines[0]
    assert not out.exists()
    assert list(out.parent.iterdir()) == []


def test_a_download_off_a_terminal_logs_bytes_and_eta_lines(served, tmp_path, caplog, monkeypatch):
    import benchlib.data.download as download

    url, _ = served
    monkeypatch.setattr(download, "PROGRESS_EVERY_S", 0.0)  # a line per chunk, not per 10 s
    remote = RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA)
    with caplog.at_level(logging.INFO, logger="benchlib"):
        fetch(remote, tmp_path / "cache", retries=0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data.bin: ")]
    periodic = [line for line in lines if " of 102.4 kB (" in line]
    assert len(periodic) >= 2, lines
    assert all(re.search(r"\d+ %\), [\d.]+ \S?B/s, ETA \S+$", line) for line in periodic), lines
    assert lines[-1].startswith("data.bin: 102.4 kB downloaded in "), lines


def test_a_download_off_a_terminal_logs_its_end_at_the_default_period(served, tmp_path, caplog):
    url, _ = served
    remote = RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA)
    with caplog.at_level(logging.INFO, logger="benchlib"):
        fetch(remote, tmp_path / "cache", retries=0)
    assert "data.bin: 102.4 kB downloaded in " in caplog.text


def test_a_download_on_a_terminal_shows_poochs_progress_bar(served, tmp_path, capsys, monkeypatch):
    import benchlib.data.download as download

    url, _ = served
    monkeypatch.setattr(download, "_on_terminal", lambda: True)
    fetch(RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA), tmp_path / "cache", retries=0)
    bar = capsys.readouterr().err
    assert "100%" in bar and "102k" in bar, bar


@pytest.mark.parametrize(
    "path, size, cap, phrase",
    [
        ("data.bin", 1000, None, "announces 102,400 bytes, more than the 1,000"),
        ("data.bin", 0, 5000, "announces 102,400 bytes, more than the 5,000"),
        ("no-length/data.bin", 1000, None, "sent 6"),  # counted as it arrives
    ],
)
def test_an_unpinned_download_is_bounded_by_its_size(
    served, tmp_path, monkeypatch, path, size, cap, phrase
):
    """No checksum to stop a wrong file: its known size (or the cap on any download) does,
    announced or counted while it arrives, and nothing is left behind."""
    import benchlib.data.download as download

    if cap is not None:
        monkeypatch.setattr(download, "MAX_DOWNLOAD_BYTES", cap)
    url, _ = served
    remote = RemoteFile("data.bin", f"{url}/{path}", "", pinned=False, size=size)
    with pytest.raises(BenchlibError, match="more than the") as info:
        fetch(remote, tmp_path / "cache", retries=0, context="ctx")
    assert phrase in str(info.value) and "fix ctx.url" in str(info.value)
    assert list((tmp_path / "cache").iterdir()) == []


# ------------------------------------------------------------------------------------- FTP
@pytest.fixture
def ftp_root(tmp_path):
    root = tmp_path / "ftp"
    root.mkdir()
    (root / "data.bin").write_bytes(PAYLOAD)
    return root


def test_an_ftp_download_arrives_verified_logged_and_cached(ftp_root, tmp_path, caplog):
    """From the URL's own port (pooch's FTP downloader always dialled port 21), with the same
    progress lines as HTTP."""
    with serve_ftp(ftp_root) as (url, commands):
        remote = RemoteFile("data.bin", f"{url}/data.bin", PAYLOAD_SHA)
        with caplog.at_level(logging.INFO, logger="benchlib"):
            path = fetch(remote, tmp_path / "cache", retries=0)
        assert path.read_bytes() == PAYLOAD
        assert commands.count("RETR /data.bin") == 1 and "SIZE /data.bin" in commands
        assert fetch(remote, tmp_path / "cache", retries=0) == path  # the cache: no transfer
        assert commands.count("RETR /data.bin") == 1
    assert "data.bin: 102.4 kB downloaded in " in caplog.text
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["data.bin"]


@pytest.mark.parametrize(
    "announce, size, cap, phrase",
    [
        (True, 1000, None, "announces 102,400 bytes, more than the 1,000"),
        (True, 0, 5000, "announces 102,400 bytes, more than the 5,000"),
        (False, 1000, None, "bytes, more than the 1,000"),  # no SIZE: counted as it arrives
        (False, 0, 5000, "bytes, more than the 5,000"),
    ],
)
def test_an_ftp_download_is_bounded_like_an_http_one(
    ftp_root, tmp_path, monkeypatch, announce, size, cap, phrase
):
    """The file's known size, or the cap on any download, stops an FTP transfer too, whether
    the server announces the size (SIZE) or not, and nothing is left behind."""
    import benchlib.data.download as download

    if cap is not None:
        monkeypatch.setattr(download, "MAX_DOWNLOAD_BYTES", cap)
    with serve_ftp(ftp_root, announce_size=announce) as (url, commands):
        remote = RemoteFile("data.bin", f"{url}/data.bin", "", pinned=False, size=size)
        with pytest.raises(BenchlibError, match="more than the") as info:
            fetch(remote, tmp_path / "cache", retries=0, context="ctx")
    message = str(info.value)
    assert phrase in message and "fix ctx.url" in message and "\n" not in message
    assert message.startswith(f"{url}/data.bin {'announces' if announce else 'sent'} ")
    assert ("RETR /data.bin" in commands) is not announce  # an announced size stops it first
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_ftp_file_is_a_clear_error(ftp_root, tmp_path):
    with serve_ftp(ftp_root) as (url, _):
        remote = RemoteFile("data.bin", f"{url}/nothing.bin", PAYLOAD_SHA)
        with pytest.raises(BenchlibError) as info:
            fetch(remote, tmp_path / "cache", retries=0, context="ctx")
    message = str(info.value)
    assert message.startswith(f"download of {url}/nothing.bin failed (FTP: 550 no such file)")
    assert "point ctx.url at a reachable copy" in message
    assert not (tmp_path / "cache" / "data.bin").exists()
