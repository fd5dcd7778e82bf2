"""A task module that imports in the supervisor but not in its children: it stands for code that
a deploy broke after the supervisor started."""

import sys

if "--child" in sys.argv:
    raise ImportError("tests.support.broken_in_children fails in a queue child on purpose")
