package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/robotapi"
)

func TestParseSeeds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "0-3", want: []int{0, 1, 2, 3}},
		{in: "5", want: []int{5}},
		{in: "7,0,2-3,3", want: []int{0, 2, 3, 7}},
		{in: "3-1", bad: true},
		{in: "-1", bad: true},
		{in: "a", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseSeeds(c.in)
		if (err != nil) != c.bad || (!c.bad && !slices.Equal(got, c.want)) {
			t.Errorf("ParseSeeds(%q) = %v, %v", c.in, got, err)
		}
	}
}

var tasks = []robotapi.Task{{Name: "a", Family: "f1"}, {Name: "b", Family: "f2"}, {Name: "c", Family: "f1"}}

func TestSelectTasks(t *testing.T) {
	for _, c := range []struct {
		sel  string
		want []string
		bad  bool
	}{
		{sel: "all", want: []string{"a", "b", "c"}},
		{sel: "family:f1", want: []string{"a", "c"}},
		{sel: "b,family:f1,a", want: []string{"b", "a", "c"}},
		{sel: "family:nope", bad: true},
		{sel: "z", bad: true},
	} {
		got, err := SelectTasks(c.sel, tasks)
		var names []string
		for _, t := range got {
			names = append(names, t.Name)
		}
		if (err != nil) != c.bad || (!c.bad && !slices.Equal(names, c.want)) {
			t.Errorf("SelectTasks(%q) = %v, %v", c.sel, names, err)
		}
	}
}

func list(context.Context, string) ([]robotapi.Task, error) { return tasks, nil }

// TestExpandIDs: ids are deterministic, name every coordinate, put cells before tools, and the
// twins share a pair key.
func TestExpandIDs(t *testing.T) {
	m := Matrix{Rows: []Row{{Robot: "tabletop", Tasks: "a", Seeds: "0-1", Arms: []string{"tools", "cells"}, Runtime: "openai",
		Models: []string{"org/m:1"}, Settings: map[string]string{"images": "none"}}}}
	eps, err := Expand(context.Background(), m, []robotapi.RobotInfo{{Name: "tabletop"}}, list)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Expand(context.Background(), m, []robotapi.RobotInfo{{Name: "tabletop"}}, list)
	tag := SettingsTag(map[string]string{"images": "none"})
	want := "tabletop/default/a/0/cells/openai-org_m_1/" + tag
	if len(eps) != 4 || eps[0].ID != want || eps[1].Arm != "tools" || eps[0].PairKey() != eps[1].PairKey() || eps[1].Twin() != eps[0].ID {
		t.Fatalf("episodes %+v", eps)
	}
	for i := range eps {
		if eps[i].ID != again[i].ID {
			t.Errorf("id %d not deterministic: %s vs %s", i, eps[i].ID, again[i].ID)
		}
	}
	if SettingsTag(nil) != "default" || SettingsTag(map[string]string{"images": "on-demand"}) == tag {
		t.Error("settings tags")
	}
	m.Rows = append(m.Rows, m.Rows[0])
	if _, err := Expand(context.Background(), m, []robotapi.RobotInfo{{Name: "tabletop"}}, list); err == nil {
		t.Error("a repeated row was accepted")
	}
}

// TestExpandSamples: K samples of an instance are K episodes whose ids end in sample-N (K = 1 keeps
// the ids as they were), with distinct sampling seeds that resume alike and reach the endpoint as
// the request's seed; a group's samples share their setup, pair with their twins, and are refused
// when a row's own extra body would override their seeds.
func TestExpandSamples(t *testing.T) {
	robots := []robotapi.RobotInfo{{Name: "tabletop"}}
	row := Row{Robot: "tabletop", Tasks: "a", Seeds: "0", Arms: []string{"cells", "tools"}, Runtime: "openai", Models: []string{"m"}}
	one, err := Expand(context.Background(), Matrix{Rows: []Row{row}}, robots, list)
	if err != nil || len(one) != 2 || one[0].ID != "tabletop/default/a/0/cells/openai-m/default" || one[0].Spec.Sample != nil {
		t.Fatalf("K=1: %v %+v", err, one)
	}
	row.Samples = 3
	eps, err := Expand(context.Background(), Matrix{Rows: []Row{row}}, robots, list)
	if err != nil || len(eps) != 6 {
		t.Fatalf("K=3: %v %d episodes", err, len(eps))
	}
	seeds := map[int64]bool{}
	for i, e := range eps {
		k := i / 2
		want := fmt.Sprintf("tabletop/default/a/0/%s/openai-m/default/sample-%d", e.Arm, k)
		sm := e.Spec.Sample
		if e.ID != want || e.Instance() != "tabletop/default/a/0/"+e.Arm+"/openai-m/default" || sm == nil || sm.Index != k || sm.Of != 3 ||
			e.Spec.Policy.OpenAI.ExtraBody["seed"] != sm.Seed || e.Setup() != "openai-m/default" {
			t.Fatalf("episode %d: %s %+v %v", i, e.ID, sm, e.Spec.Policy.OpenAI.ExtraBody)
		}
		if e.Arm == "cells" {
			seeds[sm.Seed] = true
			if tw := eps[i+1]; tw.Twin() != e.ID || tw.PairKey() != e.PairKey() {
				t.Fatalf("twins: %s %s", e.ID, tw.ID)
			}
		}
	}
	again, _ := Expand(context.Background(), Matrix{Rows: []Row{row}}, robots, list)
	if len(seeds) != 3 || again[4].Spec.Sample.Seed != eps[4].Spec.Sample.Seed {
		t.Fatalf("sampling seeds %v not distinct or not stable", seeds)
	}
	row.Settings = map[string]string{"openai-extra-body": `{"seed": 1}`}
	if _, err := Expand(context.Background(), Matrix{Rows: []Row{row}}, robots, list); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("a row's own seed was accepted: %v", err)
	}
}

