package gateway_test

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep returns a sleep that wakes within tens of microseconds of
// its time, for the pacing goroutine, which it locks to its OS thread for
// good: nanosleep(2) with that thread's timer slack cut from the default
// 50 µs to 1 ns. Go's own timers wake up to a millisecond late when the
// process is otherwise idle (the runtime's network poller waits in whole
// milliseconds), which would send an open-loop generator's requests in
// bursts. The thread is never unlocked, so it ends with its goroutine
// rather than going back to the runtime with its slack changed.
func preciseSleep() (func(time.Duration), error) {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	return func(d time.Duration) {
		ts := unix.NsecToTimespec(d.Nanoseconds())
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}, nil
}
