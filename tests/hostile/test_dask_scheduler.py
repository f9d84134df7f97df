"""Hostile Dask schedulers (issue 23): a "scheduler" on 127.0.0.1 that answers the handshake with a pickle,
an HTTP port, random bytes, a 3 GiB frame, silence. Each ends in one line and exit 2 within the deadline and
1 GiB of address space, and no pickle runs; a real scheduler still works, over tcp:// and over TLS."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import torch
from bounded_cli import run_limited
from fake_schedulers import FakeScheduler

from eaglekit.core.errors import InputError
from eaglekit.io.scheduler import (HANDSHAKE_LIMIT, SchedulerError, connect_scheduler, parse_address,
                                   probe_scheduler, tls_security)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two one-tensor targets: enough for ``drift --full`` to reach the scheduler."""
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("pair")
    for name, seed in (("a", 0), ("b", 1)):
        (root / name).mkdir()
        gen = torch.Generator().manual_seed(seed)
        save_file({"model.layers.0.mlp.up_proj.weight": torch.randn(8, 64, generator=gen).bfloat16()},
                  str(root / name / "model.safetensors"))
    return root / "a", root / "b"


def test_distributed_itself_runs_the_pickled_handshake(tmp_path):
    """The attack is real: distributed's own connect() unpickles the fake scheduler's handshake."""
    from distributed.comm.core import connect

    marker = tmp_path / "ran"

    async def handshake(address):
        comm = await connect(address, timeout=5)
        await comm.close()

    with FakeScheduler("pickle", marker=marker) as s:
        asyncio.run(handshake(s.address))
    assert marker.exists()


@pytest.mark.parametrize("mode,message", [
    ("pickle", "answered the handshake with a pickled object: eaglekit never unpickles"),
    ("http", "does not speak Dask's protocol: its first answer announces"),
    ("random", "does not speak Dask's protocol: its first answer announces"),
    ("bigframe", "announces 3,221,225,472 bytes"),
    ("silent", "did not answer Dask's handshake in time (--timeout)"),
    ("honest", "did not complete its handshake within 3 s (--timeout)"),  # passes the check, then silent
])
def test_drift_refuses_a_hostile_scheduler_in_one_line(pair, tmp_path, mode, message):
    marker = tmp_path / "ran"
    with FakeScheduler(mode, marker=marker) as s:
        r = run_limited("drift", str(pair[0]), str(pair[1]), "--full", "--scheduler", s.address, "--timeout", "3",
                        tmp=tmp_path)
    assert r.rc == 2 and len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith("eaglekit drift: error: ") and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not marker.exists()
    if mode == "http":
        assert "an HTTP server answered" in r.stderr


def test_a_scheduler_that_passes_the_check_then_stays_silent_is_bounded_by_the_deadline():
    """distributed's own handshake has no deadline; eaglekit's covers it (--timeout 2 -> an error)."""
    with FakeScheduler("honest") as s:
        with pytest.raises(SchedulerError, match="did not complete its handshake within 2 s"):
            connect_scheduler(s.address, timeout=2)


def test_the_check_reads_at_most_the_handshake_limit(tmp_path):
    with FakeScheduler("bigframe") as s:
        with pytest.raises(SchedulerError, match="a Dask handshake is about 100"):
            probe_scheduler(parse_address(s.address), deadline=time.monotonic() + 5)
    assert HANDSHAKE_LIMIT <= 64 * 1024


def test_a_closed_port_is_one_line(pair, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        r = run_limited("drift", str(pair[0]), str(pair[1]), "--full", "--scheduler", f"tcp://127.0.0.1:{port}",
                        "--timeout", "3", tmp=tmp_path)
    assert r.rc == 2 and len(r.error_lines) == 1 and "cannot reach the Dask scheduler" in r.stderr, r.stderr


@pytest.mark.parametrize("address,message", [
    ("ws://127.0.0.1:8786", "tcp:// or tls:// only"),
    ("tcp://127.0.0.1:99999", "not a scheduler address"),
    ("tcp://user@127.0.0.1:8786/path", "not a scheduler address"),
])
def test_addresses_eaglekit_does_not_connect_to(address, message):
    with pytest.raises(InputError, match=message):
        parse_address(address)
    assert parse_address("10.0.0.5").url == "tcp://10.0.0.5:8786"
    assert parse_address("tls://[::1]:9000").url == "tls://[::1]:9000"


def test_tls_without_certificates_is_refused_before_connecting(monkeypatch):
    monkeypatch.delenv("DASK_CONFIG", raising=False)
    with pytest.raises(InputError, match="needs the cluster's CA and a client certificate"):
        tls_security()
    with pytest.raises(InputError, match="no such file"):
        tls_security(ca_file="/nonexistent/ca.pem", cert="/nonexistent/c.pem")


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A CA-signed certificate and key (Dask's own temporary security, written out) and a second, foreign one."""
    from distributed import Security

    root = tmp_path_factory.mktemp("tls")
    out = {}
    for name in ("cluster", "foreign"):
        sec = Security.temporary()
        (root / f"{name}.pem").write_text(sec.tls_ca_file)  # self-signed: the CA, the cert and the key's cert
        (root / f"{name}.key").write_text(sec.tls_client_key)
        out[name] = sec
    return root, out


def test_drift_over_tls_with_the_cluster_certificate_and_refusal_of_a_foreign_one(pair, tls_files, tmp_path):
    from distributed import LocalCluster

    root, secs = tls_files
    with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None, protocol="tls",
                      security=secs["cluster"]) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        ok = run_limited("drift", str(pair[0]), str(pair[1]), "--full", "--json", "--scheduler", address,
                         "--tls-ca-file", str(root / "cluster.pem"), "--tls-cert", str(root / "cluster.pem"),
                         "--tls-key", str(root / "cluster.key"), "--timeout", "20", tmp=tmp_path, memory=None)
        foreign = run_limited("drift", str(pair[0]), str(pair[1]), "--full", "--scheduler", address,
                              "--tls-ca-file", str(root / "foreign.pem"), "--tls-cert", str(root / "foreign.pem"),
                              "--tls-key", str(root / "foreign.key"), "--timeout", "5", tmp=tmp_path)
    assert ok.rc == 0, ok.stderr
    assert json.loads(ok.stdout)["where"].startswith("a Dask cluster at tls://127.0.0.1:")
    assert foreign.rc == 2 and len(foreign.error_lines) == 1 and "certificate verify failed" in foreign.stderr, \
        foreign.stderr


def test_tls_settings_come_from_a_dask_config_when_no_option_is_given(tls_files):
    import dask

    root, _ = tls_files
    pem, key = str(root / "cluster.pem"), str(root / "cluster.key")
    with dask.config.set({"distributed.comm.tls.ca-file": pem, "distributed.comm.tls.client.cert": pem,
                          "distributed.comm.tls.client.key": key}):
        security = tls_security()
    assert (security.tls_ca_file, security.tls_client_cert, security.tls_client_key) == (pem, pem, key)
    assert security.require_encryption


def test_tls_options_without_a_tls_scheduler_are_refused(pair, tmp_path, capsys):
    from eaglekit.cli import main

    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert main(["drift", str(pair[0]), str(pair[1]), "--full", "--scheduler", "tcp://127.0.0.1:8786",
                 "--tls-ca-file", str(ca)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apply to a --scheduler tls://HOST:PORT address only" in err
