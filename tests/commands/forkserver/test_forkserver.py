"""The fork server (``benchlib forkserver -- COMMAND``): a cell forked from the warm server
writes the same bytes as a fresh ``benchlib run``, resumes the same way, falls back to its own
process when the server is absent or refuses, passes exit statuses through, and dies with its
client.

Signals here are sent only after the cell has logged a finished round, and every wait is on a
process or an event, never on a clock, so no assertion depends on timing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import benchlib_exe, tool_env

from benchlib.commands.forkserver import ENV_SOCKET
from benchlib.commands.forkserver.protocol import THREAD_ENV
from benchlib.commands.forkserver.wrapper import _start_server, _stop_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A running fork server (portable kernels) and its socket path."""
    socket_path = tmp_path_factory.mktemp("fork") / "s.sock"
    process = _start_server(socket_path, "portable")
    assert process is not None, "the fork server did not start"
    yield process, socket_path
    _stop_server(process)
    assert process.returncode == 0


def run_argv(spec: dict, store: Path, split: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run", "--spec", json.dumps(spec), "--store", str(store), "--split", str(split),
        "--out", str(out / "metrics.json"), "--timing", str(out / "timing.json"),
        "--checkpoints", str(out / "ck"), "--threads", "1", *extra,
    ]  # fmt: skip


def job_env(threads: int = 1) -> dict[str, str]:
    """The environment Snakemake gives a job with ``threads`` (its thread variables)."""
    return {**tool_env(), **dict.fromkeys(THREAD_ENV, str(threads))}


def benchlib(
    argv: list[str], socket_path: Path | None, threads: int = 1
) -> subprocess.CompletedProcess:
    env = job_env(threads)
    env.pop(ENV_SOCKET, None)
    if socket_path is not None:
        env[ENV_SOCKET] = str(socket_path)
    return subprocess.run([benchlib_exe(), *argv], env=env, text=True, capture_output=True)


@pytest.fixture(scope="module")
def fresh_run(mnist_store, smoke_split, smoke_config, tmp_path_factory) -> tuple[dict, Path]:
    """A LIGHTYEAR smoke cell run as the workflow runs it: a fresh `benchlib run` process."""
    from benchlib.configuration.config import Cell

    spec = smoke_config.cell_spec(Cell("smoke", "ana", "lightyear", 1, 0)).to_dict()
    out = tmp_path_factory.mktemp("fresh")
    done = benchlib(run_argv(spec, mnist_store, smoke_split, out), None)
    assert done.returncode == 0, done.stderr
    assert "forked" not in done.stderr
    return spec, out


def test_forked_cell_writes_the_bytes_of_a_fresh_process(
    server, fresh_run, mnist_store, smoke_split, tmp_path
):
    spec, fresh = fresh_run
    done = benchlib(run_argv(spec, mnist_store, smoke_split, tmp_path), server[1])
    assert done.returncode == 0, done.stderr
    assert "(forked from a warm server)" in done.stderr
    assert (tmp_path / "metrics.json").read_bytes() == (fresh / "metrics.json").read_bytes()
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["forked_from"] == server[0].pid
    assert timing["process_cpu_seconds"] > 0
    assert "forked_from" not in json.loads((fresh / "timing.json").read_text())
    assert psutil.Process(server[0].pid).children() == []  # reaped before the client returned


def test_a_forked_cell_resumes_to_the_same_bytes(
    server, fresh_run, mnist_store, smoke_split, tmp_path
):
    spec, fresh = fresh_run
    argv = run_argv(spec, mnist_store, smoke_split, tmp_path)
    first = benchlib([*argv, "--stop-after", "1"], server[1])
    assert first.returncode == 0 and not (tmp_path / "metrics.json").exists()
    assert list((tmp_path / "ck").iterdir()), "no round checkpoint to resume from"
    second = benchlib(argv, server[1])
    assert second.returncode == 0, second.stderr
    assert "resum" in second.stderr
    assert (tmp_path / "metrics.json").read_bytes() == (fresh / "metrics.json").read_bytes()


def test_two_clients_at_once_through_the_wrapper(fresh_run, mnist_store, smoke_split, tmp_path):
    spec, fresh = fresh_run
    one, two = tmp_path / "one", tmp_path / "two"
    quoted = [" ".join(f"'{a}'" for a in [benchlib_exe(), *run_argv(spec, mnist_store,
              smoke_split, out)]) for out in (one, two)]  # fmt: skip
    script = f"{quoted[0]} 2> {one}.log & {quoted[1]} 2> {two}.log; wait %1 && exit 7"
    done = benchlib(["forkserver", "--", "sh", "-c", script], None)
    assert done.returncode == 7, done.stderr  # the command's own status comes back
    assert "fork server" in done.stderr and "is ready" in done.stderr
    for out in (one, two):
        assert "(forked from a warm server)" in Path(f"{out}.log").read_text()
        assert (out / "metrics.json").read_bytes() == (fresh / "metrics.json").read_bytes()


