"""Source views: splicing and comment blanking keep every index and line number in place."""

from __future__ import annotations

from graders.compile.source_text import SourceViews, splice


def test_splice_tracks_physical_lines() -> None:
    text, lines = splice("a\\\nb\nc")
    assert text == "ab\nc"
    assert lines == [1, 2, 2, 3]


def test_views_keep_length_and_newlines() -> None:
    source = 'int a; // one\n/* two\nthree */ char* s = "/* no */";\nchar c = \'"\';\n'
    views = SourceViews.of(source)
    for view in (views.code, views.bare, views.quoteless):
        assert len(view) == len(views.spliced) and view.count("\n") == source.count("\n")
    assert "one" not in views.code and "three" not in views.code
    assert '"/* no */"' in views.code
    assert "no" not in views.bare
    assert [line.number for line in views.lines(views.code)] == [1, 2, 3, 4, 5]


def test_raw_strings_and_digit_separators() -> None:
    views = SourceViews.of('auto s = R"x(/* )x"; int n = 1\'000; // c\nint m;\n')
    assert "/* )x" in views.code and "// c" not in views.code
    assert views.code.endswith("int m;\n")
