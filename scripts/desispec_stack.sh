#!/usr/bin/env bash
# Sets up DESI's Python stack for the tests that run desispec's own code on spexd frames and
# desispec's extraction beside spexd-desi-extract (ctest -L desispec:
# tests/python/test_desispec_roundtrip.py, test_desispec_extract.py; docs/desispec.md).
#
#   scripts/desispec_stack.sh [DEST]        DEST defaults to ../desistack beside the clone
#
# 1. Debian's packages the stack imports (python3-numba, -fitsio, -healpy, -scipy, -yaml:
#    scripts/install-deps.sh --desispec).
# 2. desispec, desiutil, desitarget, specter and gpu_specter (none is in Debian) at the
#    commits that made the reference data's desispec/ outputs, and desimodel (desi_process_exposure imports it), unpacked into DEST/<name> with no .git.
#    They come from local bare mirrors when SPEXD_DESI_MIRROR names a folder holding
#    <owner>+<name>/repo or <name>.git, else from GitHub (git clone: needs the network).
#    Blobs a mirror lacks (large test and model files the tests do not read) are left out.
# 3. DEST/STACK.txt: "<name> <commit> <git describe>" per package (the tests print it).
# Nothing is installed into the system Python: the tests put DEST/*/py on PYTHONPATH
# (tests/python/desispec_env.py). They find DEST at ../desistack, or through
# SPEXD_DESISPEC_PATH=DEST. CI cannot fetch, so there they skip, saying how to get this.
set -euo pipefail
# DEST as given (relative to the caller's folder), else beside the clone.
DEST=$(realpath -m "${1:-$(dirname "$0")/../../desistack}")
cd "$(dirname "$0")/.."
# The commits of the reference data's desispec/README.md ("Versions").
PINS=(
  "desispec efd9676fc8e6b2e771d69ec862bd0edc936d0804"
  "desiutil 21de6be6fe8e42ef118faf70de5588b400993aa2"
  "desitarget a9ee318ff29c60b0e2d36437929569f6f4dccf83"
  "specter b8490d38738a6a6ac65cbec0b75faf6c7155d008"
  "gpu_specter 116b964f36c5c742b23973fb4fc10137cc6b688f"
  # desimodel: desi_process_exposure (desispec.scripts.proc) imports it; its newest commit
  # before desispec's (2026-04-18; the data/ tree it reads at run time is not in git).
  "desimodel c93d46d069e30f9dbea0c8325e71d85027aaebf0"
)

scripts/install-deps.sh --desispec

# The git directory holding NAME: a mirror, else a bare clone from GitHub under DEST.
git_dir() {
  local name=$1 m=${SPEXD_DESI_MIRROR:-}
  for d in "$m/desihub+$name/repo" "$m/$name.git" "$m/$name"; do
    if [[ -n $m && -d $d ]] && git --git-dir="$d" rev-parse -q --verify HEAD >/dev/null; then
      echo "$d"
      return
    fi
  done
  local clone=$DEST/.repos/$name.git
  if [[ ! -d $clone ]]; then
    git clone -q --bare "https://github.com/desihub/$name.git" "$clone" >&2
  fi
  echo "$clone"
}

# Unpacks COMMIT of GIT_DIR into OUT: every blob the repository has (git archive would stop
# at the first missing one).
unpack() {
  local gd=$1 commit=$2 out=$3 list
  list=$(mktemp)
  git --git-dir="$gd" ls-tree -r -z "$commit" | /usr/bin/python3 -c '
import subprocess, sys
gd = sys.argv[1]
rows = [r.split(b"\t", 1) for r in sys.stdin.buffer.read().split(b"\0") if r]
blobs = [(meta.split()[2], path) for meta, path in rows if meta.split()[1] == b"blob"]
have = subprocess.run(["git", "--git-dir", gd, "cat-file", "--batch-check"], check=True,
                      capture_output=True,
                      input=b"".join(sha + b"\n" for sha, _ in blobs)).stdout.splitlines()
missing = [p.decode() for (_, p), h in zip(blobs, have) if h.endswith(b" missing")]
if missing:
    sys.stderr.write("  left out (not in the mirror): %s\n" % ", ".join(missing))
sys.stdout.buffer.write(b"".join(p + b"\0" for (_, p), h in zip(blobs, have)
                                 if not h.endswith(b" missing")))
' "$gd" >"$list"
  rm -rf "$out"
  mkdir -p "$out"
  # One archive per xargs batch; tar -i reads past each batch's end-of-archive blocks.
  # git archive still names the blobs left out ("invalid object"): those lines are dropped.
  xargs -0 git --git-dir="$gd" archive "$commit" -- <"$list" 2>"$list.err" | tar -xi -C "$out"
  grep -v '^error: invalid object' "$list.err" >&2 || true
  rm -f "$list" "$list.err"
}

mkdir -p "$DEST"
: >"$DEST/STACK.txt.new"
for pin in "${PINS[@]}"; do
  read -r name commit <<<"$pin"
  gd=$(git_dir "$name")
  if ! git --git-dir="$gd" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "desispec_stack: $name has no commit $commit in $gd" >&2
    exit 1
  fi
  echo "desispec_stack: $name $commit from $gd"
  unpack "$gd" "$commit" "$DEST/$name"
  echo "$name $commit $(git --git-dir="$gd" describe --tags "$commit" 2>/dev/null || echo -)" \
    >>"$DEST/STACK.txt.new"
done
mv "$DEST/STACK.txt.new" "$DEST/STACK.txt"

# The check the tests make first: everything imports with Debian's Python.
paths=$(for p in desispec desiutil desitarget specter gpu_specter desimodel; do printf '%s:' "$(cd "$DEST/$p/py" && pwd)"; done)
PYTHONPATH=${paths%:} DESI_LOGLEVEL=WARNING /usr/bin/python3 -c '
import desispec.io, desispec.sky, desispec.scripts.extract, desispec.scripts.proc, desimodel.io
import gpu_specter.core, numba
print("desispec_stack: desispec", desispec.__version__, "imports")'
echo "desispec_stack: ready in $(cd "$DEST" && pwd); ctest -L desispec finds it at ../desistack," \
  "or set SPEXD_DESISPEC_PATH=$(cd "$DEST" && pwd)"
