package mcp

import (
	"encoding/json"
	"log/slog"
)

// ObjectSchema exposes objectSchema to the external tests.
func ObjectSchema(raw json.RawMessage) map[string]any {
	return objectSchema(raw, slog.New(slog.DiscardHandler), "test")
}
