package main

// The ids every record carries (chaos/ids.py): record id "<attempt id>.<index>", attempt id
// "<run tag>.<process>.<attempt number>", in the value (JSON, padded to about --size bytes) and in headers.

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

func attemptID(run, process string, n int64) string { return fmt.Sprintf("%s.%s.%d", run, process, n) }

func recordID(run, process string, n int64, index int) string {
	return fmt.Sprintf("%s.%d", attemptID(run, process, n), index)
}

// keyNumber is chaos/workloads/txn_producer.py key_number: CRC-32 of the id, mod keys.
func keyNumber(rid string, keys int) int { return int(crc32.ChecksumIEEE([]byte(rid)) % uint32(keys)) }

func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// encodeValue is chaos/ids.py encode_value: {"id","attempt","producer"[,"input"][,"pad"]}, compact.
func encodeValue(rid, attempt, producer, input string, size int) []byte {
	body := `{"id":` + quoted(rid) + `,"attempt":` + quoted(attempt) + `,"producer":` + quoted(producer)
	if input != "" {
		body += `,"input":` + quoted(input)
	}
	if pad := size - len(body) - 1 - 9; pad > 0 {
		body += `,"pad":"` + strings.Repeat("x", pad) + `"`
	}
	return []byte(body + "}")
}

func headers(rid, attempt, producer, input string) []kgo.RecordHeader {
	h := []kgo.RecordHeader{{Key: "txnlab.id", Value: []byte(rid)}, {Key: "txnlab.attempt", Value: []byte(attempt)},
		{Key: "txnlab.producer", Value: []byte(producer)}}
	if input != "" {
		h = append(h, kgo.RecordHeader{Key: "txnlab.input", Value: []byte(input)})
	}
	return h
}

// idOf is the txnlab record id of a consumed record (its txnlab.id header; null without one), as
// chaos/workloads/observer.py record_id_of reads it.
func idOf(r *kgo.Record) any {
	for _, h := range r.Headers {
		if h.Key == "txnlab.id" {
			return string(h.Value)
		}
	}
	return nil
}
