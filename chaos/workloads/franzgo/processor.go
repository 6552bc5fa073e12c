package main

// The exactly-once processor (plan processor; chaos/workloads/processor.py is the reference), written the way
// franz-go's docs say to: a GroupTransactSession (read_committed, KIP-447 offsets in the transaction, the session
// aborting a transaction a rebalance overtook and resetting the consumer to the committed offsets). Each poll of
// at most --batch records is one transaction with one output per input. History: init, process invoke /
// ok (+ offsets) | fail | info, and `seek` observations where its polls start over (an assignment, a revocation,
// the session's reset after an abort).

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const pollTimeout = 500 * time.Millisecond // processor.py POLL_S

type Processor struct {
	c             *Ctx
	t             TxnArgs
	sess          *kgo.GroupTransactSession
	inputs        []string
	output        string
	outPartitions int
	group         string
	batch         int
	attemptNo     int64
	serverSide    bool // --group-protocol consumer: KIP-848 (kgo.ServerSideBalancer; the broker's session)
}

func runProcessor(a Args) {
	c := newCtx(a)
	defer c.History.Close()
	if len(a.list("--inputs")) == 0 || a.str("--output", "") == "" {
		usage("the following arguments are required: --inputs, --output")
	}
	protocol := a.str("--group-protocol", "classic")
	if protocol != "classic" && protocol != "consumer" {
		usage("argument --group-protocol: classic or consumer, not %q", protocol)
	}
	p := &Processor{c: c, t: txnArgs(a, c), inputs: a.list("--inputs"), output: a.str("--output", ""),
		group: a.str("--group", c.RunTag+".eos"), batch: a.integer("--batch", 50), attemptNo: c.FirstAttempt,
		serverSide: protocol == "consumer"}
	p.outPartitions = partitionCounts(c, []string{p.output})[p.output]
	for !c.Stopping() {
		if !p.ensureSession() {
			c.Wait(time.Second)
			continue
		}
		var records []*kgo.Record
		c.Bounded("consume", pollTimeout, func(ctx context.Context) {
			fetches := p.sess.PollRecords(ctx, p.batch)
			fetches.EachError(func(topic string, partition int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					logf("fetch %s-%d: %v", topic, partition, err)
				}
			})
			records = fetches.Records()
		})
		if len(records) > 0 {
			p.process(records)
		}
	}
	p.drop()
}

func (p *Processor) seek(reason string, assigned map[string][]int32) {
	positions := []map[string]any{}
	for topic, partitions := range assigned {
		for _, partition := range partitions {
			positions = append(positions, map[string]any{"topic": topic, "partition": partition, "offset": nil})
		}
	}
	if len(positions) == 0 {
		return // the cooperative balancer's callbacks with nothing moved
	}
	sortPositions(positions)
	p.c.History.Observe("seek", map[string]any{"isolation": "read_committed", "reason": reason, "positions": positions})
}

func sortPositions(positions []map[string]any) {
	sort.Slice(positions, func(i, j int) bool {
		a, b := positions[i], positions[j]
		if a["topic"].(string) != b["topic"].(string) {
			return a["topic"].(string) < b["topic"].(string)
		}
		return a["partition"].(int32) < b["partition"].(int32)
	})
}

