"""transformers' "Loading weights" bar stays off while eaglekit loads a model, and only then (page 09 showed it)."""

from __future__ import annotations


def test_loading_a_target_shows_no_bar_and_leaves_the_setting_as_it_was(trained, capfd):
    from transformers.utils import logging as hf_logging

    from eaglekit.analysis.acceptance.target import load_target_model

    hf_logging.enable_progress_bar()
    try:
        load_target_model(trained.target("k2"))
        out, err = capfd.readouterr()
        assert "Loading weights" not in out + err
        assert hf_logging.is_progress_bar_enabled()      # the user's setting, not switched off for good
        hf_logging.disable_progress_bar()
        load_target_model(trained.target("k2"))
        assert not hf_logging.is_progress_bar_enabled()  # nor switched on
    finally:
        hf_logging.enable_progress_bar()

