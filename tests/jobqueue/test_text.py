"""Cleaning and cutting what tasks produce, as pure logic (Hypothesis), then through run_job."""

import re
from contextlib import nullcontext

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobqueue import TaskRegistry
from jobqueue.execution import run_job
from jobqueue.text import (
    REPLACEMENT,
    TextLimits,
    clean,
    cut_end,
    cut_middle,
    mask_addresses,
    unstorable,
)
from tests.jobqueue.test_execution import claimed

ANY_TEXT = st.text(st.characters(), max_size=3000)  # surrogates and NUL included


@given(ANY_TEXT)
@example("\x00")
@example("\ud800")
@example("a\udfffb\x00c")
def test_cleaned_text_can_always_be_stored(text: str) -> None:
    cleaned = clean(text)
    assert not unstorable(cleaned)
    cleaned.encode()  # raises on a surrogate
    assert len(cleaned) == len(text)
    assert cleaned == text or REPLACEMENT in cleaned


@given(ANY_TEXT, st.integers(min_value=64, max_value=4000))
@example("é" * 2000, 64)
@example("\U0001f600" * 1000, 65)
def test_cut_text_fits_its_cap_in_utf8_and_says_how_much_went(text: str, cap: int) -> None:
    """kills: text-cut-ignores-cap"""
    stored = mask_addresses(clean(text))
    original = len(stored.encode())
    for cut in (cut_end, cut_middle):
        result = cut(text, cap)
        assert len(result.encode()) <= cap
        if original <= cap:
            assert result == stored
            continue
        match = re.search(r"\[\.\.\. ([\d,]+) (?:more )?bytes cut(?: \.\.\.)?\]\n?", result)
        assert match is not None, result
        start = match.start() - 1  # the space (cut_end) or newline (cut_middle) before it
        kept = result[:start] + result[match.end() :]
        assert int(match.group(1).replace(",", "")) == original - len(kept.encode())


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (
            "550 5.1.1 <gabriel.souza@demo.example>: Recipient address rejected",
            "550 5.1.1 <g***@demo.example>: Recipient address rejected",
        ),
        ("refused recipient ana+hr@mail.acme.com.br", "refused recipient a***@mail.acme.com.br"),
        ("two: x@a.io, Y_z@b.example", "two: x***@a.io, Y***@b.example"),
        ("no address: user@localhost, 10 @ 3.5, a@b", "no address: user@localhost, 10 @ 3.5, a@b"),
        ("already g***@demo.example", "already g***@demo.example"),
    ],
)
def test_addresses_in_stored_text_are_masked_to_a_letter_and_the_domain(
    text: str, masked: str
) -> None:
    assert mask_addresses(text) == masked
    assert cut_end(text, 2048) == masked
    assert cut_middle("Traceback\n" + text, 2048) == "Traceback\n" + masked


def test_a_cut_traceback_keeps_its_first_and_last_lines() -> None:
    traceback = "Traceback (most recent call last):\n" + "  frame\n" * 100_000 + "ValueError: x"
    result = cut_middle(traceback, 32 * 1024)
    assert result.startswith("Traceback (most recent call last):")
    assert result.endswith("ValueError: x")
    assert "bytes cut ...]" in result


def hostile_tasks() -> TaskRegistry:
    tasks = TaskRegistry()

    @tasks.task("nul")
    def nul() -> None:
        raise ValueError("before\x00after")

    @tasks.task("surrogate")
    def surrogate() -> None:
        raise ValueError("lone \ud800 surrogate")

    @tasks.task("huge_message")
    def huge_message() -> None:
        raise ValueError("m" * 5_000_000)

    @tasks.task("deep_traceback")
    def deep_traceback() -> None:
        def recurse(depth: int) -> None:
            if depth == 0:
                raise RecursionError("deep")
            recurse(depth - 1)

        recurse(900)

    @tasks.task("unreadable")
    def unreadable() -> None:
        class Unreadable(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no message for you")

        raise Unreadable

    return tasks


@pytest.mark.parametrize(
    "task", ["nul", "surrogate", "huge_message", "deep_traceback", "unreadable"]
)
def test_what_a_hostile_task_reports_is_clean_and_within_its_caps(task: str) -> None:
    limits = TextLimits(error_bytes=2048, traceback_bytes=32 * 1024)
    result = run_job(claimed(task, {}), hostile_tasks(), "w1", nullcontext, limits)
    assert result.outcome == "failed"
    assert result.error is not None and result.traceback is not None
    for text, cap in ((result.error, 2048), (result.traceback, 32 * 1024)):
        assert not unstorable(text)
        assert len(text.encode()) <= cap
    if task == "huge_message":
        assert result.error.startswith("ValueError: mmm")
        assert result.error.endswith("more bytes cut]")
    if task == "unreadable":
        assert result.error == "Unreadable: <the exception's message could not be read>"
