package main

// The run's history socket (docs/workload-protocol.md "The history socket"): one JSON operation per line,
// one invoke outstanding per logical process. Observations a client's callbacks make while the process has
// an invoke outstanding (a rebalance in the middle of a transaction) wait for its completion: the history
// pairs an invoke with the process's next operation.

import (
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

type op struct {
	Time    int64   `json:"time"`
	Wall    float64 `json:"wall"`
	Process string  `json:"process"`
	Type    string  `json:"type"`
	F       string  `json:"f"`
	Value   any     `json:"value"`
}

type observation struct {
	f     string
	value any
}

type History struct {
	mu          sync.Mutex
	conn        net.Conn
	runStartNs  int64
	process     string
	outstanding map[string]*invoked // process -> its open invoke
	waiting     []observation       // the process's observations made while its invoke was open
}

type invoked struct {
	f     string
	value map[string]any
}

func dialHistory(path string, runStartNs int64, process string) (*History, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("history socket %s: %w", path, err)
	}
	return &History{conn: conn, runStartNs: runStartNs, process: process, outstanding: map[string]*invoked{}}, nil
}

// monotonicNs is CLOCK_MONOTONIC, the clock every process of the machine shares (Python's time.monotonic_ns).
func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func (h *History) write(process, typ, f string, value any) {
	line, err := json.Marshal(op{Time: monotonicNs() - h.runStartNs, Wall: float64(time.Now().UnixNano()) / 1e9,
		Process: process, Type: typ, F: f, Value: value})
	if err != nil {
		panic(fmt.Sprintf("history: %v", err)) // every value is built here from plain maps: a bug
	}
	if _, err := h.conn.Write(append(line, '\n')); err != nil {
		logf("history socket write failed: %v", err)
	}
}

// Invoke records that the process is about to act.
func (h *History) Invoke(f string, value map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outstanding[h.process] = &invoked{f, value}
	h.write(h.process, "invoke", f, value)
}

// Complete records the outcome (ok, fail, info) of the process's open invoke, then what was observed meanwhile.
func (h *History) Complete(typ, f string, value map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.outstanding, h.process)
	h.write(h.process, typ, f, value)
	for _, o := range h.waiting {
		h.write(h.process, "ok", o.f, o.value)
	}
	h.waiting = nil
}

// Observe records an `ok` without an invoke, at once or, with an invoke open, right after its completion.
func (h *History) Observe(f string, value any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, open := h.outstanding[h.process]; open {
		h.waiting = append(h.waiting, observation{f, value})
		return
	}
	h.write(h.process, "ok", f, value)
}

// Stalled completes the open invoke as info (its outcome is unknown), records the stall, and closes.
func (h *History) Stalled(stall map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if open, ok := h.outstanding[h.process]; ok {
		value := map[string]any{}
		for k, v := range open.value {
			value[k] = v
		}
		value["stalled"] = stall["call"]
		value["error"] = fmt.Sprintf("stalled: %v did not return in %v s (its timeout %v s)", stall["call"],
			stall["seconds"], stall["timeout_s"])
		delete(h.outstanding, h.process)
		h.write(h.process, "info", open.f, value)
	}
	for _, o := range h.waiting {
		h.write(h.process, "ok", o.f, o.value)
	}
	h.waiting = nil
	h.write(h.process, "ok", "stall", stall)
	h.conn.Close()
}

func (h *History) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.waiting {
		h.write(h.process, "ok", o.f, o.value)
	}
	h.waiting = nil
	h.conn.Close()
}
