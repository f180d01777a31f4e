"""logcount/core/records.py: the output and DLQ records keep their bytes, and decode back."""

import base64
import json

import pytest

from logcount.core.records import (
    DeadLetter,
    MinuteTotal,
    SeriesEncoder,
    TotalEncoder,
    decode_dead_letter,
    decode_total,
    encode_dead_letter,
    encode_total,
)


def test_the_output_record_keeps_its_bytes():
    key, value = encode_total(MinuteTotal("2017-07-30 14:09:00", 27, "ERROR"))
    assert key == b"2017-07-30 14:09:00"
    assert value == b'{"log_time": "2017-07-30 14:09:00", "log_count": 27, "level": "ERROR"}'
    assert decode_total(value) == MinuteTotal("2017-07-30 14:09:00", 27, "ERROR")


@pytest.mark.parametrize("value", [b"", b"not json", b"5", b"null", b"[]", b'{"log_time": "x"}',
                                   b'{"log_time": "x", "log_count": "many"}', None])
def test_anything_else_is_a_value_error(value):
    with pytest.raises(ValueError):
        decode_total(value)


def test_the_dlq_record_keeps_its_bytes_and_round_trips():
    d = DeadLetter("logs", 3, 41, "invalid timestamp", 300, b"\xff2017 bad \x00line")
    key, value = encode_dead_letter(d)
    assert key == b"logs/3/41"
    v = json.loads(value)
    assert list(v) == ["topic", "partition", "offset", "reason", "raw_length",
                       "raw_prefix_base64", "raw_prefix_text"]
    assert base64.b64decode(v["raw_prefix_base64"]) == d.raw_prefix
    assert v["raw_prefix_text"] == "\ufffd2017 bad \x00line"
    assert value.startswith(b'{"topic": "logs", "partition": 3, "offset": 41, ')
    assert decode_dead_letter(value) == d


def test_a_grouped_record_keys_by_minute_and_values_and_adds_dims():
    total = MinuteTotal("2017-07-30 14:09:00", 3, "*",
                        (("host", 'web|1 "x"\n'), ("ns", "caf\u00e9"), ("level", "")))
    key, value = encode_total(total)
    assert key == '["2017-07-30 14:09:00","web|1 \\"x\\"\\n","caf\u00e9",""]'.encode()
    assert json.loads(key) == ["2017-07-30 14:09:00", 'web|1 "x"\n', "caf\u00e9", ""]
    assert value == ('{"log_time": "2017-07-30 14:09:00", "log_count": 3, "level": "*", '
                     '"dims": {"host": "web|1 \\"x\\"\\n", "ns": "caf\u00e9", "level": ""}}'
                     ).encode()
    back = decode_total(value)
    assert back == total and back.dims_dict == {"host": 'web|1 "x"\n', "ns": "caf\u00e9",
                                                "level": ""}
    # distinct values are distinct keys, whatever they hold
    keys = {encode_total(MinuteTotal("m", 1, "*", (("a", a), ("b", b))))[0]
            for a, b in [("x|y", "z"), ("x", "y|z"), ("x", "y,z"), ("x,y", "z")]}
    assert len(keys) == 4


def test_an_ungrouped_record_decodes_without_dims():
    assert decode_total(b'{"log_time": "m", "log_count": 1, "level": "ERROR"}').dims == ()
    with pytest.raises(ValueError):
        decode_total(b'{"log_time": "m", "log_count": 1, "dims": ["x"]}')


VALUES = ["web-1", "", "a|b", 'q"uote', "new\nline", "\x00nul", "café", "€" * 90, "\\", "/",
          "\u2028", "😀", "__other__", "x" * 255]


def test_the_series_encoder_writes_encode_totals_bytes():
    names = ("host", "ns")
    enc = SeriesEncoder("ERROR,WARN", names)
    for i, a in enumerate(VALUES):
        b = VALUES[-1 - i]
        for minute, n in (("2017-07-30 14:09:00", 1), ("0001-01-01 00:00:00", 10**15)):
            want = encode_total(MinuteTotal(minute, n, "ERROR,WARN", (("host", a), ("ns", b))))
            assert enc.encode(minute, (a, b), n) == want
            assert enc.encode(minute, (a, b), n) == want  # and from its cache
    assert len(enc.series) == len(VALUES)
    one = SeriesEncoder("*", ("level",))
    assert one.encode("2017-07-30 14:09:00", ("INFO",), 3) == encode_total(
        MinuteTotal("2017-07-30 14:09:00", 3, "*", (("level", "INFO"),)))


def test_the_series_encoder_encodes_a_batch_in_runs_of_minutes_with_the_same_bytes():
    enc = SeriesEncoder("ERROR", ("host", "ns"))
    totals = [(m, (a, VALUES[-1 - i]), 10 * m + i) for m in (3, 3, 7, 3)
              for i, a in enumerate(VALUES)]
    got = enc.encode_all(totals, lambda m: f"2017-07-30 14:0{m}:00")
    assert got == [encode_total(MinuteTotal(f"2017-07-30 14:0{m}:00", n, "ERROR",
                                            (("host", v[0]), ("ns", v[1]))))
                   for m, v, n in totals]
    assert len(enc.minutes) == 2 and len(enc.series) == len(VALUES)


@pytest.mark.parametrize("level", ["ERROR", "ERROR,WARN", "*", 'q"uote', "café", "€\u2028😀", "\\"])
def test_the_total_encoder_writes_encode_totals_bytes(level):
    enc = TotalEncoder(level)
    totals = [(m, n) for m in (3, 3, 7, 0, 3) for n in (0, 1, 27, 10**15, 2**63 - 1)]
    text = {0: "0001-01-01 00:00:00", 3: "2017-07-30 14:09:00", 7: "9999-12-31 23:59:00"}
    for _ in range(2):  # and again from its cache
        assert enc.encode_all(totals, text.__getitem__) == [
            encode_total(MinuteTotal(text[m], n, level)) for m, n in totals]
    assert len(enc.minutes) == 3


def test_the_total_encoder_reads_each_minute_s_text_once_and_holds_a_bounded_number(monkeypatch):
    import logcount.core.records as records
    monkeypatch.setattr(records, "_MINUTES_HELD", 4)
    asked = []
    enc = TotalEncoder("ERROR")

    def text(m):
        asked.append(m)
        return f"2017-07-30 14:0{m}:00"

    enc.encode_all([(1, 5), (2, 5), (1, 6)], text)
    enc.encode_all([(2, 7), (1, 8)], text)
    assert asked == [1, 2]
    enc.encode_all([(m, 1) for m in range(3, 9)], text)
    assert len(enc.minutes) <= 4
    assert enc.encode_all([(1, 9)], text) == [
        encode_total(MinuteTotal("2017-07-30 14:01:00", 9, "ERROR"))]
