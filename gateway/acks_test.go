package gateway

import (
	"net/http"
	"testing"
	"time"
)

func TestAckTrail(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name string
		acks []struct {
			at  int
			seq uint64
		}
		asOf int
		want uint64
	}{
		{"nothing acknowledged yet", nil, 5000, 7},
		{"an ack after the time asked about does not count", []struct {
			at  int
			seq uint64
		}{{100, 9}, {900, 12}}, 500, 9},
		{"acks folded into base still count", []struct {
			at  int
			seq uint64
		}{{100, 9}, {2500, 20}, {3000, 25}}, 2600, 20},
		{"acks within one grain merge, the later seq wins", []struct {
			at  int
			seq uint64
		}{{100, 9}, {105, 11}}, 106, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ackTrail{hold: relayHold}
			a.reset(7)
			for _, k := range tc.acks {
				a.record(ms(k.at), k.seq)
			}
			if got := a.asOf(ms(tc.asOf)); got != tc.want {
				t.Fatalf("asOf(%d ms) = %d, want %d", tc.asOf, got, tc.want)
			}
			if len(a.samples) > 1+int(relayHold/ackGrain) {
				t.Fatalf("trail kept %d samples", len(a.samples))
			}
		})
	}
}

func TestAckHold(t *testing.T) {
	for ua, want := range map[string]time.Duration{"Tornado/6.5.2": relayHold, "Python/3.11 websocket-client/1.9.2": 0, "": 0,
		"Mozilla/5.0 (X11; Linux x86_64) Chrome/131": browserHold, "Go-http-client/1.1": 0} {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.Header.Set("User-Agent", ua)
		if got := ackHold(r); got != want {
			t.Errorf("ackHold(%q) = %v, want %v", ua, got, want)
		}
	}
}
