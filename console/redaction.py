"""What an HR admin is not shown: the worker processes' names (host, pid) and who among the
platform admins paused a queue (docs/reference/roles.md keeps both for platform admins).

Worker names reach error texts too: the sweeper writes ``LeaseExpired: worker host:pid:abc123
stopped renewing ...``. They have one shape, ``host:pid:xxxxxx`` or ``host:pid:supervisor``
(jobqueue.runner, jobqueue.supervisor), so they can be found in any text, and in a failure
group's pattern, where the digits are blanked to ``#``.
"""

import re

_HOST = r"(?=[^\s:'\"]*[A-Za-z])[^\s:'\"]+"  # a host name has a letter: 14:05:00 is a time
WORKER_NAME = re.compile(
    rf"{_HOST}:\d+:(?:[0-9a-f]{{6}}|supervisor)\b"
    rf"|{_HOST}:#:(?:#|[a-f]{{6}}|supervisor)(?![\w#])"  # blanked: 9f2c1a is #, abcdef stays
)
HIDDEN_WORKER = "(a worker)"


def hide_worker_names(text: str | None) -> str | None:
    return None if text is None else WORKER_NAME.sub(HIDDEN_WORKER, text)