def test_an_unreachable_server_leaves_the_cell_to_its_own_process(
    fresh_run, mnist_store, smoke_split, tmp_path
):
    spec, fresh = fresh_run
    done = benchlib(run_argv(spec, mnist_store, smoke_split, tmp_path), tmp_path / "none.sock")
    assert done.returncode == 0, done.stderr
    assert "not reachable" in done.stderr and "runs in this process" in done.stderr
    assert (tmp_path / "metrics.json").read_bytes() == (fresh / "metrics.json").read_bytes()


@pytest.mark.parametrize(
    ("kernels", "threads", "reason"),
    [("native", 1, "cpu_kernels differs"), ("portable", 2, "$OMP_NUM_THREADS differs")],
)
def test_a_cell_the_server_cannot_match_is_refused_and_runs_alone(
    server, smoke_cell_spec, mnist_store, smoke_split, tmp_path, kernels, threads, reason
):
    spec = smoke_cell_spec("fedavg", "sfa", 0)
    spec["training"] = {**spec["training"], "cpu_kernels": kernels, "rounds": 1}
    done = benchlib(run_argv(spec, mnist_store, smoke_split, tmp_path), server[1], threads)
    assert done.returncode == 0, done.stderr
    assert f"refused the cell ({reason}" in done.stderr
    assert "forked_from" not in json.loads((tmp_path / "timing.json").read_text())
    provenance = json.loads((tmp_path / "metrics.json").read_text())["provenance"]
    assert provenance["cpu_kernels"]["setting"] == kernels


def test_a_bad_command_is_one_error_line(tmp_path):
    for argv, words in (
        (["forkserver"], "needs a command after --"),
        (["forkserver", "--", "no-such-command-here"], "is not a command on PATH"),
    ):
        done = benchlib(argv, None)
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [f"error: {done.stderr.split('error: ')[1]}"
                                                    .strip()]  # fmt: skip
        assert words in done.stderr


def long_client(server, smoke_cell_spec, store, split, out: Path) -> tuple[subprocess.Popen, Path]:
    """A client whose cell runs many rounds; returned once its first round is done."""
    spec = smoke_cell_spec("fedavg", "sfa", 0)
    spec["training"] = {**spec["training"], "rounds": 500}
    env = {**job_env(), ENV_SOCKET: str(server[1])}
    log = out / "cell.log"
    with log.open("w") as stderr:
        client = subprocess.Popen([benchlib_exe(), *run_argv(spec, store, split, out)], env=env,
                                  stderr=stderr, stdout=subprocess.DEVNULL)  # fmt: skip
    while "round 1/500 done" not in log.read_text():
        assert client.poll() is None, log.read_text()
        time.sleep(0.2)
    return client, log


def test_a_terminated_client_ends_its_cell(server, smoke_cell_spec, mnist_store, smoke_split,
                                           tmp_path):  # fmt: skip
    client, log = long_client(server, smoke_cell_spec, mnist_store, smoke_split, tmp_path)
    assert len(psutil.Process(server[0].pid).children()) == 1
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=120) == 128 + signal.SIGTERM, log.read_text()
    assert psutil.Process(server[0].pid).children() == []  # reported only once reaped
    assert not (tmp_path / "metrics.json").exists()


def test_a_killed_client_takes_its_cell_with_it(server, smoke_cell_spec, mnist_store,
                                                smoke_split, tmp_path):  # fmt: skip
    client, _ = long_client(server, smoke_cell_spec, mnist_store, smoke_split, tmp_path)
    (child,) = psutil.Process(server[0].pid).children()
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=120)
    psutil.wait_procs([child], timeout=120)  # the server SIGKILLs it on the client's EOF
    assert not child.is_running()
    assert not (tmp_path / "metrics.json").exists()
    assert os.path.exists(server[1])  # the server itself goes on