func TestWilson(t *testing.T) {
	// Reference values (Wilson score interval, z = 1.96).
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{4, 4, 0.5101, 1},
		{0, 10, 0, 0.2775},
		{5, 10, 0.2366, 0.7634},
	} {
		iv := Wilson(c.k, c.n)
		if math.Abs(iv.Lo-c.lo) > 1e-3 || math.Abs(iv.Hi-c.hi) > 1e-3 {
			t.Errorf("Wilson(%d, %d) = %+v", c.k, c.n, iv)
		}
	}
	if Wilson(0, 0) != nil {
		t.Error("Wilson(0, 0) not nil")
	}
}

func TestBootstrapRatio(t *testing.T) {
	left, right := []float64{10, 12, 8, 11, 9}, []float64{5, 6, 4, 5, 5}
	iv := BootstrapRatio(left, right, 2000)
	if iv == nil || math.Abs(iv.Value-2) > 1e-9 || iv.Lo > iv.Value || iv.Hi < iv.Value || iv.Lo < 1.5 || iv.Hi > 2.5 {
		t.Fatalf("ratio %+v", iv)
	}
	if again := BootstrapRatio(left, right, 2000); *again != *iv {
		t.Error("not reproducible")
	}
	if BootstrapRatio(nil, nil, 10) != nil || BootstrapRatio([]float64{1}, []float64{0}, 10) != nil {
		t.Error("empty or zero denominators give an interval")
	}
}

// TestEndpointsShareBackoff: after one 429 with Retry-After, no request reaches the endpoint before
// then, whichever episode sends it; and at most Max are in flight.
func TestEndpointsShareBackoff(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	var inFlight, peak atomic.Int32
	first := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		limited := first
		first = false
		mu.Unlock()
		if limited {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}))
	defer srv.Close()
	e := &Endpoints{Max: 2}
	c := e.Client()
	resp, err := c.Get(srv.URL)
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := c.Get(srv.URL); err == nil {
				r.Body.Close()
			}
		}()
	}
	wg.Wait()
	if len(arrivals) != 7 {
		t.Fatalf("%d arrivals", len(arrivals))
	}
	for _, a := range arrivals[1:] {
		if a.Sub(arrivals[0]) < 900*time.Millisecond {
			t.Errorf("a request arrived %v after the 429", a.Sub(arrivals[0]))
		}
	}
	if peak.Load() > 2 {
		t.Errorf("%d requests in flight, max 2", peak.Load())
	}
}

// writeResult stands for an episode's result.json (the runner reads only its status fields).
func writeResult(dir, status string, ok bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"schema": agent.ResultSchema, "status": status, "environment_success": ok})
	return os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644)
}

