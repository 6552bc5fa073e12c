// A standalone reproduction of franz-go's 5 s wait at transaction.version 2: a transactional producer commits one
// transaction after another (no fault, nothing else running) and times each from BeginTransaction to the end of
// EndTransaction(TryCommit). On a cluster whose transaction.version is 2, a transaction whose first produce to a
// partition is answered CONCURRENT_TRANSACTIONS (the coordinator still writing the previous transaction's markers)
// waits for a metadata refresh, which MetadataMinAge (5 s by default) holds back; at transaction.version 1, or with
// another client, no transaction takes more than about a second.
//
// Usage: go run . -brokers 127.0.0.1:9092 [-topic NAME] [-duration 20s] [-producers 2] [-slow 4s]
// It creates the topic (6 partitions, replication factor 1 unless -replicas says more) when it is missing, and
// prints one line per transaction that took -slow or more, then a summary. Exit 1: the symptom was seen (a
// transaction took -slow or more); 0: not seen; 2: the run itself failed (a produce or commit error).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	producer int
	n        int
	took     time.Duration
	err      error
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	topic := flag.String("topic", fmt.Sprintf("franz-go-tv2-wait-%d", time.Now().Unix()), "the topic to write")
	duration := flag.Duration("duration", 20*time.Second, "how long each producer runs")
	producers := flag.Int("producers", 2, "transactional producers, each its own transactional id")
	slow := flag.Duration("slow", 4*time.Second, "a transaction this long or longer shows the symptom")
	replicas := flag.Int("replicas", 1, "the topic's replication factor when it is created")
	flag.Parse()
	seeds := strings.Split(*brokers, ",")
	if err := ensureTopic(seeds, *topic, int16(*replicas)); err != nil {
		fmt.Fprintln(os.Stderr, "topic:", err)
		os.Exit(2)
	}
	results := make(chan result, 1024)
	var wg sync.WaitGroup
	for p := 0; p < *producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			produce(seeds, *topic, p, *duration, results)
		}(p)
	}
	go func() { wg.Wait(); close(results) }()
	var took []time.Duration
	failed := 0
	for r := range results {
		if r.err != nil {
			fmt.Printf("producer %d transaction %d failed after %v: %v\n", r.producer, r.n, r.took.Round(time.Millisecond), r.err)
			failed++
			continue
		}
		took = append(took, r.took)
		if r.took >= *slow {
			fmt.Printf("producer %d transaction %d took %v\n", r.producer, r.n, r.took.Round(time.Millisecond))
		}
	}
	os.Exit(summary(took, failed, *slow))
}

// summary prints the transactions' count, median, max and how many took `slow` or more; the exit code.
func summary(took []time.Duration, failed int, slow time.Duration) int {
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	n := 0
	for _, d := range took {
		if d >= slow {
			n++
		}
	}
	if len(took) == 0 {
		fmt.Printf("no transaction committed (%d failed)\n", failed)
		return 2
	}
	fmt.Printf("committed %d transactions (%d failed): median %v, max %v, %d took %v or more\n", len(took), failed,
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), n, slow)
	switch {
	case failed > 0:
		return 2
	case n > 0:
		fmt.Println("SYMPTOM: transactions waited with no fault")
		return 1
	}
	fmt.Println("no transaction waited")
	return 0
}

func ensureTopic(seeds []string, topic string, replicas int16) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 6, replicas, nil, topic)
	if err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		return err
	}
	return resp.Err
}

// produce commits transactions one after another until the duration ends.
func produce(seeds []string, topic string, p int, duration time.Duration, results chan<- result) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(fmt.Sprintf("%s-%d", topic, p)), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		results <- result{producer: p, err: err}
		return
	}
	defer cl.Close()
	ctx := context.Background()
	end := time.Now().Add(duration)
	for n := 0; time.Now().Before(end); n++ {
		start := time.Now()
		err := transaction(ctx, cl, n)
		results <- result{producer: p, n: n, took: time.Since(start), err: err}
		if err != nil {
			return
		}
	}
}

// transaction produces six records at once, one to each partition, flushes them and commits.
func transaction(ctx context.Context, cl *kgo.Client, n int) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	var mu sync.Mutex
	var first error
	for i := 0; i < 6; i++ {
		record := &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", n, i)), Partition: int32(i)}
		cl.Produce(ctx, record, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if first != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return first
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}
