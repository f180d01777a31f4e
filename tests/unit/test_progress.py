import io

from logcount.core.progress import Progress


def test_progress_renders_fraction_and_counts():
    p = Progress(1000, "run", stream=io.StringIO(), enabled=True)
    p.advance(250)
    assert "25%" in p.render() and "250/1,000 records" in p.render()


def test_progress_is_silent_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(10, "run", stream=out)
    p.advance(10)
    p.close()
    assert out.getvalue() == ""


def test_progress_draws_on_a_terminal():
    out = io.StringIO()
    p = Progress(10, "run", stream=out, enabled=True)
    p.advance(10)
    p.close()
    assert "100%" in out.getvalue() and out.getvalue().endswith("\n")
