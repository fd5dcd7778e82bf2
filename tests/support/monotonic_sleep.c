/* Loaded in front of Debian bookworm's libfaketime 0.9.10 by tests/test_clock_skew.py.
 *
 * With FAKETIME_DONT_FAKE_MONOTONIC=1, libfaketime 0.9.10 still converts an absolute
 * clock_nanosleep() deadline on CLOCK_MONOTONIC as if the clock were faked, and hands the
 * kernel a negative time: Python 3.11's time.sleep() fails with EINVAL or sleeps for minutes
 * (wolfcw/libfaketime#426, fixed after 0.9.10). This sends monotonic sleeps straight to the
 * kernel and every other clock on to libfaketime, so only the wall clock is moved. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *request,
                    struct timespec *remain) {
    if (clock_id == CLOCK_MONOTONIC) {
        return syscall(SYS_clock_nanosleep, clock_id, flags, request, remain) == 0 ? 0 : errno;
    }
    int (*next)(clockid_t, int, const struct timespec *, struct timespec *) =
        dlsym(RTLD_NEXT, "clock_nanosleep");
    return next(clock_id, flags, request, remain);
}