// TestRunnerRetriesAndResume: a boot_error is retried (bounded), an error is an outcome and is
// kept; a second run re-runs only what is still retryable, and a cancelled suite starts nothing new.
func TestRunnerRetriesAndResume(t *testing.T) {
	dir := t.TempDir()
	m := Matrix{Rows: []Row{{Robot: "tabletop", Tasks: "all", Seeds: "0", Arms: []string{"cells"}, Runtime: "replay"}}}
	eps, err := Expand(context.Background(), m, []robotapi.RobotInfo{{Name: "tabletop"}}, list)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	outcome := map[string]string{"a": agent.StatusCompleted, "b": agent.StatusBootError, "c": agent.StatusError}
	exec := ExecutorFunc(func(ctx context.Context, j Job) Outcome {
		mu.Lock()
		calls[j.Task]++
		mu.Unlock()
		st := outcome[j.Task]
		if err := writeResult(j.Dir, st, st == agent.StatusCompleted); err != nil {
			return Outcome{Status: agent.StatusBootError, Err: err}
		}
		return Outcome{Status: st}
	})
	var events []Event
	r := &Runner{Dir: dir, Engine: Local{Jobs: 2}, Exec: exec, Retries: 2, Backoff: time.Millisecond, Events: func(ev Event) { events = append(events, ev) }}
	man, err := r.Run(context.Background(), m, eps)
	if err != nil {
		t.Fatal(err)
	}
	if calls["a"] != 1 || calls["b"] != 3 || calls["c"] != 1 {
		t.Errorf("calls %v", calls)
	}
	if st := man.Episodes[eps[1].ID]; st.Status != agent.StatusBootError || st.Attempts != 3 {
		t.Errorf("b: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts", eps[1].ID, "2", "result.json")); err != nil {
		t.Errorf("earlier attempts not kept aside: %v", err)
	}
	// Second run: only b again.
	outcome["b"] = agent.StatusCompleted
	r2 := &Runner{Dir: dir, Engine: Local{Jobs: 2}, Exec: exec, Backoff: time.Millisecond}
	man, err = r2.Run(context.Background(), m, eps)
	if err != nil || calls["a"] != 1 || calls["b"] != 4 || calls["c"] != 1 {
		t.Fatalf("second run: calls %v, %v", calls, err)
	}
	if st := man.Episodes[eps[1].ID]; st.Status != agent.StatusCompleted || st.Attempts != 4 {
		t.Errorf("b after resume: %+v", st)
	}
	recs := LoadRecords(dir, man)
	res := Analyze(recs)
	if res.Finished != 3 || res.Summary.Solved != 2 {
		t.Errorf("results %+v", res)
	}
	// A cancelled context: nothing starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir3 := t.TempDir()
	r3 := &Runner{Dir: dir3, Engine: Local{Jobs: 2}, Exec: exec}
	if _, err := r3.Run(ctx, m, eps); !errors.Is(err, context.Canceled) || calls["a"] != 1 {
		t.Errorf("cancelled run: %v, calls %v", err, calls)
	}
}

// TestLocalAfter: a job waits for the job it names in After.
func TestLocalAfter(t *testing.T) {
	var mu sync.Mutex
	var order []string
	jobs := []Job{{Episode: Episode{ID: "x"}}, {Episode: Episode{ID: "y"}, After: "x"}}
	Local{Jobs: 2}.Run(context.Background(), jobs, func(ctx context.Context, j Job) {
		if j.ID == "x" {
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		order = append(order, j.ID)
		mu.Unlock()
	})
	if !slices.Equal(order, []string{"x", "y"}) {
		t.Errorf("order %v", order)
	}
}

// TestLocalReadyFirst: a job waiting for its twin does not hold a worker: with two workers, z (next
// in plan order after y, which waits for x) starts while x still runs.
func TestLocalReadyFirst(t *testing.T) {
	zStarted := make(chan struct{})
	var mu sync.Mutex
	var order []string
	jobs := []Job{{Episode: Episode{ID: "x"}}, {Episode: Episode{ID: "y"}, After: "x"}, {Episode: Episode{ID: "z"}}}
	Local{Jobs: 2}.Run(context.Background(), jobs, func(ctx context.Context, j Job) {
		switch j.ID {
		case "x":
			select {
			case <-zStarted:
			case <-time.After(10 * time.Second):
				t.Error("z did not start while x ran")
			}
		case "z":
			close(zStarted)
		}
		mu.Lock()
		order = append(order, j.ID)
		mu.Unlock()
	})
	if !slices.Equal(order, []string{"z", "x", "y"}) {
		t.Errorf("order %v", order)
	}
}

// TestLocalStopsTaking: once ctx is done no job starts, and a worker waiting for a twin returns.
func TestLocalStopsTaking(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ran []string
	jobs := []Job{{Episode: Episode{ID: "x"}}, {Episode: Episode{ID: "y"}, After: "x"}, {Episode: Episode{ID: "z"}, After: "x"}}
	err := Local{Jobs: 3}.Run(ctx, jobs, func(ctx context.Context, j Job) {
		ran = append(ran, j.ID) // one worker at a time here: y and z wait for x
		cancel()
	})
	if !errors.Is(err, context.Canceled) || !slices.Equal(ran, []string{"x"}) {
		t.Errorf("err %v, ran %v", err, ran)
	}
}
