#!/usr/bin/env bash
# `pip install` as the README gives it, tested: the source tree's files (tracked and untracked,
# not ignored: what a commit of the working tree would hold) are committed to a fresh git
# repository, which pip installs from as from any repository URL (git+file://...) into a new
# virtual environment of PYTHON's; then, from a directory outside every source tree, the README's
# Python example must print what the README says, and, given TORCH_EXAMPLE (the README's
# torchvision example), remat.torch must import on the environment's torch alone and the example
# end with "True True".
#
#   pip_install.sh SOURCE_DIR PYTHON EXPECTED_OUTPUT README_EXAMPLE.py [TORCH_EXAMPLE.py]
#
# The new environment sees PYTHON's torch through a .pth file naming the directory that holds it
# (a virtual environment's site-packages, or Debian's dist-packages for python3-torch): the torch
# the package must be built against is then one that pip's isolated build cannot see, and that
# lies outside the environment's own site-packages, and nothing is downloaded or copied for it.
# pip downloads the build requirements (pyproject.toml) or takes them from its cache; where it
# can do neither, the test is skipped (exit status 77). CMAKE_BUILD_PARALLEL_LEVEL (default 1:
# ctest runs this beside other tests) sets the build's jobs.
set -euo pipefail
[[ $# -eq 4 || $# -eq 5 ]] || { echo "usage: $0 SOURCE_DIR PYTHON EXPECTED_OUTPUT README_EXAMPLE.py [TORCH_EXAMPLE.py]" >&2; exit 2; }
source_dir=$1 python=$2 expected=$3 example=$4 torch_example=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
run_and_compare=$here/../python/run_and_compare.py
skip() { echo "pip_install: skipped: $*"; exit 77; }

command -v git >/dev/null || skip "git not found"
git -C "$source_dir" rev-parse --git-dir >/dev/null 2>&1 || skip "$source_dir is not a git checkout"
"$python" -c "import ensurepip, venv" 2>/dev/null ||
  skip "$python cannot make a virtual environment (Debian: python3-venv)"
requires=$(sed -n 's/^requires = \[\(.*\)\]$/\1/p' "$source_dir/pyproject.toml" | tr -d '",')
[[ -n $requires ]] || { echo "pip_install: no 'requires = [...]' line in pyproject.toml" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/remat-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH
export PYTHONDONTWRITEBYTECODE=1 CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1}
start=$SECONDS

# The source, as a clean repository.
mkdir "$work/src" "$work/outside"
git -C "$source_dir" ls-files -z --cached --others --exclude-standard |
  (cd "$source_dir" && xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh) |
  tar -C "$source_dir" --null -T - -cf - | tar -C "$work/src" -xf -
git -C "$work/src" init -q
git -C "$work/src" add -A
git -C "$work/src" -c user.name=pip_install -c user.email=pip_install@localhost commit -q -m snapshot

# The environment, with PYTHON's torch where it has one.
"$python" -m venv "$work/venv"
venv_python=$work/venv/bin/python
torch_dir=$("$python" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))" 2>/dev/null || true)
if [[ -n $torch_dir ]]; then
  site=$("$venv_python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
  echo "$torch_dir" >"$site/environment-torch.pth"
  echo "pip_install: the new environment's torch: $("$venv_python" -c "import torch; print(torch.__version__, torch.__file__)")"
elif [[ -n $torch_example ]]; then
  echo "pip_install: $python has no torch, but a torch example was given" >&2
  exit 1
fi
echo "pip_install: environment made in $((SECONDS - start)) s"

# pip's own index (or its cache) must serve the build requirements.
# shellcheck disable=SC2086  # one word per requirement
if ! "$venv_python" -m pip download --quiet --no-deps --timeout 20 --retries 1 \
     -d "$work/requirements" $requires >"$work/requirements.log" 2>&1; then
  skip "pip cannot get the build requirements ($requires): $(tail -n 1 "$work/requirements.log")"
fi

# The README's line, with this repository's URL.
step=$SECONDS
if ! "$venv_python" -m pip install --verbose "git+file://$work/src" >"$work/pip.log" 2>&1; then
  tail -n 60 "$work/pip.log"
  echo "pip_install: pip install failed (the end of its output above)" >&2
  exit 1
fi
grep -E "^ *-- remat(::torch| Python package)" "$work/pip.log" | sed 's/^ */pip_install: /'
echo "pip_install: pip install done in $((SECONDS - step)) s"

cd "$work/outside"
"$venv_python" - "$work/venv" <<'EOF'
import os, sys, remat
where = os.path.realpath(remat.__file__)
if not where.startswith(os.path.realpath(sys.argv[1]) + os.sep):
    sys.exit(f"pip_install: remat imported from {where}, not from the new environment")
print("pip_install: import remat:", where, remat.__version__)
EOF
"$venv_python" "$run_and_compare" "$expected" "$example"
if [[ -n $torch_example ]]; then
  # remat._torch's meter works only inside the libc10 that torch loads: one libc10 in the process.
  "$venv_python" - <<'EOF'
import os, sys, torch, remat.torch
want = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
loaded = {path for path in (line.split()[-1] for line in open("/proc/self/maps"))
          if os.path.basename(path).startswith("libc10.so")}
if loaded != {want}:
    sys.exit(f"pip_install: after import remat.torch the process maps {sorted(loaded)}, not {want} alone")
print("pip_install: import remat.torch: one libc10,", want)
EOF
  OMP_NUM_THREADS=1 "$venv_python" "$run_and_compare" --expect-last-line "True True" "$torch_example"
fi
echo "pip_install: passed in $((SECONDS - start)) s"
