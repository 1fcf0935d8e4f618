package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtureEpisode is a controller with observable effects (the real one is agent.Controller).
type fixtureEpisode struct {
	mu       sync.Mutex
	paused   bool
	steps    int
	over     bool
	discards int
}

func (f *fixtureEpisode) ID() string { return "ep-1" }
func (f *fixtureEpisode) Status() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]any{"status": "running", "paused": f.paused, "steps": f.steps, "discards": f.discards, "trace": "/runs/ep-1/trace.ipynb"}
}
func (f *fixtureEpisode) act(change func()) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.over {
		return errors.New("the episode is over")
	}
	change()
	return nil
}
func (f *fixtureEpisode) Pause() error  { return f.act(func() { f.paused = true }) }
func (f *fixtureEpisode) Resume() error { return f.act(func() { f.paused = false }) }
func (f *fixtureEpisode) Step() error   { return f.act(func() { f.steps++ }) }
func (f *fixtureEpisode) Discard() error {
	return f.act(func() { f.discards++ })
}
func (f *fixtureEpisode) TraceJSON() ([]byte, error) {
	return notebookJSON("print(1)"), nil
}

func TestEpisodesAPI(t *testing.T) {
	srv, hs := serveGateway(t, Config{Token: "t"})
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
		{"discard", 200, false, 1},
		{"explode", 404, false, 1},
	}
	for _, tt := range tests {
		var got map[string]any
		mustStatus(t, api(t, hs, "t", "POST", "/api/episodes/ep-1/"+tt.action, nil, &got), tt.want, tt.action)
		if tt.want == 200 && (got["paused"] != tt.paused || got["steps"] != float64(tt.steps) ||
			(tt.action == "discard") != (got["discards"] == float64(1))) {
			t.Fatalf("%s: model %v", tt.action, got)
		}
	}
	var tr map[string]any
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes/ep-1/trace", nil, &tr), 200, "trace")
	if tr["nbformat"] != float64(4) {
		t.Errorf("trace: %v", tr)
	}
	ep.mu.Lock()
	ep.over = true
	ep.mu.Unlock()
	var refused errorBody
	mustStatus(t, api(t, hs, "t", "POST", "/api/episodes/ep-1/pause", nil, &refused), http.StatusConflict, "pause an episode that is over")
	if !strings.Contains(refused.Message, "the episode is over") {
		t.Errorf("refusal message: %+v", refused)
	}
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes/ep-1/pause", nil, nil), 405, "GET on an action")
	mustStatus(t, api(t, hs, "t", "POST", "/api/episodes/nope/pause", nil, nil), 404, "unknown episode")
	srv.RemoveEpisode("ep-1")
	mustStatus(t, api(t, hs, "t", "GET", "/api/episodes/ep-1", nil, nil), 404, "removed episode")
}

// TestLiveKernelSpec: an added kernel listed under a spec of its own shows in /api/kernelspecs,
// "starting" that spec connects to it, and the restart and shutdown the gateway refuses are listed on
// the episode for JupyterLab to show.
func TestLiveKernelSpec(t *testing.T) {
	srv, hs := startGateway(t, Config{Token: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k := launchOutside(t, ctx)
	for _, bad := range []LiveSpec{{Name: "Has Spaces"}, {Name: "pyrualean"}} {
		if _, err := srv.AddLiveKernel(k, bad); err == nil {
			t.Errorf("AddLiveKernel(%q) accepted", bad.Name)
		}
	}
	id, err := srv.AddLiveKernel(k, LiveSpec{Name: "pyrualean-episode-ep-1", DisplayName: "pyrualean episode ep-1 (live)", Base: "pyrualean"})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddEpisode(&fixtureEpisode{}, id)
	var specs struct {
		Kernelspecs map[string]struct {
			Spec struct {
				DisplayName string `json:"display_name"`
				Language    string `json:"language"`
			} `json:"spec"`
			Resources map[string]string `json:"resources"`
		} `json:"kernelspecs"`
	}
	mustStatus(t, api(t, hs, "t", "GET", "/api/kernelspecs", nil, &specs), 200, "kernelspecs")
	live, ok := specs.Kernelspecs["pyrualean-episode-ep-1"]
	if !ok || live.Spec.DisplayName != "pyrualean episode ep-1 (live)" || live.Spec.Language != "python" || live.Resources["logo-64x64"] == "" {
		t.Fatalf("live spec listed as %+v (ok %v)", live, ok)
	}
	mustStatus(t, api(t, hs, "t", "GET", "/kernelspecs/pyrualean-episode-ep-1/logo-64x64.png", nil, nil), 200, "live spec logo")
	var m kernelModel
	mustStatus(t, api(t, hs, "t", "POST", "/api/kernels", map[string]any{"name": "pyrualean-episode-ep-1"}, &m), 201, "start the live spec")
	if m.ID != id || m.Name != "pyrualean-episode-ep-1" {
		t.Fatalf("starting the live spec gave %+v, want kernel %s", m, id)
	}
	var ks []kernelModel
	api(t, hs, "t", "GET", "/api/kernels", nil, &ks)
	if len(ks) != 1 {
		t.Fatalf("kernels after connecting to the live one: %+v", ks)
	}
	mustStatus(t, api(t, hs, "t", "POST", "/api/kernels/"+id+"/restart", nil, nil), 403, "restart a live kernel")
	mustStatus(t, api(t, hs, "t", "DELETE", "/api/kernels/"+id, nil, nil), 204, "shut down a live kernel")
	var eps []map[string]any
	api(t, hs, "t", "GET", "/api/episodes", nil, &eps)
	refusals, _ := eps[0]["refusals"].([]any)
	if len(refusals) != 2 || eps[0]["agent_session"] != k.Client().Session() || eps[0]["kernel_name"] != "pyrualean-episode-ep-1" {
		t.Fatalf("episode model: %v", eps[0])
	}
	if r, _ := refusals[0].(map[string]any); r["action"] != "restart" || r["reason"] != "restarting it would lose the robot" ||
		!strings.Contains(r["message"].(string), "(restart refused)") {
		t.Errorf("first refusal: %v", refusals[0])
	}
	if k.Err() != nil {
		t.Errorf("the live kernel died: %v", k.Err())
	}
}
