package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/agent"
)

// Why a session's episode ended without the policy ending it (result.json's error says which).
var (
	errDisconnected = fmt.Errorf("%w: the OpenEnv client disconnected", context.Canceled)
	errClosed       = fmt.Errorf("%w: the OpenEnv client closed the session", context.Canceled)
	errReset        = fmt.Errorf("%w: the OpenEnv client reset the session", context.Canceled)
	errExpired      = fmt.Errorf("%w: the OpenEnv session expired (no frame within the idle timeout)", context.Canceled)
	errShutdown     = fmt.Errorf("%w: the OpenEnv server shut down", context.Canceled)
)

// session is one WebSocket: frames are read by a goroutine of their own (so a client that goes away
// mid-step cancels the step) and handled one at a time by run, the only writer.
type session struct {
	srv  *Server
	conn *websocket.Conn
	log  *slog.Logger

	ctx    context.Context // ends when the client goes away or the server closes
	cancel context.CancelCauseFunc
	frames chan []byte

	live *episode // the episode of the last reset; nil before
}

// episode is a session's episode: live until ended, then its result.
type episode struct {
	ep      *agent.Episode
	pctx    context.Context // the policy's context: ends at the budget or when the kernel dies
	pcancel context.CancelFunc
	ended   func() // Config.OnEpisode's
	steps   int
	result  *agent.Result // set once the episode has ended
	told    bool          // the client got done=true
	endText string        // why the server ended it, for the client's next step
}

func newSession(s *Server, conn *websocket.Conn) *session {
	ctx, cancel := context.WithCancelCause(s.ctx)
	return &session{srv: s, conn: conn, log: s.log.With("session", conn.RemoteAddr().String()), ctx: ctx, cancel: cancel,
		frames: make(chan []byte)}
}

func (ss *session) run() {
	defer ss.conn.Close()
	go ss.read()
	idle := time.NewTimer(ss.srv.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		var budget <-chan struct{}
		if ss.live != nil && ss.live.result == nil {
			budget = ss.live.pctx.Done()
		}
		select {
		case b := <-ss.frames:
			idle.Stop()
			if stop := ss.handle(b); stop {
				ss.end(errClosed)
				closeConn(ss.conn, websocket.CloseNormalClosure, "")
				return
			}
			idle.Reset(ss.srv.cfg.IdleTimeout)
		case <-budget: // the budget ran out (or the kernel died) while the client was deciding
			ss.endByServer()
		case <-idle.C:
			ss.log.Info("openenv session expired", "idle", ss.srv.cfg.IdleTimeout)
			ss.end(errExpired)
			ss.send(outFrame{Type: "error", Data: map[string]any{"code": CodeSessionError,
				"message": fmt.Sprintf("session expired: no frame for %s (its episode ended as interrupted)", ss.srv.cfg.IdleTimeout)}})
			closeConn(ss.conn, websocket.CloseNormalClosure, "session expired")
			return
		case <-ss.ctx.Done():
			cause := context.Cause(ss.ctx)
			ss.end(cause)
			if errors.Is(cause, errShutdown) {
				closeConn(ss.conn, websocket.CloseGoingAway, "server shutting down")
			}
			return
		}
	}
}

