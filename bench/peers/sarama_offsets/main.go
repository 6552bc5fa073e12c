// Command sarama-offsets is the peer of txnlab's exporter in bench/exporter_scrape.py: a stand-in for
// danielqsj/kafka_exporter, whose module the Go proxy refuses to serve here (403, see docs/benchmarks.md).
//
// It does, on every scrape, what kafka_exporter's collector does for partition offsets, with the same
// library (IBM/sarama): refresh the cluster metadata when the refresh interval has passed (kafka_exporter's
// --refresh.metadata, default 30s), then spread the topics over min(topics/2, topic.workers) goroutines
// and, for every partition of every topic, ask the partition's leader for its newest offset with
// client.GetOffset(topic, partition, OffsetNewest): one ListOffsets request per partition, in
// read_uncommitted isolation, so the value is the high watermark. With -oldest it also asks for the
// oldest offset, as kafka_exporter does by default. The values are served on /metrics as
// kafka_topic_partition_current_offset{topic,partition} (and kafka_topic_partition_oldest_offset).
//
// Our own code, written for the benchmark: no kafka_exporter source is copied. Consumer-group offsets,
// replicas and ISR metrics of kafka_exporter are left out (they are not part of the offsets scrape
// the benchmark compares).
package main

import (
	"flag"
	"log"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	currentOffset = prometheus.NewDesc("kafka_topic_partition_current_offset",
		"Newest offset (high watermark) of the partition, from its leader", []string{"topic", "partition"}, nil)
	oldestOffset = prometheus.NewDesc("kafka_topic_partition_oldest_offset",
		"Oldest offset of the partition, from its leader", []string{"topic", "partition"}, nil)
	scrapeErrors = prometheus.NewDesc("sarama_offsets_scrape_errors",
		"Partitions whose offset could not be read in this scrape", nil, nil)
	scrapeDuration = prometheus.NewDesc("sarama_offsets_scrape_duration_seconds",
		"Wall time of this scrape's metadata refresh and offset requests", nil, nil)
)

// offsetsCollector reads every partition's offsets on each Collect; one collection at a time.
type offsetsCollector struct {
	client       sarama.Client
	exclude      *regexp.Regexp
	maxWorkers   int
	oldest       bool
	refreshEvery time.Duration

	mu          sync.Mutex
	nextRefresh time.Time
}

func (c *offsetsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{currentOffset, oldestOffset, scrapeErrors, scrapeDuration} {
		ch <- d
	}
}

func (c *offsetsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := time.Now()
	c.refreshMetadata(started)
	topics, err := c.client.Topics()
	if err != nil {
		log.Printf("cannot list topics: %v", err)
		return
	}
	var failed atomic.Int64
	work := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < workers(len(topics), c.maxWorkers); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for topic := range work {
				failed.Add(c.collectTopic(topic, ch))
			}
		}()
	}
	for _, topic := range topics {
		if !c.exclude.MatchString(topic) {
			work <- topic
		}
	}
	close(work)
	wg.Wait()
	ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, float64(failed.Load()))
	ch <- prometheus.MustNewConstMetric(scrapeDuration, prometheus.GaugeValue, time.Since(started).Seconds())
}

func (c *offsetsCollector) refreshMetadata(now time.Time) {
	if now.Before(c.nextRefresh) {
		return
	}
	if err := c.client.RefreshMetadata(); err != nil {
		log.Printf("metadata refresh failed, using cached metadata: %v", err)
	}
	c.nextRefresh = now.Add(c.refreshEvery)
}

// collectTopic sends the topic's offset requests one partition after the other; returns the failures.
func (c *offsetsCollector) collectTopic(topic string, ch chan<- prometheus.Metric) int64 {
	partitions, err := c.client.Partitions(topic)
	if err != nil {
		log.Printf("cannot list partitions of %s: %v", topic, err)
		return 1
	}
	var failed int64
	for _, partition := range partitions {
		labels := []string{topic, strconv.Itoa(int(partition))}
		failed += c.emit(ch, currentOffset, topic, partition, sarama.OffsetNewest, labels)
		if c.oldest {
			failed += c.emit(ch, oldestOffset, topic, partition, sarama.OffsetOldest, labels)
		}
	}
	return failed
}

func (c *offsetsCollector) emit(ch chan<- prometheus.Metric, desc *prometheus.Desc, topic string, partition int32,
	which int64, labels []string) int64 {
	offset, err := c.client.GetOffset(topic, partition, which)
	if err != nil {
		log.Printf("cannot read offset of %s-%d: %v", topic, partition, err)
		return 1
	}
	ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(offset), labels...)
	return 0
}

// workers is kafka_exporter's worker count: half the topics, at most maxWorkers, at least one.
func workers(topics, maxWorkers int) int {
	n := topics
	if n > 1 {
		n = min(n/2, maxWorkers)
	}
	return max(n, 1)
}

func main() {
	servers := flag.String("kafka.server", "127.0.0.1:9092", "bootstrap servers, host:port[,host:port...]")
	listen := flag.String("web.listen-address", "127.0.0.1:9308", "address to serve /metrics on")
	exclude := flag.String("topic.exclude", "^$", "regex of topics to skip")
	maxWorkers := flag.Int("topic.workers", 100, "at most this many topic goroutines (kafka_exporter default)")
	refresh := flag.Duration("refresh.metadata", 30*time.Second, "metadata refresh interval (kafka_exporter default)")
	oldest := flag.Bool("oldest", false, "also read each partition's oldest offset, as kafka_exporter does")
	flag.Parse()

	config := sarama.NewConfig()
	config.ClientID = "sarama-offsets"
	config.Version = sarama.V2_1_0_0
	client, err := sarama.NewClient(strings.Split(*servers, ","), config)
	if err != nil {
		log.Fatalf("cannot connect to %s: %v", *servers, err)
	}
	defer client.Close()

	registry := prometheus.NewRegistry()
	registry.MustRegister(&offsetsCollector{client: client, exclude: regexp.MustCompile(*exclude),
		maxWorkers: *maxWorkers, oldest: *oldest, refreshEvery: *refresh})
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	log.Printf("serving http://%s/metrics for %s", *listen, *servers)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
