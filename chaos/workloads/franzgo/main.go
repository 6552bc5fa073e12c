// The franz-go workloads of txnlab: a transactional producer and an exactly-once processor (its
// GroupTransactSession), speaking docs/workload-protocol.md. chaos/workloads/native.py execs this program with
// the arguments `python -m chaos.workloads NAME --client franz-go ...` was given; the Kafka connection comes in
// TXNLAB_KAFKA_* variables, never on the command line.
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const incarnationStride = 1_000_000_000 // chaos/ids.py INCARNATION_STRIDE

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05.000 ")+format+"\n", args...)
}

func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "txnlab-franz-go: error: "+format+"\n", args...)
	os.Exit(2)
}

// Args are the options as given; the workload reads its own with the typed getters.
type Args struct {
	values map[string][]string
	arity  map[string]int // -1: one or more
}

var common = map[string]int{"--socket": 1, "--run-start-ns": 1, "--run-tag": 1, "--process": 1, "--seed": 1,
	"--duration": 1, "--incarnation": 1}
var transactional = map[string]int{"--transaction-timeout-ms": 1, "--request-timeout-s": 1, "--txn-id": 1,
	"--on-fenced": 1}

func parseArgs(argv []string, own map[string]int) Args {
	a := Args{values: map[string][]string{}, arity: map[string]int{}}
	for _, set := range []map[string]int{common, transactional, own} {
		for k, v := range set {
			a.arity[k] = v
		}
	}
	for i := 0; i < len(argv); {
		name := argv[i]
		n, known := a.arity[name]
		if !known {
			usage("unrecognized argument: %s", name)
		}
		i++
		var vals []string
		for i < len(argv) && (n < 0 || len(vals) < n) && !(n < 0 && strings.HasPrefix(argv[i], "--")) {
			vals = append(vals, argv[i])
			i++
		}
		if len(vals) == 0 || (n > 0 && len(vals) != n) {
			usage("argument %s: expected %s", name, map[bool]string{true: "one or more values", false: strconv.Itoa(n) + " value(s)"}[n < 0])
		}
		a.values[name] = vals
	}
	for _, required := range []string{"--socket", "--run-start-ns", "--run-tag", "--process"} {
		if _, ok := a.values[required]; !ok {
			usage("the following arguments are required: %s", required)
		}
	}
	return a
}

func (a Args) str(name, def string) string {
	if v, ok := a.values[name]; ok {
		return v[0]
	}
	return def
}

func (a Args) list(name string) []string { return a.values[name] }

func (a Args) num(name string, def float64) float64 {
	v, ok := a.values[name]
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v[0], 64)
	if err != nil {
		usage("argument %s: invalid number: %q", name, v[0])
	}
	return f
}

func (a Args) integer(name string, def int) int {
	v, ok := a.values[name]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		usage("argument %s: invalid int value: %q", name, v[0])
	}
	return n
}

// Ctx is a workload process's view of its run (chaos/workloads/base.py WorkloadContext).
type Ctx struct {
	RunTag       string
	Process      string
	Rng          *rand.Rand
	FirstAttempt int64
	History      *History
	Watch        *Watch
	deadline     time.Time
	stop         atomic.Bool
	stopCh       chan struct{}
}

func newCtx(a Args) *Ctx {
	runStart, err := strconv.ParseInt(a.str("--run-start-ns", ""), 10, 64)
	if err != nil {
		usage("argument --run-start-ns: invalid int value")
	}
	process := a.str("--process", "")
	history, err := dialHistory(a.str("--socket", ""), runStart, process)
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	seed := fnv.New64a()
	fmt.Fprintf(seed, "%s/%s", a.str("--seed", "0"), process)
	c := &Ctx{RunTag: a.str("--run-tag", ""), Process: process, Rng: rand.New(rand.NewSource(int64(seed.Sum64()))),
		FirstAttempt: int64(a.integer("--incarnation", 0)) * incarnationStride, History: history,
		stopCh: make(chan struct{})}
	c.Watch = &Watch{calls: map[int]*inFlight{}, history: history}
	if d := a.num("--duration", 0); d > 0 {
		c.deadline = time.Now().Add(time.Duration(d * float64(time.Second)))
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; c.Stop() }()
	return c
}

func (c *Ctx) Stop() {
	if c.stop.CompareAndSwap(false, true) {
		close(c.stopCh)
	}
}

func (c *Ctx) Stopping() bool {
	if !c.deadline.IsZero() && time.Now().After(c.deadline) {
		c.Stop()
	}
	return c.stop.Load()
}

// Wait sleeps d or until stopped; true when stopped.
func (c *Ctx) Wait(d time.Duration) bool {
	select {
	case <-c.stopCh:
		return true
	case <-time.After(d):
		return c.Stopping()
	}
}

// Bounded runs fn(ctx) as the client call `name` with a context of timeout d, under the watchdog.
func (c *Ctx) Bounded(name string, d time.Duration, fn func(context.Context)) {
	c.Watch.call(name, d, func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		fn(ctx)
	})
}

func main() {
	if len(os.Args) < 2 {
		usage("usage: txnlab-franz-go {txn-producer,processor} [options]")
	}
	switch os.Args[1] {
	case "txn-producer":
		runProducer(parseArgs(os.Args[2:], producerArgs))
	case "processor":
		runProcessor(parseArgs(os.Args[2:], processorArgs))
	default:
		usage("unknown workload %q: franz-go runs txn-producer and processor", os.Args[1])
	}
}
