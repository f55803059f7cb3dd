#!/usr/bin/env bash
# cmake/CheckRoomOrder.cmake on a copy of the tree's cuda/, server/ and client/ files: clean
# as they are; then, with one offence of each kind seeded into the copy (an upward arrow in
# cuda/ and in server/, a room beside its own in client/, another folder's header, a file
# in no room, a job stage that includes the job), the check fails and names exactly those.
set -euo pipefail
CMAKE=${1:-cmake}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$ROOT/cmake/CheckRoomOrder.cmake
fail() { echo "room_order_test: FAIL: $*"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$ROOT" && find cuda server client \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) \
   -print0 | xargs -0 cp --parents -t "$tmp")
"$CMAKE" -DSOURCE_DIR="$tmp" -P "$CHECK" 2>&1 | grep -q 'room order: clean' ||
  fail "the copy of the tree is not clean"

echo '#include "cuda/host/gpu_context.h"' >> "$tmp/cuda/kernels/spot_kernels.cu"
echo '#include "server/jobs/extract_job.h"' >> "$tmp/server/platform/log.cc"
echo '#include "client/lib/spexd_client.h"' >> "$tmp/server/platform/metrics.cc"
echo '#include "client/spexctl/cli_args.h"' >> "$tmp/client/tools/spexd_sim_main.cc"
echo '#include "cuda/kernels/kernel_args.h"' > "$tmp/cuda/stray.cc"
echo '#include "server/jobs/extract_job.h"' >> "$tmp/server/jobs/job_input.cc"
set +e
out=$("$CMAKE" -DSOURCE_DIR="$tmp" -P "$CHECK" 2>&1)
rc=$?
set -e
printf '%s\n' "$out"
[ "$rc" -ne 0 ] || fail "the check passed with seeded offences"
flat=$(printf '%s\n' "$out" | tr -s ' \n' ' ')
for want in \
  'room order broken (6 offences)' \
  'cuda/kernels/spot_kernels.cu (room kernels) includes cuda/host/gpu_context.h of room host, above it' \
  'server/platform/log.cc (room platform) includes server/jobs/extract_job.h of room jobs, above it' \
  'server/platform/metrics.cc includes client/lib/spexd_client.h, a header of another folder' \
  'client/tools/spexd_sim_main.cc (room tools) includes client/spexctl/cli_args.h of room spexctl, beside it' \
  'cuda/stray.cc is in no room of cuda/' \
  'server/jobs/job_input.cc includes server/jobs/extract_job.h, which includes server/jobs/job_input.h back'; do
  [[ $flat == *"$want"* ]] || fail "not reported: $want"
done
echo "room_order_test: ok"
