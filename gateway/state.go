package gateway

// Execution states as Jupyter reports them in the kernel model and IOPub status messages.
const (
	StateStarting   = "starting"
	StateIdle       = "idle"
	StateBusy       = "busy"
	StateRestarting = "restarting"
	StateDead       = "dead"
)

// untrackedTypes do not move execution_state or last_activity: probes and outputs (jupyter_server's
// kernelmanager list). A kernel_info nudge or a debug request during a long execute must not flip the
// kernel to idle.
var untrackedTypes = map[string]bool{
	"comm_info_request": true, "comm_info_reply": true, "kernel_info_request": true, "kernel_info_reply": true,
	"shutdown_request": true, "shutdown_reply": true, "interrupt_request": true, "interrupt_reply": true,
	"debug_request": true, "debug_reply": true, "stream": true, "display_data": true, "update_display_data": true,
	"execute_input": true, "execute_result": true, "error": true, "status": true, "clear_output": true,
	"debug_event": true, "input_request": true, "input_reply": true, "iopub_welcome": true,
}

func tracked(msgType string) bool { return msgType != "" && !untrackedTypes[msgType] }

// execState is the per-kernel execution_state machine, fed by the always-on IOPub subscription.
// It counts the tracked requests that went busy and not yet idle, so overlapping requests (shell plus
// control) leave the kernel busy until the last one finishes.
type execState struct {
	state string
	busy  map[string]bool // parent msg ids of tracked requests now busy
}

func newExecState() *execState { return &execState{state: StateStarting, busy: map[string]bool{}} }

// observeStatus feeds one IOPub status message (its execution_state and its parent's msg id and type).
func (s *execState) observeStatus(execution, parentID, parentType string) {
	switch s.state {
	case StateDead:
		return // only a restart (reset) brings a dead kernel back
	}
	if !tracked(parentType) {
		// Probes never make a kernel busy; but the first status after start or restart means it is up.
		if s.state == StateStarting || s.state == StateRestarting {
			if execution == StateIdle || execution == StateBusy {
				s.state = StateIdle
			}
		}
		return
	}
	switch execution {
	case StateBusy:
		s.busy[parentID] = true
		s.state = StateBusy
	case StateIdle:
		delete(s.busy, parentID)
		if len(s.busy) == 0 {
			s.state = StateIdle
		}
	case StateStarting:
		s.busy = map[string]bool{}
		s.state = StateStarting
	}
}

// set forces a state (restarting, dead, or idle once a start/restart finished).
func (s *execState) set(state string) {
	s.state = state
	if state != StateBusy {
		s.busy = map[string]bool{}
	}
}

// modelState is what the REST model shows: Jupyter reports a started kernel that has said nothing yet as idle.
func (s *execState) modelState() string {
	if s.state == StateStarting {
		return StateIdle
	}
	return s.state
}
