# snapcat's tests: python3 -m unittest discover -s scripts/tests -t scripts -v (run by scripts/test).
