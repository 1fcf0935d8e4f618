package tokencount

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go-loader/assets"

	"github.com/pyrualean/pyrualean/robotapi"
)

var samples = []string{
	"",
	"hello world",
	"robo.move_to([0.5, 0.0, 0.3])",
	"grasp = robo.pick(\"red_block\")\nassert grasp.success, grasp\n",
	"{\n  \"cell\": 3,\n  \"stdout\": \"Move(target_xyz=(0.43, -0.15, 0.14), reached=True)\\n\",\n  \"elapsed_s\": 0.28\n}",
	"Traceback (most recent call last):\n  File \"<cell 2>\", line 1\nZeroDivisionError: division by zero",
	"ünïcödé — 机器人 🤖 <|endoftext|>",
	strings.Repeat("abc def ", 500),
}

// TestMatchesPythonTiktoken checks our counts against OpenAI's own tiktoken, fed the same embedded BPE
// files through its cache (tiktoken verifies their sha256, so this also proves they are genuine).
func TestMatchesPythonTiktoken(t *testing.T) {
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	for _, enc := range []string{O200k, CL100k} {
		b, err := assets.Assets.ReadFile(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum([]byte("https://openaipublic.blob.core.windows.net/encodings/" + enc + ".tiktoken"))
		if err := os.WriteFile(filepath.Join(cache, hex.EncodeToString(sum[:])), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, _ := json.Marshal(samples)
	script := `import json, sys, tiktoken
texts = json.loads(sys.stdin.read())
print(json.dumps({e: [len(tiktoken.get_encoding(e).encode_ordinary(s)) for s in texts] for e in ("o200k_base", "cl100k_base")}))`
	cmd := exec.Command(filepath.Join(root, ".venv", "bin", "python"), "-c", script)
	cmd.Env = append(os.Environ(), "TIKTOKEN_CACHE_DIR="+cache)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python tiktoken: %v", err)
	}
	var want map[string][]int
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{O200k, CL100k} {
		c, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			if got := c.Count(s); got != want[enc][i] {
				t.Errorf("%s sample %d: %d tokens, tiktoken says %d", enc, i, got, want[enc][i])
			}
		}
	}
	if _, err := New("p50k_base"); err == nil {
		t.Error("p50k_base accepted")
	}
}
