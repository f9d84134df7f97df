"""``eaglekit serve-metrics``: the demo's engine for ``eaglekit live``, started from the command line (issue 49)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from eaglekit.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_serve_metrics_prints_its_url_serves_vllm_counters_and_stops_on_ctrl_c():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "eaglekit", "serve-metrics", "--port", "0", "--per-step", "0.6,0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        url = re.fullmatch(r"Replaying vLLM's /metrics for demo/k25-warm at (http://127\.0\.0\.1:\d+)/metrics "
                           r"\(Ctrl-C stops\)\n", first).group(1)
        assert proc.stdout.readline() == f"  eaglekit live {url} --window 2\n"
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
            page = r.read().decode()
        assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="demo/k25-warm"} ' in page
        positions = re.findall(r'vllm:spec_decode_num_accepted_tokens_per_pos_total\{.*position="(\d)"\}', page)
        assert positions == ["0", "1"]  # one counter per draft step given
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == ""


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["serve-metrics", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"eaglekit serve-metrics: error: Cannot listen on 127.0.0.1:{port} (")
    assert err.endswith("pick another port, or 0 for a free one.\n") and err.count("\n") == 1


@pytest.mark.parametrize("per_step", ["0.6,1.5", "0.6,,0.5", "nan"])
def test_per_step_outside_0_to_1_is_a_usage_line(per_step, capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve-metrics", "--per-step", per_step])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected an acceptance from 0 to 1" in err
