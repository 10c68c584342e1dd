"""Student-visible text: lenient, clean, no host paths, capped."""

from __future__ import annotations

from graders.text import hide_host_paths, visible_text


def test_bytes_that_are_not_utf8_are_replaced_not_refused() -> None:
    assert visible_text(b"warning: \xff\xfe here") == "warning: \ufffd\ufffd here"


def test_escape_bell_and_other_controls_are_removed_but_lines_and_tabs_stay() -> None:
    text = visible_text("a\x1b[31mred\x1b[0m\x07\tb\r\nc\x00d\x9b")
    assert text == "a[31mred[0m\tb\ncd"


def test_host_paths_keep_only_their_last_part() -> None:
    raw = (
        'File "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/cupy/_core/core.pyx", '
        "line 3 in /tmp/kg-sandbox-abc123/run.py and /work/main/var/kernelgrader.sqlite"
    )
    shown = hide_host_paths(raw)
    assert "/root" not in shown and "site-packages" not in shown and "/tmp" not in shown
    assert (
        '".../core.pyx"' in shown and ".../run.py" in shown and ".../kernelgrader.sqlite" in shown
    )


def test_relative_names_and_fractions_are_left_alone() -> None:
    text = "submission.cu(12): error: 3/4 of a/b is not a path"
    assert hide_host_paths(text) == text


def test_long_text_is_cut_with_a_note_that_says_how_long_it_was() -> None:
    shown = visible_text(b"x" * 10_000_000, limit=1000)
    assert shown.startswith("x" * 1000)
    assert "10000000 bytes" in shown and len(shown) < 1200


def test_a_multibyte_character_is_never_cut_in_half() -> None:
    shown = visible_text("é" * 600, limit=1001)
    assert shown.split("\n")[0] == "é" * 500
