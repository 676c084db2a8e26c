"""TEMPORARY: the old path of course_utils.communication.hlo, until the notebooks name the new one (removed in this change)."""
from course_utils.communication.hlo import *  # noqa: F401,F403
from course_utils.communication.hlo import __dict__ as _d
globals().update({k: v for k, v in _d.items() if not k.startswith("__")})
