"""The launcher's command line: `python -m course_utils.launch --processes 2 --devices-per-process 4 SCRIPT`.

The launcher itself lives in `course_utils.multiprocess.launcher`; this module
is its documented entry point, and `course_utils.launch.launch(...)` calls it
from Python (lesson 06 does).
"""

import sys

from course_utils.multiprocess.launcher import EXAMPLE, LaunchError, LaunchFailed, LaunchResult, free_port, launch, main

__all__ = ["EXAMPLE", "LaunchError", "LaunchFailed", "LaunchResult", "free_port", "launch", "main"]

if __name__ == "__main__":
    sys.exit(main())
