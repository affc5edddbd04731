"""Every vector in Protocol/vectors/*.json against snapcat's independent codec and model."""

import glob
import json
import os
import unittest

from tests.support import VECTORS, wire


def vector_files():
    return sorted(glob.glob(os.path.join(VECTORS, "*.json")))


class VectorTests(unittest.TestCase):
    def test_vectors_exist(self):
        self.assertTrue(vector_files(), "no test vectors in %s (Protocol/vectors/*.json)" % VECTORS)

    def test_every_vector(self):
        files = vector_files()
        self.assertTrue(files, "no test vectors in %s" % VECTORS)
        for path in files:
            with open(path) as f:
                doc = json.load(f)
            with self.subTest(file=os.path.basename(path)):
                self.fail("unrecognised vector file layout: %s" % sorted(doc)[:10])


if __name__ == "__main__":
    unittest.main()
