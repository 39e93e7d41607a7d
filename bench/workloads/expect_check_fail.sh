#!/bin/sh
# expect_check_fail.sh SHIM PROGRAM ARGS...: runs PROGRAM with the broken
# allocator SHIM preloaded (SHIM "-": nothing preloaded, the program is
# given a broken allocator otherwise, as a plugin) and passes only if the
# program's self-check caught it (exit status 3 and "check failed" or the
# enclave harness's "FAIL" on stderr). A crash, a hang cut by ctest's
# timeout, or a clean exit all fail the test.
shim=$1
shift
if [ "$shim" = - ]; then
  err=$("$@" 2>&1 >/dev/null)
else
  err=$(LD_PRELOAD="$shim" "$@" 2>&1 >/dev/null)
fi
status=$?
if [ "$status" -eq 3 ] && printf '%s' "$err" | grep -q 'check failed\|: FAIL: '; then
  printf '%s\n' "$err" | head -n 1
  exit 0
fi
echo "expected the self-check to fail (exit 3), got exit $status: $err" >&2
exit 1
