package main

// What the two transactional roles share (chaos/workloads/transactional.py is the reference): their options,
// producing a transaction's writes with their ids and learning their offsets, and what an error means for the
// outcome: `ok` only for an acknowledged commit, `fail` when the transaction certainly did not commit, `info`
// when its outcome is unknown; a producer's unconfirmed commit is followed by franz-go's documented recovery,
// EndTransaction(TryAbort) on the same client (its InitProducerId carries the last epoch: a producer fenced meanwhile
// is told so); a client in an unknown state is dropped (the next one's InitProducerId fences it and aborts what it
// left), and a fenced one exits with --on-fenced exit. What franz-go does on its own (its
// retries, the GroupTransactSession's aborts on a rebalance) is its behaviour under test, never worked around.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var producerArgs = map[string]int{"--topics": 2, "--records": 1, "--abort-share": 1, "--rate": 1, "--size": 1,
	"--keys": 1}
var processorArgs = map[string]int{"--inputs": -1, "--output": 1, "--group": 1, "--batch": 1, "--size": 1,
	"--group-protocol": 1}

type TxnArgs struct {
	c            *Ctx
	TimeoutMs    int
	Request      time.Duration
	TxnID        string
	OnFencedExit bool
	Size         int
}

func txnArgs(a Args, c *Ctx) TxnArgs {
	t := TxnArgs{c: c, TimeoutMs: a.integer("--transaction-timeout-ms", 10000),
		Request: time.Duration(a.num("--request-timeout-s", 10) * float64(time.Second)),
		TxnID:   a.str("--txn-id", c.RunTag+"."+c.Process), Size: a.integer("--size", 100)}
	switch a.str("--on-fenced", "reinit") {
	case "reinit":
	case "exit":
		t.OnFencedExit = true
	default:
		usage("argument --on-fenced: invalid choice: %q (choose from 'reinit', 'exit')", a.str("--on-fenced", ""))
	}
	return t
}

// clientOpts: the connection, the transactional id and timeout, partitions as planned, franz-go's retries
// bounded by the request timeout, and a request waited for as long as the request timeout says (franz-go's
// RequestTimeoutOverhead: the read deadline of a request without a timeout of its own, EndTxn's among them, and
// what a Produce's deadline adds to its own timeout; 10 s by default, the option's default too), as Java's
// request.timeout.ms and KafkaJS's requestTimeout are.
func (t TxnArgs) clientOpts() []kgo.Opt {
	opts, err := connectionOpts(t.c)
	if err != nil {
		logf("%v", err)
		usage("%v", err)
	}
	return append(opts, kgo.TransactionalID(t.TxnID), kgo.TransactionTimeout(time.Duration(t.TimeoutMs)*time.Millisecond),
		kgo.RetryTimeout(t.Request), kgo.RequestTimeoutOverhead(t.Request), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
}

func errorText(err error) string { return fmt.Sprintf("%T: %v", errors.Unwrap(err), err) }

func describe(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Sprintf("%s: %v", ke.Message, err)
	}
	return err.Error()
}

// fenced: our epoch is stale (another producer with our transactional id initialised, or the coordinator
// bumped it when it aborted our timed-out transaction under transaction.version 2).
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// afterDrop: what a dropped client's outcome says besides its error: a producer fenced by another one, with
// --on-fenced exit, stops the process (a zombie must not come back), `fenced` in the value.
func afterDrop(c *Ctx, t TxnArgs, err error, extra map[string]any) map[string]any {
	if fenced(err) && t.OnFencedExit {
		extra["fenced"] = true
		c.Stop()
	}
	return extra
}

type write struct {
	Topic     string
	Partition int32
	ID        string
	Key       string
	Input     string
}

func (w write) history() map[string]any {
	m := map[string]any{"topic": w.Topic, "partition": w.Partition, "id": w.ID}
	if w.Key != "" {
		m["key"] = w.Key
	}
	if w.Input != "" {
		m["input"] = w.Input
	}
	return m
}

func writesOf(ws []write) []map[string]any {
	out := make([]map[string]any, len(ws))
	for i, w := range ws {
		out[i] = w.history()
	}
	return out
}

// produceAll sends the writes in the open transaction and flushes; the offset of each (-1: not acknowledged)
// and the first error.
func produceAll(c *Ctx, cl *kgo.Client, t TxnArgs, attempt string, ws []write) ([]int64, error) {
	offsets := make([]int64, len(ws))
	var mu sync.Mutex
	var first error
	var done sync.WaitGroup
	c.Watch.call("produce", t.Request, func() {
		for i, w := range ws {
			offsets[i] = -1
			rec := &kgo.Record{Topic: w.Topic, Partition: w.Partition, Headers: headers(w.ID, attempt, c.Process, w.Input),
				Value: encodeValue(w.ID, attempt, c.Process, w.Input, t.Size)}
			if w.Key != "" {
				rec.Key = []byte(w.Key)
			}
			done.Add(1)
			i := i
			cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
				defer done.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if first == nil {
						first = err
					}
					return
				}
				offsets[i] = r.Offset
			})
		}
	})
	var flushErr error
	c.Bounded("flush", t.Request, func(ctx context.Context) {
		if flushErr = cl.Flush(ctx); flushErr == nil {
			done.Wait()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return offsets, first
	}
	return offsets, flushErr
}
