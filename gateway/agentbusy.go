package gateway

import (
	"encoding/json"
	"time"
)

// A live episode's kernel is idle while its agent decides what to run next (a model call can take
// minutes), and JupyterLab's status bar then said Idle although someone was at work on it. The gateway
// shows such a kernel busy: it follows the episode's phase (its controller's Status, "thinking") and,
// while the kernel itself is idle, tells clients busy with a status of the kernel's own session (no
// parent: no request of any client's waits on it), then idle when the agent acts or pauses.

// agentPoll is how often a live episode's phase is read.
const agentPoll = 200 * time.Millisecond

// shownStateLocked is the execution state clients are told: the kernel's, or busy while the agent
// thinks on an idle kernel.
func (mk *managedKernel) shownStateLocked() string {
	st := mk.st.modelState()
	if st == StateIdle && mk.agentThinking {
		return StateBusy
	}
	return st
}

// setAgentThinking records whether the agent is deciding and, when that changes what clients are
// shown, tells them.
func (mk *managedKernel) setAgentThinking(on bool) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed || mk.agentThinking == on {
		return
	}
	before := mk.shownStateLocked()
	mk.agentThinking = on
	if after := mk.shownStateLocked(); after != before {
		mk.broadcastLocked(mk.syntheticStatusLocked(after))
	}
}

// followAgent mirrors an episode's thinking phase onto its kernel until the episode is removed or the
// server closes.
func (s *Server) followAgent(e *episodeEntry) {
	defer s.wg.Done()
	t := time.NewTicker(agentPoll)
	defer t.Stop()
	for {
		select {
		case <-e.gone:
			s.agentThinking(e.kernelID, false)
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.agentThinking(e.kernelID, phaseOf(e.ctl.Status()) == "thinking")
	}
}

func (s *Server) agentThinking(kernelID string, on bool) {
	if mk, err := s.kernel(kernelID); err == nil {
		mk.setAgentThinking(on)
	}
}

// phaseOf reads "phase" from a controller's status (agent.EpisodeStatus, or anything that marshals to
// an object with it).
func phaseOf(status any) string {
	raw, err := json.Marshal(status)
	if err != nil {
		return ""
	}
	var st struct {
		Phase string `json:"phase"`
	}
	_ = json.Unmarshal(raw, &st)
	return st.Phase
}
