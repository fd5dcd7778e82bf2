"""Log set-up for worker processes: readable text, or JSON lines for log shippers."""

import json
import logging
import sys
from datetime import UTC, datetime

from jobqueue.telemetry import TraceContextFilter

# Fields a record may carry (``extra=``) that JSON lines expose as keys of their own.
STRUCTURED_FIELDS = (
    "job_id",
    "task",
    "queue",
    "attempt",
    "duration",
    "outcome",
    "worker",
    "trace_id",
    "span_id",
)


class JsonLinesFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in STRUCTURED_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """One readable line; the trace and span ids follow when the record was made in a span."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            span_id = getattr(record, "span_id", None)
            line += f" trace_id={trace_id}" + (f" span_id={span_id}" if span_id else "")
        return line


def configure_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLinesFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(TraceContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
