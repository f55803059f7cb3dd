#!/usr/bin/python3
"""tests/scripts/test_rooms_check.py catches what it is there for, in a scratch tree written
here: a test directly in tests/server/ or tests/cuda/, a test in a folder named for no room
(tests/cuda/top/: cuda/ has no files of its own), and passes the allowed forms (each room's
folder, server's `top`, a folder below a room's, CMakeLists.txt, files that are no sources).

  test_rooms_check_test.py REPO_ROOT
"""
import pathlib
import sys

from scratch_tree import check_findings

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1
                    else pathlib.Path(__file__).resolve().parents[2])

CODE = ["server/jobs/extract_job.h", "server/state/scheduler.cc", "server/spexd_server.h",
        "server/CMakeLists.txt", "cuda/kernels/spot_kernels.cu", "cuda/host/cuda_backend.h",
        "cuda/CMakeLists.txt", "server/notes/README.md"]
GOOD = ["tests/server/CMakeLists.txt", "tests/server/jobs/extract_job_test.cc",
        "tests/server/jobs/fakes/extract_job_fakes.h", "tests/server/state/null_backend.h",
        "tests/server/top/spexd_server_test.cc", "tests/server/README.md",
        "tests/cuda/CMakeLists.txt", "tests/cuda/kernels/fatbin_images.py",
        "tests/cuda/host/cuda_backend_test.cc"]
EXPECT = [
    ("tests/cuda/stray_test.cc", "directly in tests/cuda/"),
    ("tests/cuda/top/t_test.cc", "top/ is no room of cuda/ (rooms: host, kernels)"),
    ("tests/server/misc/x_test.cc", "misc/ is no room of server/ (rooms: jobs, state, top)"),
    ("tests/server/notes/n_test.cc", "notes/ is no room of server/"),
    ("tests/server/scheduler_test.cc", "directly in tests/server/"),
    ("tests/server/seed.py", "directly in tests/server/"),
]


def main():
    files = {name: "// scratch\n" for name in CODE + GOOD + [where for where, _ in EXPECT]}
    checker = ROOT / "tests" / "scripts" / "test_rooms_check.py"
    failures = check_findings(checker, files, EXPECT, GOOD)
    print("test_rooms_check_test: " + ("PASS" if failures == 0 else f"{failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
