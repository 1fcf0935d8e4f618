package replay_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/replay"
)

// dormantModule reads this machine's secrets from a thread (outside the in-kernel audit hook): the
// kernel's environment (the replaying user's API key), its parent's, and a root-only file. At record time
// neither secret exists, so the recorded outputs show nothing; a replay wakes it.
const dormantModule = `import os, threading
R = {}
def work():
    for name, path in (("self_environ", "/proc/self/environ"), ("ppid_environ", "/proc/%d/environ" % os.getppid()), ("file", SECRET)):
        try:
            R[name] = open(path, "rb").read().decode(errors="replace")[:4000]
        except BaseException as e:
            R[name] = "BLOCKED " + type(e).__name__
t = threading.Thread(target=work)
t.start()
t.join()
print("DORMANT", R)
`

// TestReplaySealedDormantPayload: a trace whose agent cells hold a dormant payload is replayed sealed by
// default: the payload reads neither the API key nor a root-only file, and the report and the replayed
// notebook say the replay was sealed. The control, --sealed off, wakes it (so the check can fail) and is
// recorded as unsealed.
func TestReplaySealedDormantPayload(t *testing.T) {
	const apiKey, fileSecret = "sk-replaytest-0123456789", "replay-file-secret"
	secretPath := filepath.Join(t.TempDir(), "secret.txt")
	module := strings.Replace(dormantModule, "SECRET", strings.ReplaceAll(pyStr(secretPath), "%", "%%"), 1)
	path := filepath.Join(t.TempDir(), "trace.ipynb")
	recordEpisode(t, path, "stack_blocks", 0, []step{
		{code: "open('dormant.py', 'w').write(" + pyStr(module) + ")", author: notebooks.AuthorAgent},
		{code: "import dormant", author: notebooks.AuthorAgent},
	})
	// The secrets appear after the recording: the replaying user's key, a root-only file.
	t.Setenv("OPENAI_API_KEY", apiKey)
	if err := os.WriteFile(secretPath, []byte(fileSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(mode string) (*replay.Report, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		out := filepath.Join(t.TempDir(), "replayed.ipynb")
		rep, err := replay.Run(ctx, path, replay.Options{Until: -1, Out: out, Sealed: mode, CellTimeout: 2 * time.Minute})
		if err != nil {
			t.Fatalf("replay (sealed %s): %v", mode, err)
		}
		b, _ := os.ReadFile(out)
		js, _ := rep.JSON()
		return rep, string(b), string(b) + rep.Verdict() + string(js)
	}
	sealedRep, sealedNB, sealedOut := run(replay.SealAuto)
	if !sealedRep.Seal.Sealed || sealedRep.Seal.Mode != replay.SealAuto || sealedRep.Seal.Judge != "robot_server" {
		t.Fatalf("the default replay is not sealed: %+v", sealedRep.Seal)
	}
	t.Logf("sealed replay:\n%s", sealedRep.Verdict())
	for _, s := range []string{apiKey, fileSecret} {
		if strings.Contains(sealedOut, s) {
			t.Errorf("sealed replay: secret %q reached the replayed notebook or the report", s[:8])
		}
	}
	if !strings.Contains(sealedOut, `'file': 'BLOCKED`) || !strings.Contains(sealedOut, "sealed: yes") ||
		!strings.Contains(sealedOut, `"sealed":true`) {
		t.Errorf("sealed replay: the payload's attempt or the seal is not on record:\n%.3000s", sealedOut)
	}
	var nb struct {
		Metadata struct {
			Pyrualean struct {
				Replay struct {
					Seal map[string]any `json:"seal"`
				} `json:"replay"`
			} `json:"pyrualean"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(sealedNB), &nb); err != nil || nb.Metadata.Pyrualean.Replay.Seal["sealed"] != true {
		t.Errorf("the replayed notebook's metadata.pyrualean.replay.seal: %v (%v)", nb.Metadata.Pyrualean.Replay.Seal, err)
	}
	// The control: unsealed, the same trace reads both secrets.
	offRep, _, offOut := run(replay.SealOff)
	if offRep.Seal.Sealed || offRep.Seal.Mode != replay.SealOff || !strings.Contains(offOut, "sealed: NO (--sealed off") {
		t.Errorf("--sealed off is not recorded: %+v", offRep.Seal)
	}
	if !strings.Contains(offOut, apiKey) || !strings.Contains(offOut, fileSecret) {
		t.Errorf("control: the unsealed replay did not wake the payload (the check cannot fail):\n%.2000s", offOut)
	}
}

func pyStr(s string) string { b, _ := json.Marshal(s); return string(b) }