func (p *Processor) ensureSession() bool {
	if p.sess != nil {
		return true
	}
	p.c.History.Invoke("init", map[string]any{"txn_id": p.t.TxnID})
	group := []kgo.Opt{kgo.SessionTimeout(10 * time.Second)}
	if p.serverSide { // KIP-848: the balancer is the broker's (franz-go asks a sticky or range one first)
		group = []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
	opts := append(p.t.clientOpts(), kgo.ConsumerGroup(p.group), kgo.ConsumeTopics(p.inputs...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.seek("assigned", m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.seek("revoked", m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.seek("revoked", m) }))
	sess, err := kgo.NewGroupTransactSession(append(opts, group...)...)
	if err == nil {
		p.c.Bounded("init_transactions", 3*p.t.Request, func(ctx context.Context) { _, _, err = sess.Client().ProducerID(ctx) })
		if err != nil {
			sess.Close()
		}
	}
	if err != nil {
		p.c.History.Complete("fail", "init", map[string]any{"txn_id": p.t.TxnID, "error": describe(err)})
		return false
	}
	p.sess = sess
	p.c.History.Complete("ok", "init", map[string]any{"txn_id": p.t.TxnID})
	return true
}

func (p *Processor) process(records []*kgo.Record) {
	attempt := attemptID(p.c.RunTag, p.c.Process, p.attemptNo)
	inputs := make([]map[string]any, len(records))
	ws := make([]write, len(records))
	ends := map[[2]any]int64{}
	for n, r := range records {
		id := idOf(r)
		inputs[n] = map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "id": id}
		input, _ := id.(string)
		ws[n] = write{Topic: p.output, Partition: r.Partition % int32(p.outPartitions),
			ID: recordID(p.c.RunTag, p.c.Process, p.attemptNo, n), Input: input}
		key := [2]any{r.Topic, r.Partition}
		if r.Offset+1 > ends[key] {
			ends[key] = r.Offset + 1
		}
	}
	p.attemptNo++
	var commitOffsets []map[string]any
	for key, offset := range ends {
		commitOffsets = append(commitOffsets, map[string]any{"topic": key[0], "partition": key[1], "offset": offset})
	}
	sortPositions(commitOffsets)
	value := map[string]any{"attempt": attempt, "producer": p.c.Process, "txn_id": p.t.TxnID, "group": p.group,
		"inputs": inputs, "writes": writesOf(ws), "commit_offsets": commitOffsets}
	p.c.History.Invoke("process", value)
	outcome, extra := p.transact(attempt, ws)
	done := map[string]any{}
	for k, v := range value {
		done[k] = v
	}
	for k, v := range extra {
		done[k] = v
	}
	p.c.History.Complete(outcome, "process", done)
	if outcome != "ok" && p.sess != nil {
		p.rewound(commitOffsets)
	}
}

// transact: Begin, the outputs, End(TryCommit) (the session commits the polled offsets with the group's
// metadata, or aborts when a rebalance overtook the transaction); End(TryAbort) after a failed send.
func (p *Processor) transact(attempt string, ws []write) (string, map[string]any) {
	if err := p.sess.Begin(); err != nil {
		return "fail", p.dropAfter(err, map[string]any{"error": describe(err)})
	}
	offsets, produceErr := produceAll(p.c, p.sess.Client(), p.t, attempt, ws)
	try := kgo.TryCommit
	if produceErr != nil {
		try = kgo.TryAbort
	}
	var committed bool
	var err error
	p.c.Bounded(map[kgo.TransactionEndTry]string{kgo.TryCommit: "end_transaction_commit", kgo.TryAbort: "end_transaction_abort"}[try],
		2*p.t.Request, func(ctx context.Context) { committed, err = p.sess.End(ctx, try) })
	switch {
	case err != nil && try == kgo.TryAbort:
		return "fail", p.dropAfter(err, map[string]any{"error": describe(err), "after": describe(produceErr)})
	case err != nil:
		return "info", p.dropAfter(err, map[string]any{"error": describe(err)})
	case produceErr != nil:
		return "fail", map[string]any{"error": describe(produceErr)}
	case !committed:
		return "fail", map[string]any{"error": "the session aborted: a rebalance overtook the transaction, or its offsets could not be committed"}
	}
	return "ok", map[string]any{"offsets": offsets}
}

// rewound records where the session reset the batch's partitions after an abort: their committed offsets, null
// when the client knows none (the group never committed one: the poll starts over at the reset offset), as
// processor.py's rewind does. A partition revoked meanwhile is polled again only after an assignment.
func (p *Processor) rewound(commitOffsets []map[string]any) {
	committed := p.sess.Client().CommittedOffsets()
	positions := []map[string]any{}
	for _, o := range commitOffsets {
		topic, partition := o["topic"].(string), o["partition"].(int32)
		var offset any
		if at, ok := committed[topic][partition]; ok && at.Offset >= 0 {
			offset = at.Offset
		}
		positions = append(positions, map[string]any{"topic": topic, "partition": partition, "offset": offset})
	}
	p.c.History.Observe("seek", map[string]any{"isolation": "read_committed", "reason": "rewind", "positions": positions})
}

func (p *Processor) dropAfter(err error, extra map[string]any) map[string]any {
	p.drop()
	return afterDrop(p.c, p.t, err, extra)
}

func (p *Processor) drop() {
	if p.sess != nil {
		p.c.Watch.call("close", p.t.Request, p.sess.Close)
		p.sess = nil
	}
}