# ----------------------------------------------------------------- hostile or careless clients
def raw_client(socket_path: Path, payload: bytes, fds: bool = True) -> socket.socket:
    """A client that sends ``payload`` (framed as the protocol frames a message) with its
    standard streams, as a broken or hostile client would."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path))
    data = len(payload).to_bytes(4, "big") + payload
    sent = socket.send_fds(sock, [data], [0, 1, 2]) if fds else sock.send(data)
    if sent < len(data):  # an empty send to a server that has answered and closed: EPIPE
        sock.sendall(data[sent:])
    return sock


def client_fingerprint() -> dict:
    """The fingerprint a `benchlib run` of this test's jobs sends (portable kernels)."""
    code = (
        "import json; from benchlib.primitives import cpu_kernels; "
        "from benchlib.commands.forkserver import protocol;"
        " cpu_kernels.apply('portable'); print(json.dumps(protocol.fingerprint('portable')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=job_env(), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def assert_still_serving(server, spec, store, split, out: Path) -> None:
    done = benchlib(run_argv(spec, store, split, out), server[1])
    assert done.returncode == 0, done.stderr
    assert "(forked from a warm server)" in done.stderr
    assert server[0].poll() is None


@pytest.mark.parametrize(
    ("payload", "answer"),
    [
        (b"[1, 2, 3]", "the request is a JSON list, not an object"),
        (b'{"argv": "run", "cwd": "/", "env": {}, "fingerprint": {}}', "argv is not a list"),
        (b'{"argv": [], "cwd": "/no/such/folder", "env": {}, "fingerprint": {}}', "cwd is not"),
        (b'{"argv": [], "cwd": "/", "env": {"A": 1}, "fingerprint": {}}', "env is not a mapping"),
        (b'{"argv": [], "cwd": "/", "env": {}, "fingerprint": []}', "fingerprint is not an"),
        (b"[" * 100_000 + b"]" * 100_000, None),  # nested too deeply: dropped unanswered
        (b"\xff\xfe not json", None),
    ],
    ids=["list", "argv", "cwd", "env", "fingerprint", "deep", "bytes"],
)
def test_a_malformed_request_is_refused_and_the_server_goes_on(
    server, payload, answer, smoke_cell_spec, mnist_store, smoke_split, tmp_path
):
    from benchlib.commands.forkserver import protocol

    with raw_client(server[1], payload) as sock:
        reply, _ = protocol.receive(sock)  # waits for the server's answer or its close
    assert reply == (None if answer is None else {"refused": reply["refused"]})
    if answer is not None:
        assert answer in reply["refused"]
    spec = smoke_cell_spec("fedavg", "sfa", 0)
    spec["training"] = {**spec["training"], "rounds": 1}
    assert_still_serving(server, spec, mnist_store, smoke_split, tmp_path)


def test_a_client_that_dies_right_after_sending_does_not_end_the_server(
    server, smoke_cell_spec, mnist_store, smoke_split, tmp_path
):
    spec = smoke_cell_spec("fedavg", "sfa", 0)
    spec["training"] = {**spec["training"], "rounds": 500}
    argv = run_argv(spec, mnist_store, smoke_split, tmp_path / "gone")
    request = {"argv": argv, "cwd": str(tmp_path), "env": job_env(),
               "fingerprint": client_fingerprint()}  # fmt: skip
    for _ in range(3):  # whether the server answers before or after the close: it goes on
        raw_client(server[1], json.dumps(request).encode()).close()
    spec["training"]["rounds"] = 1
    assert_still_serving(server, spec, mnist_store, smoke_split, tmp_path / "next")
    orphans = psutil.Process(server[0].pid).children()
    psutil.wait_procs(orphans, timeout=120)  # the server SIGKILLs the cells of gone clients
    assert psutil.Process(server[0].pid).children() == []


def test_a_long_tmpdir_starts_no_server_and_says_so_in_one_line(tmp_path):
    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    env = {**job_env(), "TMPDIR": str(long_tmp)}
    env.pop(ENV_SOCKET, None)
    command = [benchlib_exe(), "forkserver", "--", sys.executable, "-c",
               f"import os; print(os.environ.get('{ENV_SOCKET}'))"]  # fmt: skip
    done = subprocess.run(command, env=env, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"  # no server named to the command: cells run alone
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert "is longer than the 107 bytes a Unix socket allows ($TMPDIR is long" in done.stderr
    assert "Traceback" not in done.stderr and list(long_tmp.iterdir()) == []


def test_the_server_ends_with_a_killed_wrapper(tmp_path):
    command = [benchlib_exe(), "forkserver", "--", sys.executable, "-c",
               "import sys; print('started', flush=True); sys.stdin.read()"]  # fmt: skip
    env = job_env()
    env.pop(ENV_SOCKET, None)
    wrapper = subprocess.Popen(
        command, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert wrapper.stdout.readline() == "started\n"  # the wrapped command runs (the server too)
    line = ""
    while "is ready" not in line:  # waits for the server's line (or the end of the output)
        line = wrapper.stderr.readline()
        assert line, "the fork server did not start"
    server_pid = int(line.split("fork server ")[1].split()[0])
    server = psutil.Process(server_pid)
    (command_process,) = [p for p in psutil.Process(wrapper.pid).children() if p != server]
    wrapper.kill()  # no chance to stop its server
    wrapper.wait()
    gone, alive = psutil.wait_procs([server], timeout=120)
    assert server in gone and not alive, "the fork server outlived its killed wrapper"
    wrapper.stdin.close()  # the wrapped command ends when its stdin does
    psutil.wait_procs([command_process], timeout=120)
    assert "the wrapper that started this server is gone" in wrapper.stderr.read()
