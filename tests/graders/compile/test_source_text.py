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


def test_a_quote_after_a_name_starts_a_literal_as_in_the_preprocessor() -> None:
    # `X'/*'` is the name X and the literal '/*' to NVRTC, not a digit separator and a comment.
    views = SourceViews.of("int c = X'/*';\n#line 1 \"x\"\n// */\n")
    assert "#line 1" in views.code.split("\n")[1]
    assert views.bare.startswith("int c = X'  ';")


def test_numbers_prefixes_and_raw_strings() -> None:
    source = (
        "int a = 1'000'000 + 0x1'F + 1e+5'0;\n"  # digit separators stay inside the number
        "char b = u8'a'; wchar_t w = L'/'; auto s = u8R\"d(/* \n */ )d\";\n"
        "int c = '/*'; // */ still a comment\n"
    )
    views = SourceViews.of(source)
    assert views.code.split("\n")[0] == source.split("\n")[0]
    assert "/* \n */" in views.code  # inside the raw string, not a comment
    assert "still a comment" not in views.code and "'/*'" in views.code
    bare = views.bare.split("\n")
    assert bare[1].startswith("char b = u8' '; wchar_t w = L' '; auto s = u8R\"")


def test_only_ascii_names_and_numbers() -> None:
    # NVRTC takes neither `$` nor `é` into a name or a number: the quote after one starts a
    # literal (`1é'/*'` is 1, é, and the literal '/*').
    views = SourceViews.of("int a = 1é'/*'; int b = 2$'/*';\nint c;\n")
    assert views.code == "int a = 1é'/*'; int b = 2$'/*';\nint c;\n"


def test_a_line_that_starts_inside_a_raw_string_is_no_directive() -> None:
    source = 'auto s = R"(\n#include <x>\n  # define Y\n)"; int a;\n#define Z 1\n'
    views = SourceViews.of(source)
    lines = [line.text for line in views.lines(views.directives)]
    assert lines[0] == 'auto s = R"(' and lines[1].strip() == "" and lines[2].strip() == ""
    assert lines[3].strip() == '"; int a;' and lines[4] == "#define Z 1"
    assert len(views.directives) == len(source)
    assert "#include <x>" in views.code  # the string's text is still there
    # Under C++03 there are no raw strings: `R` is a name, `"("` a string, the lines code.
    old = SourceViews.of(source, raw_strings=False)
    assert [line.text for line in old.lines(old.directives)][1] == "#include <x>"


def test_a_splice_ends_a_raw_string_as_it_does_for_nvrtc() -> None:
    # NVRTC splices lines before it reads a raw string and does not undo it inside one:
    # `)`, a backslash-newline and `"` end the string, and the next line is a directive.
    from graders.compile.pipeline import nvrtc_compile

    source = '__device__ const char s[] = R"(a)\\\n";\n#error reached\n'
    views = SourceViews.of(source)
    assert [line.text for line in views.lines(views.directives)][1] == "#error reached"
    ok, _, log, _ = nvrtc_compile(source, "s.cu", ["--gpu-architecture=sm_90"], {})
    assert not ok and "#error directive: reached" in log
