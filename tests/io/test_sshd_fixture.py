"""Without sshd installed the SSH tests fail with the line that installs it, not with a traceback from deep in a
fixture (item 14)."""

from __future__ import annotations

import pytest
import sshd


def test_missing_sshd_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(sshd.shutil, "which", lambda name: None)
    monkeypatch.setattr(sshd, "SSHD_CANDIDATES", ("/nonexistent/sbin/sshd",))
    with pytest.raises(RuntimeError, match=r"OpenSSH sshd is not installed.*apt-get install -y openssh-server"):
        sshd.find_sshd()
