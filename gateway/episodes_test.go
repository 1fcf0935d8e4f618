package gateway

import (
	"sync"
	"testing"
)

// fixtureEpisode is a controller with observable effects (the real one is agent.Controller).
type fixtureEpisode struct {
	mu     sync.Mutex
	paused bool
	steps  int
}

func (f *fixtureEpisode) ID() string { return "ep-1" }
func (f *fixtureEpisode) Status() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]any{"status": "running", "paused": f.paused, "steps": f.steps, "trace": "/runs/ep-1/trace.ipynb"}
}
func (f *fixtureEpisode) Pause()  { f.mu.Lock(); f.paused = true; f.mu.Unlock() }
func (f *fixtureEpisode) Resume() { f.mu.Lock(); f.paused = false; f.mu.Unlock() }
func (f *fixtureEpisode) Step()   { f.mu.Lock(); f.steps++; f.mu.Unlock() }

func TestEpisodesAPI(t *testing.T) {
	srv, hs := startGateway(t, Config{Token: "t"})
	ep := &fixtureEpisode{}
	srv.AddEpisode(ep, "11111111-2222-4333-8444-555555555555")

	var list []map[string]any
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes", nil, &list), 200, "list")
	if len(list) != 1 || list[0]["id"] != "ep-1" || list[0]["kernel_id"] != "11111111-2222-4333-8444-555555555555" || list[0]["trace"] != "/runs/ep-1/trace.ipynb" {
		t.Fatalf("episodes: %v", list)
	}
	tests := []struct {
		action string
		want   int
		paused bool
		steps  int
	}{
		{"pause", 200, true, 0},
		{"step", 200, true, 1},
		{"resume", 200, false, 1},
		{"explode", 404, false, 1},
	}
	for _, tt := range tests {
		var got map[string]any
		mustStatus(t, api(t, hs, "t", "POST", "/api/episodes/ep-1/"+tt.action, nil, &got), tt.want, tt.action)
		if tt.want == 200 && (got["paused"] != tt.paused || got["steps"] != float64(tt.steps)) {
			t.Fatalf("%s: model %v", tt.action, got)
		}
	}
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes/ep-1/pause", nil, nil), 405, "GET on an action")
	mustStatus(t, api(t, hs, "t", "POST", "/api/episodes/nope/pause", nil, nil), 404, "unknown episode")
	srv.RemoveEpisode("ep-1")
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes/ep-1", nil, nil), 404, "removed episode")
}