// read hands each text frame to run. A frame over the limit is drained without being kept and
// answered with an error frame; a binary frame is not JSON. When the client goes away the session's
// context ends, which cancels a step in flight.
func (ss *session) read() {
	limit := ss.srv.cfg.MaxFrameBytes
	for {
		mt, r, err := ss.conn.NextReader()
		if err != nil {
			cause := errDisconnected
			if ss.srv.ctx.Err() != nil {
				cause = errShutdown
			}
			ss.cancel(cause)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err == nil && int64(len(b)) > limit {
			n, _ := io.Copy(io.Discard, r)
			b = []byte(fmt.Sprintf(`{"type":"\u0000oversize","data":%d}`, int64(len(b))+n))
		}
		if err != nil {
			ss.cancel(errDisconnected)
			return
		}
		if mt == websocket.BinaryMessage {
			b = []byte(`{"type":"\u0000binary"}`)
		}
		select {
		case ss.frames <- b:
		case <-ss.ctx.Done():
			return
		}
	}
}

// handle answers one frame; it says whether the session is over (the client sent close).
func (ss *session) handle(b []byte) (stop bool) {
	var f inFrame
	if err := json.Unmarshal(b, &f); err != nil {
		ss.sendErr(errFrame(CodeInvalidJSON, "Invalid JSON: %v", err))
		return false
	}
	var data any
	var err error
	switch f.Type {
	case "reset":
		data, err = ss.reset(f.Data)
	case "step":
		data, err = ss.step(f.Data)
	case "state":
		data, err = ss.state()
		if err == nil {
			ss.send(outFrame{Type: "state", Data: data})
			return false
		}
	case "close":
		return true
	case "\x00oversize":
		err = errFrame(CodeValidation, "frame of %s bytes is over this server's limit of %d bytes", string(f.Data), ss.srv.cfg.MaxFrameBytes)
	case "\x00binary":
		err = errFrame(CodeInvalidJSON, "Invalid JSON: a binary frame (send JSON text frames)")
	default:
		err = errFrame(CodeUnknownType, "Unknown message type: %q (want reset, step, state or close)", f.Type)
	}
	if err != nil {
		ss.sendErr(err)
		return false
	}
	ss.send(outFrame{Type: "observation", Data: data})
	return false
}

func (ss *session) send(f outFrame) {
	if err := ss.conn.WriteJSON(f); err != nil {
		ss.log.Debug("openenv write", "err", err)
	}
}

func (ss *session) sendErr(err error) { ss.send(outFrame{Type: "error", Data: errorData(err)}) }

// reset ends the session's episode (interrupted, unless it is over) and starts the one data asks for.
func (ss *session) reset(data json.RawMessage) (any, error) {
	ss.end(errReset)
	s := ss.srv
	sp, err := s.episodeSpec(data, s.seq.Add(1))
	if err != nil {
		return nil, err
	}
	if err := sp.Validate(ss.ctx, s.cfg.Robots); err != nil {
		return nil, errFrame(CodeValidation, "reset: %v", err)
	}
	ep, err := agent.StartEpisode(ss.ctx, sp, s.cfg.Host)
	if err != nil {
		return nil, errFrame(CodeExecution, "reset: the episode did not start (run folder %s): %v", sp.Out, err)
	}
	live := &episode{ep: ep}
	live.pctx, live.pcancel = ep.Context(ss.ctx)
	if s.cfg.OnEpisode != nil {
		live.ended = s.cfg.OnEpisode(ep)
	}
	ss.live = live
	ss.log.Info("openenv episode started", "run_dir", sp.Out, "task", sp.Task, "seed", sp.Seed, "arm", sp.Arm)
	p := ep.Prompt()
	tk := ep.Toolkit()
	return StepData{Observation: Observation{Text: p.Text, Images: images(p.Images), Tools: agent.OpenAITools(tk.Tools()),
		Metadata: ss.meta()}, Reward: nil, Metadata: ss.meta()}, nil
}

// meta is what every observation's metadata says about the episode.
func (ss *session) meta() map[string]any {
	l := ss.live
	sp := l.ep.Spec()
	m := map[string]any{"episode_id": l.ep.ID(), "run_dir": sp.Out, "step_count": l.steps, "robot": sp.Robot, "task": sp.Task,
		"seed": sp.Seed, "arm": sp.Arm, "max_turns": sp.MaxCalls, "budget_s": sp.BudgetS, "reward_terms": []string{"success"}}
	if l.result != nil {
		m["status"] = l.result.Status
		m["environment_success"] = l.result.EnvironmentSuccess
		m["reward_parts"] = map[string]float64{"success": reward(l.result)}
	}
	return m
}

// step runs one tool call of the episode's arm.
func (ss *session) step(data json.RawMessage) (any, error) {
	l := ss.live
	switch {
	case l == nil:
		return nil, errFrame(CodeSessionError, "no episode in this session: send reset first")
	case l.told:
		return nil, errFrame(CodeSessionError, "the episode is over (%s): send reset to start another", l.result.Status)
	case l.result != nil: // the server ended it between steps (budget, kernel): tell it now
		return ss.doneObservation(agent.ToolResult{Text: l.endText, IsError: true}), nil
	}
	name, args, err := parseAction(data)
	if err != nil {
		return nil, err
	}
	l.steps++
	res, callErr := l.ep.Toolkit().Call(l.pctx, name, args)
	if callErr != nil {
		// The call could not run (the budget ran out, the kernel died, the client went away): the
		// episode is over, as it is in play.
		ss.finish(callErr)
		text := res.Text
		if text == "" {
			text = encodeError(l.result)
		}
		return ss.doneObservation(agent.ToolResult{Text: text, Images: res.Images, IsError: true}), nil
	}
	if res.Finished || l.ep.Finished() {
		ss.finish(nil)
		return ss.doneObservation(res), nil
	}
	if max := ss.srv.cfg.Limits.MaxSteps; max > 0 && l.steps >= max {
		ss.finish(fmt.Errorf("%w: the episode reached this server's limit of %d steps", agent.ErrNoToolCall, max))
		return ss.doneObservation(res), nil
	}
	zero := 0.0
	return StepData{Observation: Observation{Text: res.Text, Images: images(res.Images), IsError: res.IsError,
		EpisodeDone: res.EpisodeDone, Metadata: ss.meta()}, Reward: &zero, Metadata: ss.meta()}, nil
}

// doneObservation is the last observation of the episode: res, the reward, done.
func (ss *session) doneObservation(res agent.ToolResult) StepData {
	l := ss.live
	l.told = true
	r := reward(l.result)
	return StepData{Observation: Observation{Text: res.Text, Images: images(res.Images), IsError: res.IsError,
		EpisodeDone: true, Metadata: ss.meta()}, Reward: &r, Done: true, Metadata: ss.meta()}
}

func encodeError(r *agent.Result) string {
	msg := "the episode is over: " + r.Status
	if r.Error != nil {
		msg += ": " + r.Error.Message
	}
	b, _ := json.Marshal(map[string]any{"ok": false, "error": msg})
	return string(b)
}

// reward is the benchmark's success predicate: 1 when the environment said success, else 0.
func reward(r *agent.Result) float64 {
	if r != nil && r.EnvironmentSuccess != nil && *r.EnvironmentSuccess {
		return 1
	}
	return 0
}

// finish ends the live episode (runErr as the runtime's error in play: nil, the budget, a cancel).
func (ss *session) finish(runErr error) {
	l := ss.live
	if l == nil || l.result != nil {
		return
	}
	if cause := context.Cause(ss.ctx); cause != nil && runErr != nil && !errors.Is(runErr, cause) {
		runErr = fmt.Errorf("%w (%v)", cause, runErr) // the client went away or the server closed
	}
	if runErr != nil && l.pctx.Err() != nil && ss.ctx.Err() == nil {
		// The policy context ended first: say why (budget or kernel death), as runtimes.Play does.
		if cause := context.Cause(l.pctx); cause != nil && !errors.Is(runErr, cause) {
			runErr = fmt.Errorf("%w: %w", cause, runErr)
		}
	}
	l.pcancel()
	res, err := l.ep.Finish(context.WithoutCancel(ss.ctx), "", runErr)
	if err != nil {
		ss.log.Warn("openenv episode finish", "run_dir", l.ep.Dir(), "err", err)
	}
	l.result = res
	if l.ended != nil {
		l.ended()
	}
	ss.log.Info("openenv episode ended", "run_dir", l.ep.Dir(), "status", res.Status, "success", reward(res))
}

// endByServer ends the episode whose policy context ended between steps (budget, kernel death).
func (ss *session) endByServer() {
	l := ss.live
	cause := context.Cause(l.pctx)
	ss.finish(cause)
	l.endText = encodeError(l.result)
}

// end ends the live episode, if any, for a reason outside the policy (reset, close, disconnect).
func (ss *session) end(cause error) {
	if ss.live != nil && ss.live.result == nil {
		ss.finish(cause)
	}
}

// state is the run folder's summary: result.json as it is on disk, with OpenEnv's State fields
// (episode_id, step_count).
func (ss *session) state() (any, error) {
	l := ss.live
	if l == nil {
		return nil, errFrame(CodeSessionError, "no episode in this session: send reset first")
	}
	b, err := os.ReadFile(filepath.Join(l.ep.Dir(), "result.json"))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("result.json: %w", err)
	}
	m["episode_id"], m["step_count"], m["run_dir"], m["done"] = l.ep.ID(), l.steps, l.ep.Dir(), l.result != nil
	return m, nil
}
