// A group consumer on franz-go reads a topic to its end; the topic is deleted and created again under its name (a
// new topic id) and records are written to it. franz-go v1.22.3 does not adopt the new id ("metadata has a new ID for a
// topic we already hold ... we do not adopt the new ID"): its fetches of the partitions it holds are answered
// UNKNOWN_TOPIC_ID, and none of the new topic's records is ever returned. librdkafka reads them all.
//
// Usage: go run . -brokers HOST:PORT [-replicas N] [-wait 15s]
//
// Exit 1: the symptom (a line starting SYMPTOM:), 0: the new topic's records were read, 2: the run failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const partitions = 2

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("[%6.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func fail(err error) {
	say("the run failed: %v", err)
	os.Exit(2)
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap HOST:PORT[,HOST:PORT]")
	replicas := flag.Int("replicas", 1, "replication factor of the topic")
	wait := flag.Duration("wait", 15*time.Second, "how long to poll for the new topic's records")
	flag.Parse()
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "usage: go run . -brokers HOST:PORT [-replicas N] [-wait 15s]")
		os.Exit(2)
	}
	seeds := strings.Split(*brokers, ",")
	ctx := context.Background()
	tag := fmt.Sprintf("%x", time.Now().UnixNano())[:10]
	topic := "repro-unread-" + tag

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		fail(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	create := func() {
		if _, err := adm.CreateTopic(ctx, partitions, int16(*replicas), nil, topic); err != nil {
			fail(err)
		}
		time.Sleep(time.Second) // every broker learns it
	}
	create()
	// a producer of its own for each topic: franz-go's producer does not adopt a re-created topic's id either (its
	// buffered records for the topic fail UNKNOWN_TOPIC_ID), and this program's subject is the consumer
	feed := func(n int, prefix string) {
		producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			fail(err)
		}
		defer producer.Close()
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s%d", prefix, i))}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				fail(err)
			}
		}
	}
	var warned atomic.Bool
	logger := kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("repro-"+tag), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.WithLogger(watching{logger, &warned}))
	if err != nil {
		fail(err)
	}
	defer consumer.Close()
	read := func(want int, limit time.Duration) int {
		got := 0
		deadline := time.Now().Add(limit)
		for got < want && time.Now().Before(deadline) {
			poll, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fetches := consumer.PollFetches(poll)
			cancel()
			got += fetches.NumRecords()
		}
		return got
	}
	feed(20, "a")
	first := read(20, 30*time.Second)
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		fail(err)
	}
	say("created %s, read and committed %d records of it (franz-go)", topic, first)

	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		fail(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		listed, err := adm.ListTopics(ctx, topic)
		if err == nil && !listed.Has(topic) {
			break
		}
	}
	create()
	feed(20, "b")
	say("deleted %s, created it again and wrote 20 records to it", topic)
	second := read(20, *wait)
	if second < 20 {
		say("SYMPTOM: the consumer read %d of the 20 records of the re-created topic in %v (the new topic id not "+
			"adopted: %v; its fetches are answered UNKNOWN_TOPIC_ID)", second, *wait, warned.Load())
		os.Exit(1)
	}
	say("read all %d records of the re-created topic: no symptom", second)
}

// watching passes the client's log on and notes its warning about a topic's new id.
type watching struct {
	kgo.Logger
	warned *atomic.Bool
}

func (w watching) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if strings.Contains(msg, "we do not adopt the new ID") {
		w.warned.Store(true)
		w.Logger.Log(level, msg, keyvals...)
	}
}
