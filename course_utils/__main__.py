"""Command-line entry points: `python -m course_utils doctor` and `python -m course_utils bench`."""

import sys


def main(argv: list[str]) -> int:
    commands = {"doctor": "is this machine ready for the course?", "bench": "time every lesson"}
    if not argv or argv[0] not in commands:
        lines = "\n".join(f"  python -m course_utils {name:7} {text}" for name, text in commands.items())
        print(f"Usage:\n{lines}", file=sys.stderr)
        return 2
    if argv[0] == "doctor":
        from course_utils.course import doctor

        return doctor.run()
    from course_utils.course import bench

    return bench.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
