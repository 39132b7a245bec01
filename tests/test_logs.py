"""kasir.kit.logs: one JSON object per line, with the time as datetime writes it and the request's fields."""

from __future__ import annotations

import json
import logging
import random
from datetime import UTC, datetime

from kasir.kit.logs import JsonFormatter, annotate_request, end_request_fields, start_request_fields


def test_time_is_written_as_datetime_isoformat_writes_it():
    formatter = JsonFormatter()  # one formatter for every line: it keeps the text of the last second
    record = logging.LogRecord("kasir.test", logging.INFO, __file__, 1, "at a time", (), None)
    randomly = random.Random(3)
    for _ in range(20000):
        record.created = created = 1_763_884_800 + randomly.random() * 10_000_000
        written = json.loads(formatter.format(record))["time"]
        assert written == datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


def test_a_line_has_the_extras_and_not_the_record_internals():
    record = logging.LogRecord("kasir.test", logging.INFO, __file__, 1, "paid %s", ("now",), None)
    record.transaction_id = "CARD1"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "paid now"
    assert line["transaction_id"] == "CARD1"
    assert line["level"] == "info"
    assert "args" not in line
    assert "pathname" not in line


def test_uvicorn_colour_copy_of_a_message_is_left_out():
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started server process [%d]", (7,), None)
    record.color_message = "Started server process [\x1b[36m%d\x1b[0m]"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "Started server process [7]"
    assert "color_message" not in line


def test_annotations_go_to_the_current_request_only():
    annotate_request(ignored="outside any request")  # no request: nothing to annotate, no error
    fields, token = start_request_fields()
    try:
        annotate_request(transaction_id="CARD1", merchant_id="MCH1")
    finally:
        end_request_fields(token)
    assert fields == {"transaction_id": "CARD1", "merchant_id": "MCH1"}
    annotate_request(after="the request")
    assert "after" not in fields
