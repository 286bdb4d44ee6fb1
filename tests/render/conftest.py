"""The results the render tests draw, audited once per module, and a real Chromium."""

from __future__ import annotations

import contextlib
import os
import shutil
import time

import pytest

from auditor import audit
from auditor.render.html import render_html

from ..conftest import ROOT
from .render_kit import BROWSER_ARGS, write_many_findings


@pytest.fixture(scope="module")
def seed():
    with contextlib.chdir(ROOT):
        return audit("fixtures/seed_split_brain.jsonl")


@pytest.fixture(scope="module")
def seed_html(seed):
    return render_html(seed)


@pytest.fixture(scope="module")
def lease_timing():
    """Seed 000's 35 s vs 90 s leases: one group at risk, one safe."""
    with contextlib.chdir(ROOT):
        return audit("fixtures/lease_timing_35s_vs_90s.jsonl")


@pytest.fixture(scope="module")
def w1_w2():
    """Seed 000's pause test: W1 paused, its lease expired, W2 reclaimed, W1 woke and called the tool."""
    with contextlib.chdir(ROOT):
        return audit("fixtures/w1_w2_pause_expired_lease.jsonl")


@pytest.fixture(scope="module")
def hostile():
    with contextlib.chdir(ROOT):
        return audit("tests/data/html_escaping.jsonl")


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A log with 10,000 findings in 2,500 incidents, audited and rendered once per module."""
    log = write_many_findings(tmp_path_factory.mktemp("many") / "many.jsonl", 2500, 400)
    result = audit(log)
    started = time.perf_counter()
    text = render_html(result)
    return result, text, time.perf_counter() - started


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        why = ("chromium is not on PATH: the HTML report tests need a real browser; install "
               "Debian's package with 'apt-get install -y chromium' (.ci/run does)")
        if os.environ.get("CI"):  # in CI a missing browser is a failure, never a silent skip
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=BROWSER_ARGS)
        yield b
        b.close()

