#!/usr/bin/env bash
# Runs one of spexd's programs from wherever they are, so that the benchmark drivers and GPU
# checks in scripts/ take the same first argument a user has at hand:
#   a build tree       build/server/spexd, build/client/spexctl, build/tests/bench/..., build/tests/cuda/...
#   an install prefix  DIR/bin/spexd (cmake --install build --prefix DIR)
#   a bundle           a folder with a run.sh that runs its argument with the libraries beside
#                      it (for a machine that lacks Debian's gRPC, CFITSIO, ...)
#
#   scripts/run_program.sh DIR PROGRAM [ARGS...]   exec PROGRAM from DIR
#   scripts/run_program.sh DIR --path PROGRAM      print its path (a bundle: DIR/PROGRAM)
#   scripts/run_program.sh DIR --env               print the library path a bundle's programs
#                                                  need (empty for a build tree or a prefix)
#
# The CUDA module of a build tree or prefix (lib/spexd/libspexd_cuda.so) is passed on in
# SPEXD_CUDA_MODULE unless that is set, so that a test or benchmark binary loads the same
# module as the server does.
set -euo pipefail
usage="usage: run_program.sh DIR PROGRAM [ARGS...] | DIR --path PROGRAM | DIR --env"
dir=${1:?$usage}
what=${2:?$usage}
shift 2
[[ -d $dir ]] || { echo "run_program.sh: $dir is not a folder" >&2; exit 2; }
if [[ -x $dir/run.sh ]]; then
  case $what in
    --path) echo "$dir/${1:?$usage}"; exit 0 ;;
    *) exec "$dir/run.sh" "$what" "$@" ;;
  esac
fi
[[ $what == --env ]] && { echo "${LD_LIBRARY_PATH:-}"; exit 0; }
module=$(cd "$dir" && pwd)/lib/spexd/libspexd_cuda.so
[[ -f $module && -z ${SPEXD_CUDA_MODULE:-} ]] && export SPEXD_CUDA_MODULE=$module
prog=$what
[[ $what == --path ]] && prog=${1:?$usage}
for sub in bin server client tests/bench tests/cuda tests examples; do
  exe=$dir/$sub/$prog
  if [[ -f $exe && -x $exe ]]; then
    [[ $what == --path ]] && { echo "$exe"; exit 0; }
    exec "$exe" "$@"
  fi
done
echo "run_program.sh: no $prog in $dir (a build tree, an install prefix or a bundle)" >&2
exit 127
