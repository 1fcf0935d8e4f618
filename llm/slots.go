package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SlotProgress is what llama.cpp's GET /slots says of slot 0 while a request runs: how much of the
// prompt it has processed (and took from its cache) and how many tokens it has generated.
type SlotProgress struct {
	Processing      bool
	PromptTokens    int // of the request (grows by the generated tokens while it generates)
	PromptProcessed int // prompt tokens evaluated so far (0 once generation started, in this build)
	PromptCached    int // prompt tokens reused from the cache
	Generated       int
}

// Progress reads slot 0's progress.
func (s *Server) Progress(ctx context.Context) (SlotProgress, error) {
	var slots []struct {
		IsProcessing     bool `json:"is_processing"`
		NPromptTokens    int  `json:"n_prompt_tokens"`
		NPromptProcessed int  `json:"n_prompt_tokens_processed"`
		NPromptCache     int  `json:"n_prompt_tokens_cache"`
		NextToken        []struct {
			NDecoded int `json:"n_decoded"`
		} `json:"next_token"`
	}
	if err := getJSON(ctx, s.root()+"/slots", &slots); err != nil {
		return SlotProgress{}, err
	}
	if len(slots) == 0 {
		return SlotProgress{}, fmt.Errorf("%s/slots lists no slot", s.root())
	}
	sl := slots[0]
	p := SlotProgress{Processing: sl.IsProcessing, PromptTokens: sl.NPromptTokens, PromptProcessed: sl.NPromptProcessed, PromptCached: sl.NPromptCache}
	if len(sl.NextToken) > 0 {
		p.Generated = sl.NextToken[0].NDecoded
	}
	return p, nil
}

// SlotFile is where slot 0's saved prompt cache for key lives (under Options.SlotDir).
func (s *Server) SlotFile(key string) string {
	if s.slotDir == "" {
		return ""
	}
	return filepath.Join(s.slotDir, key+".bin")
}

// SaveSlot writes slot 0's prompt cache (its tokens and KV cache) to SlotFile(key), so that another
// server process of the same model can start from it (RestoreSlot). It is written under a temporary
// name and renamed, so a reader never sees half a file.
func (s *Server) SaveSlot(ctx context.Context, key string) (tokens int, err error) {
	if s.slotDir == "" {
		return 0, fmt.Errorf("save slot: this server keeps no slot files (reused, or started without a slot folder)")
	}
	tmp := fmt.Sprintf("%s.%d.tmp", key, time.Now().UnixNano())
	var out struct {
		NSaved int `json:"n_saved"`
	}
	if err := s.slotAction(ctx, "save", tmp, &out); err != nil {
		return 0, err
	}
	if err := os.Rename(filepath.Join(s.slotDir, tmp), s.SlotFile(key)); err != nil {
		return 0, fmt.Errorf("save slot: %w", err)
	}
	return out.NSaved, nil
}

// RestoreSlot loads SlotFile(key) into slot 0; the next request reuses the longest prefix it shares
// with the restored tokens.
func (s *Server) RestoreSlot(ctx context.Context, key string) (tokens int, err error) {
	if s.slotDir == "" {
		return 0, fmt.Errorf("restore slot: this server keeps no slot files")
	}
	var out struct {
		NRestored int `json:"n_restored"`
	}
	if err := s.slotAction(ctx, "restore", key+".bin", &out); err != nil {
		return 0, err
	}
	return out.NRestored, nil
}

func (s *Server) slotAction(ctx context.Context, action, file string, into any) error {
	body, _ := json.Marshal(map[string]string{"filename": file})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.root()+"/slots/0?action="+action, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s slot: %w", action, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s slot %s: %s: %s", action, file, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, into)
}

func (s *Server) root() string { return strings.TrimSuffix(s.BaseURL, "/v1") }

// Timings are llama.cpp's account of one reply.
type Timings struct {
	PromptN            int     `json:"prompt_n"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

// calibrationText is a prompt of about 400 tokens of the kind the robot prompt holds (prose and code).
var calibrationText = strings.Repeat("Move the gripper above the red block, lower it, close the fingers and lift; "+
	"then print(robo.state()) to check that the block is held. ", 16)

// Calibrate times one short request (about 400 prompt tokens, 32 generated, no cache): the speed of
// prompt processing and of generation on this machine, under its present load.
func (s *Server) Calibrate(ctx context.Context) (Timings, error) {
	body, _ := json.Marshal(map[string]any{
		"model": s.Model, "max_tokens": 32, "temperature": 0, "ignore_eos": true, "cache_prompt": false,
		"messages": []map[string]string{{"role": "user", "content": calibrationText}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Timings{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Timings{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return Timings{}, fmt.Errorf("calibration request: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var out struct {
		Timings *Timings `json:"timings"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Timings == nil {
		return Timings{}, fmt.Errorf("calibration reply without timings: %.200s", b)
	}
	return *out.Timings, nil
}
