"""Runs a Python file and compares what it prints with a file (or, with --expect-last-line, its
last line with a string).   run_and_compare.py EXPECTED.txt SCRIPT.py"""

import subprocess
import sys

args = sys.argv[1:]
if args[0] == "--expect-last-line":
    expected, script = args[1], args[2]
else:
    expected, script = open(args[0]).read(), args[1]
p = subprocess.run([sys.executable, script], capture_output=True, text=True)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
if p.returncode != 0:
    sys.exit(f"{script} failed with status {p.returncode}")
got = p.stdout if args[0] != "--expect-last-line" else p.stdout.strip().splitlines()[-1]
if got != expected:
    sys.exit(f"{script} printed\n{got!r}\nnot\n{expected!r}")
