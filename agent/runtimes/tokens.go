package runtimes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// TokensFile is the run-folder file of token-level trajectories (--record-tokens): one JSON line per
// LLM call that returned token data, {"turn": N, ...Tokens}, N as in turns.jsonl.
const TokensFile = "tokens.jsonl"

// TokenLine is one line of tokens.jsonl.
type TokenLine struct {
	Turn int `json:"turn"`
	Tokens
}

// ReadTokens reads a run folder's tokens.jsonl; a line that is not a TokenLine is an error naming it.
func ReadTokens(path string) ([]TokenLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []TokenLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28) // a long reply with its prompt's ids
	for n := 1; sc.Scan(); n++ {
		var l TokenLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return out, fmt.Errorf("%s: line %d: %w", path, n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// tokenLog writes tokens.jsonl. A nil *tokenLog writes nothing (recording is off).
type tokenLog struct {
	path   string
	f      *os.File
	logger *slog.Logger
	warned bool
}

func newTokenLog(dir string, logger *slog.Logger) *tokenLog {
	return &tokenLog{path: filepath.Join(dir, TokensFile), logger: logger}
}

// write appends one call's tokens. A failure to write is logged once, not fatal: the episode and its
// trace matter more than the token record.
func (l *tokenLog) write(turn int, t *Tokens) {
	if l == nil {
		return
	}
	if t == nil {
		l.warn("the endpoint returned no token data for a reply", "turn", turn)
		return
	}
	line, err := json.Marshal(TokenLine{turn, *t})
	if err == nil && l.f == nil {
		l.f, err = os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err == nil {
		_, err = l.f.Write(append(line, '\n'))
	}
	if err != nil {
		l.warn("tokens.jsonl not written", "turn", turn, "err", err)
	}
}

func (l *tokenLog) warn(msg string, args ...any) {
	if !l.warned {
		l.warned = true
		l.logger.Warn(msg+" (--record-tokens; said once)", args...)
	}
}

func (l *tokenLog) close() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}
