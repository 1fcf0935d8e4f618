package gateway

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// phaseEpisode is a live episode whose phase the test sets.
type phaseEpisode struct{ phase atomic.Value }

func (e *phaseEpisode) ID() string { return "busy-episode" }
func (e *phaseEpisode) Status() any {
	return map[string]any{"state": "running", "phase": e.phase.Load()}
}
func (e *phaseEpisode) Pause() error  { return nil }
func (e *phaseEpisode) Resume() error { return nil }
func (e *phaseEpisode) Step() error   { return nil }

// TestAgentThinkingShowsBusy: while a live episode's agent thinks, its idle kernel is shown busy to
// clients (a status of the kernel's session, no parent) and in the kernel model; idle again when it
// acts, and a client that connects meanwhile starts busy. A person's cell run meanwhile still ends
// with the kernel's own idle, followed by busy while the agent still thinks.
func TestAgentThinkingShowsBusy(t *testing.T) {
	const tok = "tok"
	srv, hs := startGateway(t, Config{Token: tok})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k := launchOutside(t, ctx)
	id := srv.AddKernel(k, "pyrualean")
	ep := &phaseEpisode{}
	ep.phase.Store("cell")
	srv.AddEpisode(ep, id)
	defer srv.RemoveEpisode(ep.ID())

	session := uuid.NewString()
	c, _, err := dialWS(t, wsURL(hs.URL, id, session, tok), session, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	status := func(state string) func(*wireMsg) bool {
		return func(m *wireMsg) bool {
			var st struct {
				ExecutionState string `json:"execution_state"`
			}
			return m.MsgType == "status" && json.Unmarshal(m.Content, &st) == nil && st.ExecutionState == state &&
				string(m.ParentHeader) == "{}"
		}
	}
	model := func() string {
		var km kernelModel
		mustStatus(t, api(t, hs, tok, "GET", "/api/kernels/"+id, nil, &km), 200, "model")
		return km.ExecutionState
	}
	c.until(10*time.Second, "the current state", status(StateIdle))

	ep.phase.Store("thinking")
	c.until(5*time.Second, "busy while the agent thinks", status(StateBusy))
	if got := model(); got != StateBusy {
		t.Errorf("kernel model while the agent thinks: %s", got)
	}
	late := uuid.NewString()
	c2, _, err := dialWS(t, wsURL(hs.URL, id, late, tok), late, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2.until(5*time.Second, "a new client starts busy", status(StateBusy))

	// a person's cell while the agent thinks: the kernel's own idle, then busy again
	c.runCell("1 + 1", 30*time.Second)
	c.until(5*time.Second, "busy again after the person's cell", status(StateBusy))

	ep.phase.Store("cell")
	c.until(5*time.Second, "idle once the agent acts", status(StateIdle))
	if got := model(); got != StateIdle {
		t.Errorf("kernel model once the agent acts: %s", got)
	}
}
