#!/bin/sh
# expect_check_fail.sh SHIM PROGRAM ARGS...: runs PROGRAM with the broken
# allocator SHIM preloaded and passes only if the program's self-check
# caught it (exit status 3 and "check failed" on stderr). A crash, a
# hang cut by ctest's timeout, or a clean exit all fail the test.
shim=$1
shift
err=$(LD_PRELOAD="$shim" "$@" 2>&1 >/dev/null)
status=$?
if [ "$status" -eq 3 ] && printf '%s' "$err" | grep -q 'check failed'; then
  printf '%s\n' "$err" | head -n 1
  exit 0
fi
echo "expected the self-check to fail (exit 3), got exit $status: $err" >&2
exit 1
