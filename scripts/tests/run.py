"""The python lane of scripts/test: snapcat's tests, with their counts on standard output.

Runs what `python3 -m unittest discover -s scripts/tests -t scripts -v` runs, reporting to
standard error as unittest does, then prints 'PASSED FAILED' for scripts/test's closing line.
Arguments are unittest's -k patterns (scripts/test python -- NAME).
"""

import os
import sys
import unittest

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(patterns):
    loader = unittest.TestLoader()
    loader.testNamePatterns = ["*%s*" % p for p in patterns] or None
    suite = loader.discover(os.path.join(SCRIPTS, "tests"), top_level_dir=SCRIPTS)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped) - len(result.expectedFailures)
    # A lane that ran nothing has not passed.
    print("%d %d" % (passed, failed if result.testsRun else max(failed, 1)))


if __name__ == "__main__":
    main(sys.argv[1:])
