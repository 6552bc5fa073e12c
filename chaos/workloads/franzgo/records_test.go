package main

// The ids as chaos/ids.py makes them: tests/unit/test_client_ids.py writes its vectors (from the Python
// reference) to $TXNLAB_ID_VECTORS and runs this test; without the variable there is nothing to compare.

import (
	"encoding/json"
	"os"
	"testing"
)

type vector struct {
	Run      string            `json:"run"`
	Process  string            `json:"process"`
	Attempt  int64             `json:"attempt_no"`
	Index    int               `json:"index"`
	Input    string            `json:"input"`
	Size     int               `json:"size"`
	Keys     int               `json:"keys"`
	RecordID string            `json:"record_id"`
	Value    string            `json:"value"`
	Key      int               `json:"key_number"`
	Headers  map[string]string `json:"headers"`
}

func TestIdsMatchPython(t *testing.T) {
	path := os.Getenv("TXNLAB_ID_VECTORS")
	if path == "" {
		t.Skip("TXNLAB_ID_VECTORS not set: run tests/unit/test_client_ids.py")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vectors []vector
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		rid := recordID(v.Run, v.Process, v.Attempt, v.Index)
		attempt := attemptID(v.Run, v.Process, v.Attempt)
		if rid != v.RecordID {
			t.Errorf("record id %q, Python %q", rid, v.RecordID)
		}
		if got := string(encodeValue(rid, attempt, v.Process, v.Input, v.Size)); got != v.Value {
			t.Errorf("value of %s size %d:\n go     %s\n python %s", rid, v.Size, got, v.Value)
		}
		if got := keyNumber(rid, v.Keys); got != v.Key {
			t.Errorf("key number of %s mod %d: %d, Python %d", rid, v.Keys, got, v.Key)
		}
		hs := map[string]string{}
		for _, h := range headers(rid, attempt, v.Process, v.Input) {
			hs[h.Key] = string(h.Value)
		}
		if len(hs) != len(v.Headers) {
			t.Errorf("headers of %s: %v, Python %v", rid, hs, v.Headers)
		}
		for k, want := range v.Headers {
			if hs[k] != want {
				t.Errorf("header %s of %s: %q, Python %q", k, rid, hs[k], want)
			}
		}
	}
	if len(vectors) == 0 {
		t.Fatal("no vectors")
	}
}
