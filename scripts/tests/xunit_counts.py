"""Prints 'PASSED FAILED' for the xUnit files swift test wrote (XCTest's and Swift Testing's).

scripts/test reads a Swift lane's counts from them rather than from the console, whose lines
differ between the two frameworks and between passing and failing runs. A missing file counts
as nothing (a framework with no test in the lane writes none); no file at all is one failure, so
that a crashed test process cannot pass for an empty lane.
"""

import os
import sys
import xml.etree.ElementTree as ET


def counts(paths):
    passed = failed = 0
    found = False
    for path in paths:
        if not os.path.exists(path):
            continue
        found = True
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is None:
                passed += 1
    return (passed, failed) if found else (0, 1)


if __name__ == "__main__":
    print("%d %d" % counts(sys.argv[1:]))
