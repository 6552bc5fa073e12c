package main

// Stalls (docs/workload-protocol.md "Stalls"): every client call runs under call(); one still running at twice
// its own timeout (at least 5 s) is a stall: recorded, then the process exits 75 and the runner starts it again.
// Time counts only while the process runs: a tick ages calls by at most two ticks, so a SIGSTOPped process
// does not age them.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

const (
	exitStall   = 75
	stallFactor = 2.0
	stallFloorS = 5.0
	tick        = 250 * time.Millisecond
)

type inFlight struct {
	name     string
	timeoutS float64
	limitS   float64
	seconds  float64
}

type Watch struct {
	mu      sync.Mutex
	calls   map[int]*inFlight
	next    int
	started bool
	history *History
}

func stallLimit(timeoutS float64) float64 {
	if limit := stallFactor * timeoutS; limit > stallFloorS {
		return limit
	}
	return stallFloorS
}

// call runs fn as the client call `name`, bounded by timeout, under the watchdog.
func (w *Watch) call(name string, timeout time.Duration, fn func()) {
	w.mu.Lock()
	id := w.next
	w.next++
	w.calls[id] = &inFlight{name: name, timeoutS: timeout.Seconds(), limitS: stallLimit(timeout.Seconds())}
	if !w.started {
		w.started = true
		go w.loop()
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.calls, id)
		w.mu.Unlock()
	}()
	fn()
}

func (w *Watch) loop() {
	last := time.Now()
	for {
		time.Sleep(tick)
		now := time.Now()
		step := now.Sub(last).Seconds()
		if step > 2*tick.Seconds() {
			step = 2 * tick.Seconds()
		}
		last = now
		w.mu.Lock()
		var stalled *inFlight
		for _, c := range w.calls {
			c.seconds += step
			if c.seconds >= c.limitS && stalled == nil {
				stalled = c
			}
		}
		w.mu.Unlock()
		if stalled != nil {
			w.stalled(*stalled)
		}
	}
}

func (w *Watch) stalled(c inFlight) {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	stall := map[string]any{"call": c.name, "timeout_s": c.timeoutS, "limit_s": c.limitS,
		"seconds": float64(int(c.seconds*10)) / 10, "thread": "main", "stack": strings.Split(stacks, "\n")}
	for k, v := range clientInfo() {
		stall[k] = v
	}
	w.history.Stalled(stall)
	fmt.Fprintf(os.Stderr, "stall: %s did not return in %.1f s; exiting %d\n%s", c.name, c.seconds, exitStall, stacks)
	os.Exit(exitStall)
}

// clientInfo names the client as a stall records it: franz-go's module version, from the build.
func clientInfo() map[string]any {
	version := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/twmb/franz-go" {
				version = dep.Version
			}
		}
	}
	return map[string]any{"client": "franz-go", "client_version": version, "library": "franz-go",
		"library_version": version}
}
