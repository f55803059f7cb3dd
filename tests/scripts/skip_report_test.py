"""scripts/skip_report.py on a real ctest run of a small project made here, with each
kind of skip the suite has: a GTEST_SKIP (ctest's skip expression), scripts exiting 77
(their SKIP line after 2 kB of other output), and a Python unittest module that passes
with a skipped test, a skipped class and two skipped sub-tests, whose lines come after
more output than ctest keeps of a passed test by default. The report must name every
reason, and its count must equal the tests ctest lists as skipped plus the skips unittest
counts inside the passing module.
    skip_report_test.py CMAKE CTEST
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "scripts", "skip_report.py")

UNITTEST_MODULE = '''
import sys
import unittest
sys.stderr.write("x" * 3000 + "\\n")  # before unittest's own lines, on the same stream
class A(unittest.TestCase):
    def test_ok(self):
        pass
    def test_method(self):
        self.skipTest("needs the method's tool")
    def test_sub(self):
        for i in range(3):
            with self.subTest(i=i):
                if i:
                    self.skipTest(f"sub-test {i} needs 'quotes'")
@unittest.skip("the whole class needs a GPU")
class B(unittest.TestCase):
    def test_1(self):
        pass
'''

PROJECT = r'''cmake_minimum_required(VERSION 3.16)
project(skips NONE)
enable_testing()
add_test(NAME gtest_case COMMAND sh -c "printf '[ RUN      ] G.t\n/src/g.cc:12: Skipped\nno CUDA device\n\n[  SKIPPED ] G.t (0 ms)\n'")
set_tests_properties(gtest_case PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
add_test(NAME script_skipped COMMAND sh -c "seq 1 500; echo 'SKIPPED: promtool not found'; exit 77")
add_test(NAME script_skip COMMAND sh -c "echo 'SKIP: no Slurm here'; echo 'log line'; exit 77")
add_test(NAME script_silent COMMAND sh -c "exit 77")
set_tests_properties(script_skipped script_skip script_silent PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME python_module COMMAND @PYTHON@ -m unittest -v mod WORKING_DIRECTORY @DIR@)
add_test(NAME plain COMMAND sh -c "echo fine")
'''


def main(cmake, ctest):
    with tempfile.TemporaryDirectory(prefix="skip-report-test-") as d:
        with open(os.path.join(d, "mod.py"), "w") as f:
            f.write(UNITTEST_MODULE)
        with open(os.path.join(d, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT.replace("@PYTHON@", sys.executable).replace("@DIR@", d))
        build = os.path.join(d, "build")
        subprocess.run([cmake, "-S", d, "-B", build], check=True, capture_output=True)
        junit = os.path.join(build, "junit.xml")
        # The options scripts/test.sh gives ctest.
        run = subprocess.run([ctest, "--output-junit", junit, "--test-output-size-passed",
                              "4194304"], cwd=build, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            return 1
        ctest_skipped = len(re.findall(r"^\s+\d+ - \S+ \(Skipped\)$", run.stdout, re.M))
        with open(os.path.join(build, "Testing", "Temporary", "LastTest.log")) as f:
            inside = sum(int(n) for n in re.findall(r"^OK \(skipped=(\d+)\)$", f.read(), re.M))
        out = subprocess.run([sys.executable, REPORT, junit], capture_output=True, text=True,
                             check=True).stdout
    print(out)
    lines = out.splitlines()
    want_head = (f"Why tests skipped: {ctest_skipped + inside} skips = {ctest_skipped} tests "
                 f"ctest skipped + {inside} skipped inside tests that ran (count, reason, where):")
    want = {
        "no CUDA device  [gtest_case]",
        "promtool not found  [script_skipped]",
        "no Slurm here  [script_skip]",
        "(no message: script_silent exited with the skip code)  [script_silent]",
        "needs the method's tool  [python_module]",
        "sub-test 1 needs 'quotes'  [python_module]",
        "sub-test 2 needs 'quotes'  [python_module]",
        "the whole class needs a GPU  [python_module]",
    }
    got = {line.split(None, 1)[1] for line in lines[1:]}
    ok = (ctest_skipped, inside) == (4, 4) and lines[:1] == [want_head] and got == want
    if not ok:
        print(f"FAIL: ctest skipped {ctest_skipped}, unittest skipped {inside}; "
              f"want the head {want_head!r} and the reasons {sorted(want)}")
        return 1
    print("PASS: every skip reported, and the count is ctest's plus unittest's")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
