package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestPlayServeHumanInTheLoop runs an episode with --serve, pauses it through /api/episodes, runs a
// person's cell on the live kernel over the gateway's WebSocket, resumes, and checks that the agent's
// later cell sees the person's variable and that the trace records the human cell.
func TestPlayServeHumanInTheLoop(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	dir := t.TempDir()
	script := filepath.Join(dir, "cells.py")
	os.WriteFile(script, []byte("# %%\nx = 41\ntime.sleep(4)\n# %%\nprint('agent sees', y)\n"), 0o644)
	out := filepath.Join(dir, "run")
	const token = "t0k3n-for-test"
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cmdPlay(context.Background(), []string{"--runtime", "replay", "--from", script, "--task", "stack_blocks",
			"--out", out, "--serve", "127.0.0.1:0", "--serve-token", token}, &stdout, &stderr)
	}()

	addrRe := regexp.MustCompile(`gateway http://(\S+) token`)
	var addr string
	for deadline := time.Now().Add(90 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m := addrRe.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("play ended (exit %d) before serving: %s", code, stderr.String())
		default:
		}
	}
	if addr == "" {
		t.Fatalf("no gateway address on stderr: %s", stderr.String())
	}
	base := "http://" + addr
	call := func(method, path string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "token "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	if code, _ := call("GET", "/api/episodes"); code != 200 {
		t.Fatalf("GET /api/episodes: %d", code)
	}
	_, body := call("GET", "/api/episodes")
	var eps []map[string]any
	if err := json.Unmarshal(body, &eps); err != nil || len(eps) != 1 {
		t.Fatalf("episodes: %s (%v)", body, err)
	}
	id, _ := eps[0]["id"].(string)
	kid, _ := eps[0]["kernel_id"].(string)
	if id == "" || kid == "" {
		t.Fatalf("episode model lacks id/kernel_id: %s", body)
	}
	if code, b := call("POST", "/api/episodes/"+id+"/pause"); code/100 != 2 {
		t.Fatalf("pause: %d %s", code, b)
	}
	if code, _ := call("GET", "/api/kernels/"+kid); code != 200 {
		t.Fatalf("the episode's kernel is not listed: %d", code)
	}

	// The person's cell, over the WebSocket, while the agent is paused.
	wsURL := fmt.Sprintf("ws://%s/api/kernels/%s/channels?session_id=%s&token=%s", addr, kid, uuid.NewString(), token)
	ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer ws.Close()
	msgID := uuid.NewString()
	req := map[string]any{
		"channel":       "shell",
		"header":        map[string]any{"msg_id": msgID, "msg_type": "execute_request", "session": "human", "username": "person", "version": "5.4", "date": time.Now().UTC().Format(time.RFC3339Nano)},
		"parent_header": map[string]any{},
		"metadata":      map[string]any{},
		"content":       map[string]any{"code": "y = x + 1\nprint('human', y)", "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true},
		"buffers":       []any{},
	}
	if err := ws.WriteJSON(req); err != nil {
		t.Fatal(err)
	}
	var sawOutput, sawIdle bool
	ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for !(sawOutput && sawIdle) {
		var m struct {
			Channel string `json:"channel"`
			Header  struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			Parent struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content map[string]any `json:"content"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("reading the human cell's messages: %v (output %v, idle %v)", err, sawOutput, sawIdle)
		}
		if m.Parent.MsgID != msgID {
			continue
		}
		switch m.Header.MsgType {
		case "stream":
			if strings.Contains(fmt.Sprint(m.Content["text"]), "human 42") {
				sawOutput = true
			}
		case "status":
			sawIdle = m.Content["execution_state"] == "idle"
		}
	}
	if code, b := call("POST", "/api/episodes/"+id+"/resume"); code/100 != 2 {
		t.Fatalf("resume: %d %s", code, b)
	}

	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("play exit %d: %s", code, stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("play did not end: %s", stderr.String())
	}
	nb, err := notebooks.ReadFile(filepath.Join(out, "trace.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	var human, agentSaw bool
	for _, c := range nb.Cells {
		meta, _ := c.Metadata[notebooks.MetaKey].(map[string]any)
		if meta["author"] == "human" && strings.Contains(c.Source, "y = x + 1") {
			human = true
		}
		for _, o := range c.Outputs {
			if meta["author"] == "agent" && strings.Contains(o.Text, "agent sees 42") {
				agentSaw = true
			}
		}
	}
	if !human || !agentSaw {
		t.Errorf("trace: human cell recorded %v, agent saw the person's variable %v", human, agentSaw)
	}
	if resp, err := http.Get(base + "/api"); err == nil {
		resp.Body.Close()
		t.Errorf("the gateway still answers after the episode ended")
	}
}
