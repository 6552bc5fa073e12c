package main

// The transactional producer (plan txn-producer; chaos/workloads/txn_producer.py is the reference): each
// attempt writes --records records over the partitions of two topics in one transaction, then commits, or
// deliberately aborts an --abort-share of them. History: init, then txn invoke / ok (+ offsets) | fail | info.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Producer struct {
	c          *Ctx
	t          TxnArgs
	cl         *kgo.Client
	topics     []string
	partitions map[string]int
	records    int
	keys       int
	abortShare float64
	attemptNo  int64
}

func runProducer(a Args) {
	c := newCtx(a)
	defer c.History.Close()
	p := &Producer{c: c, t: txnArgs(a, c), topics: a.list("--topics"), records: a.integer("--records", 6),
		keys: a.integer("--keys", 0), abortShare: a.num("--abort-share", 0.2), attemptNo: c.FirstAttempt}
	if p.keys < 0 {
		usage("--keys %d: 0 (no keys) or a number of keys", p.keys)
	}
	p.partitions = partitionCounts(c, p.topics)
	pacer := newPacer(a.num("--rate", 20))
	for !c.Stopping() {
		if p.ensureClient() {
			p.oneAttempt()
		} else {
			c.Wait(time.Second)
		}
		pacer.wait(c)
	}
	p.drop()
}

// ensureClient makes the transactional client and its producer id (InitProducerId), recorded as `init`.
func (p *Producer) ensureClient() bool {
	if p.cl != nil {
		return true
	}
	p.c.History.Invoke("init", map[string]any{"txn_id": p.t.TxnID})
	cl, err := kgo.NewClient(p.t.clientOpts()...)
	if err == nil {
		p.c.Bounded("init_transactions", 3*p.t.Request, func(ctx context.Context) { _, _, err = cl.ProducerID(ctx) })
		if err != nil {
			cl.Close()
		}
	}
	if err != nil {
		p.c.History.Complete("fail", "init", map[string]any{"txn_id": p.t.TxnID, "error": describe(err)})
		return false
	}
	p.cl = cl
	p.c.History.Complete("ok", "init", map[string]any{"txn_id": p.t.TxnID})
	return true
}

func (p *Producer) plan() []write {
	ws := make([]write, p.records)
	for i := range ws {
		topic := p.topics[i%2]
		rid := recordID(p.c.RunTag, p.c.Process, p.attemptNo, i)
		ws[i] = write{Topic: topic, ID: rid}
		if p.keys > 0 {
			n := keyNumber(rid, p.keys)
			ws[i].Partition, ws[i].Key = int32(n%p.partitions[topic]), fmt.Sprintf("k%d", n)
		} else {
			ws[i].Partition = int32(p.c.Rng.Intn(p.partitions[topic]))
		}
	}
	return ws
}

func (p *Producer) oneAttempt() {
	attempt := attemptID(p.c.RunTag, p.c.Process, p.attemptNo)
	abort := p.c.Rng.Float64() < p.abortShare
	ws := p.plan()
	p.attemptNo++
	value := map[string]any{"attempt": attempt, "producer": p.c.Process, "txn_id": p.t.TxnID, "abort": abort,
		"writes": writesOf(ws)}
	p.c.History.Invoke("txn", value)
	outcome, extra := p.transact(attempt, ws, abort)
	done := map[string]any{}
	for k, v := range value {
		done[k] = v
	}
	for k, v := range extra {
		done[k] = v
	}
	p.c.History.Complete(outcome, "txn", done)
}

func (p *Producer) end(commit kgo.TransactionEndTry) (err error) {
	name := map[kgo.TransactionEndTry]string{kgo.TryCommit: "commit_transaction", kgo.TryAbort: "abort_transaction"}[commit]
	p.c.Bounded(name, 2*p.t.Request, func(ctx context.Context) { err = p.cl.EndTransaction(ctx, commit) })
	return err
}

func (p *Producer) transact(attempt string, ws []write, abort bool) (string, map[string]any) {
	if err := p.cl.BeginTransaction(); err != nil {
		return "fail", p.dropAfter(err, map[string]any{"error": describe(err)})
	}
	offsets, err := produceAll(p.c, p.cl, p.t, attempt, ws)
	if err != nil {
		return p.abortAfter(err)
	}
	if abort {
		if err := p.end(kgo.TryAbort); err != nil {
			return "fail", p.dropAfter(err, map[string]any{"error": describe(err), "after": "deliberate abort"})
		}
		return "fail", map[string]any{"error": "deliberate abort"}
	}
	switch err := p.end(kgo.TryCommit); {
	case err == nil:
		return "ok", map[string]any{"offsets": offsets}
	case errors.Is(err, kerr.OperationNotAttempted), errors.Is(err, kerr.TransactionAbortable):
		return p.abortAfter(err) // the commit was never sent
	default: // unconfirmed (a transport error, the call's deadline): franz-go's documented recovery, EndTransaction
		// with TryAbort, reloads the producer id with its last id and epoch (KIP-360), so a producer fenced
		// meanwhile learns it here; a new client's InitProducerId would fence whoever holds the id instead
		extra := map[string]any{"error": describe(err)}
		if abortErr := p.end(kgo.TryAbort); abortErr != nil {
			extra["recovery"] = describe(abortErr)
			return "info", p.dropAfter(abortErr, extra)
		}
		return "info", extra
	}
}

// abortAfter aborts the open transaction after err (nothing was asked to commit): `fail`; an abort that fails
// too is judged by its own error (a paused zombie learns here that it is fenced).
func (p *Producer) abortAfter(err error) (string, map[string]any) {
	var abortErr error
	p.c.Bounded("abort_buffered_records", p.t.Request, func(ctx context.Context) { abortErr = p.cl.AbortBufferedRecords(ctx) })
	if abortErr == nil {
		abortErr = p.end(kgo.TryAbort)
	}
	if abortErr != nil {
		return "fail", p.dropAfter(abortErr, map[string]any{"error": describe(abortErr), "after": describe(err)})
	}
	return "fail", map[string]any{"error": describe(err)}
}

func (p *Producer) dropAfter(err error, extra map[string]any) map[string]any {
	p.drop()
	return afterDrop(p.c, p.t, err, extra)
}

func (p *Producer) drop() {
	if p.cl != nil {
		p.c.Watch.call("close", p.t.Request, p.cl.Close)
		p.cl = nil
	}
}

// pacer: at most rate attempts a second (0: unbounded), without drifting (base.py Pacer).
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(rate float64) *pacer {
	p := &pacer{next: time.Now()}
	if rate > 0 {
		p.interval = time.Duration(float64(time.Second) / rate)
	}
	return p
}

func (p *pacer) wait(c *Ctx) {
	if p.interval == 0 {
		return
	}
	p.next = p.next.Add(p.interval)
	if floor := time.Now().Add(-p.interval); p.next.Before(floor) {
		p.next = floor
	}
	if d := time.Until(p.next); d > 0 {
		c.Wait(d)
	}
}
