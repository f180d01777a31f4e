"""logcount/core/batch_line.py: the stage's batch and closing lines read back as written."""


from logcount.core.batch_line import BatchLine, ClosingLine, parse_batch_line, parse_closing_line


def test_the_batch_line_reads_as_it_did_and_parses_back():
    b = BatchLine(7, ((0, 10, 20), (3, 5, 5)), 12, 1, 2, 3, 0.1234, 0.0185)
    text = b.text()
    assert text == ("batch 7 committed: offsets p0:10-20 p3:5-5; records 12, malformed 1, late 2,"
                    " minutes touched 3, spark 0.12s, commit 0.018s")
    got = parse_batch_line(f"2026-11-26 05:40:00,123 INFO logcount.stage: {text}")
    assert got == BatchLine(7, ((0, 10, 20), (3, 5, 5)), 12, 1, 2, 3, 0.12, 0.018)


def test_a_batch_that_read_nothing_and_other_lines():
    b = BatchLine(1, (), 0, 0, 0, 0, 0.0, 0.0)
    assert "offsets -;" in b.text() and parse_batch_line(b.text()) == b
    assert parse_batch_line("WARN something else, records 99,") is None
    assert parse_closing_line("batch 1 committed: offsets -;") is None


def test_the_closing_line():
    c = ClosingLine(4, 1000, 2.0)
    assert c.text() == ("stage stopped after 4 batches: 1000 records committed in 2.00s from the "
                        "first plan to the last commit (500 records/s)")
    assert parse_closing_line(c.text()) == c
    assert "(0 records/s)" in ClosingLine(0, 0, 0.0).text()
