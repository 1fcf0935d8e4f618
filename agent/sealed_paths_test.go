package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// chainBuilder is a module an agent's program writes into its workspace and imports (its source never
// meets the program's source check): it builds, with dir_fd calls, chains of links down 24 directories
// of 200-character names (a resolved path far past PATH_MAX, which filepath.EvalSymlinks cannot
// resolve) ending in a link out of the workspace; and plain links out, a loop and a FIFO.
const chainBuilder = `import os, threading
NAME, DEPTH = "d" * 200, 24
def chain(link, final):
    fds = [os.open(".", os.O_RDONLY)]
    for _ in range(DEPTH):
        try:
            os.mkdir(NAME, dir_fd=fds[-1])
        except FileExistsError:
            pass
        fds.append(os.open(NAME, os.O_RDONLY, dir_fd=fds[-1]))
    os.symlink(final, link + "_x", dir_fd=fds[DEPTH])
    for i in range(DEPTH - 1, -1, -1):
        os.symlink(NAME + "/" + link + ("_x" if i == DEPTH - 1 else "_n"), link if i == 0 else link + "_n", dir_fd=fds[i])
    for fd in fds:
        os.close(fd)
def plant():
    chain("chain_file.py", "../" * DEPTH + %q)
    chain("chain_environ.py", "/proc/%d/environ")
    os.symlink(%q, "abs.py")
    os.symlink("/proc/%d/environ", "environ.py")
    os.symlink("loop.py", "loop.py")
    os.symlink(%q, "guides")
    os.mkfifo("fifo.py")
    open("ok.py", "w").write("def run(robo):\n    print('OK-PROGRAM')\n")
t = threading.Thread(target=plant)  # outside the in-kernel audit hook: only the OS sandbox is left
t.start()
t.join()
print("PLANTED", sorted(os.listdir(".")))
`

// TestSealedProgramPathsStayInWorkspace: in a real sealed episode, agent cells plant links out of the
// workspace (a PATH_MAX chain built with dir_fd, absolute links to a root-only file and to this
// process's environ, a loop, a FIFO, guides -> a host folder); a second sealed episode reuses the run
// folder (--out) with --guides and the program arm: run_program {"path"} on each link is refused with a
// clear reason, the guides are not written through the link, and no host file content reaches
// program_NN.py, the trace, the model's context or the run folder.
func TestSealedProgramPathsStayInWorkspace(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", apiKeySecret) // in this process's environ, which environ.py points at
	secretPath := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretPath, []byte(fileSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := episodeConfig(t, func(c *testEpisode) { c.Sealed = spec.SealOn })
	ws := filepath.Join(cfg.Out, "workspace")
	rel, err := filepath.Rel(ws, secretPath)
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir() // --guides must not write here
	pid := os.Getpid()
	builder := fmt.Sprintf(chainBuilder, rel, pid, secretPath, pid, hostDir)
	// Two cells, as an agent does: the module is written, then imported (the source check sees a
	// workspace module, not its code).
	planter := openaitest.New(call(py("open('mk_links.py', 'w').write("+pyQuote(builder)+")")),
		call(py("import mk_links")), call(finish("failure", "planted")))
	defer planter.Close()
	if res, _ := playEpisode(t, cfg, openaiConfig(planter, nil), nil); !res.Sealed {
		t.Fatalf("the planting episode is not sealed: %+v", res.Seal)
	}
	planted := cellsBy(readTrace(t, cfg.Out), notebooks.AuthorAgent)
	if len(planted) != 2 || len(planted[1].Outputs) == 0 || !strings.HasPrefix(planted[1].Outputs[0].Text, "PLANTED [") {
		t.Logf("planting cells: %.3000v", planted)
		t.Fatal("the planting cell did not run")
	}

	// The second episode: the same --out, the program arm, --guides.
	out := cfg.Out
	cfg = episodeConfig(t, func(c *testEpisode) {
		c.Out, c.Sealed, c.Arm, c.CellTimeoutS, c.Guides = out, spec.SealOn, spec.ArmProgram, 60, true
	})
	paths := []string{"chain_file.py", "chain_environ.py", "abs.py", "environ.py", "loop.py", "fifo.py",
		"../" + filepath.Base(cfg.Out) + "/result.json", secretPath, fmt.Sprintf("/proc/%d/environ", pid)}
	var steps []openaitest.Step
	for _, p := range paths {
		steps = append(steps, call(program(map[string]string{"path": p})))
	}
	steps = append(steps, call(program(map[string]string{"path": "ok.py"})), call(finish("failure", "tried")))
	// The attack's precondition, checked on the host when the first path call is asked for: the old resolution failed on the chain, and following it unresolved reads the secret.
	checked := make(chan error, 1)
	first := steps[0].Reply
	steps[0] = openaitest.Step{Func: func(openaitest.Request) openaitest.Reply {
		_, evalErr := filepath.EvalSymlinks(filepath.Join(ws, "chain_file.py"))
		b, readErr := os.ReadFile(filepath.Join(ws, "chain_file.py"))
		switch {
		case evalErr == nil:
			checked <- fmt.Errorf("EvalSymlinks resolved the chain")
		case readErr != nil || string(b) != fileSecret:
			checked <- fmt.Errorf("the chain does not lead to the secret (%q, %v)", b, readErr)
		default:
			checked <- nil
		}
		return first
	}}
	srv := openaitest.New(steps...)
	defer srv.Close()
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if !res.Sealed || res.Arm != spec.ArmProgram {
		t.Fatalf("not sealed: %+v", res.Seal)
	}
	select {
	case err := <-checked:
		if err != nil {
			t.Fatalf("the planted links do not model the attack: %v", err)
		}
	default:
		t.Fatal("the precondition was never checked (the planting program did not run?)")
	}

	// Each path call was refused, saying why; the control program ran.
	var texts []string
	for _, x := range readJSONL(t, filepath.Join(cfg.Out, agent.ExchangesFile)) {
		if x["tool"] == agent.ToolRunProgram {
			texts = append(texts, fmt.Sprint(x["text"]))
		}
	}
	if len(texts) != len(paths)+1 {
		t.Fatalf("%d run_program exchanges, want %d", len(texts), len(paths)+1)
	}
	for i, p := range paths {
		got := texts[i]
		t.Logf("%s -> %.300s", p, got)
		if !strings.Contains(got, "refused") && !strings.Contains(got, "outside the workspace") {
			t.Errorf("run_program %q was not refused: %s", p, got)
		}
	}
	if !strings.Contains(texts[len(texts)-1], "OK-PROGRAM") {
		t.Errorf("a program file in the workspace no longer runs: %s", texts[len(texts)-1])
	}
	// One program ran (ok.py); the refusals ran nothing.
	nb := readTrace(t, cfg.Out)
	if n := len(cellsBy(nb, notebooks.AuthorAgent)); n != 1 {
		t.Errorf("trace: %d agent cells, want 1", n)
	}
	// The guides went into a real folder in the workspace, not through the planted link.
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Errorf("--guides wrote through the planted link into %s: %v", hostDir, entries)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "guides", "hybrid_guide.md")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("workspace/guides/hybrid_guide.md: %v %v", fi, err)
	}
	// No secret anywhere: run folder (program_NN.py, trace, exchanges), nor in what the model was sent.
	filepath.WalkDir(cfg.Out, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, s := range []string{apiKeySecret, fileSecret} {
			if strings.Contains(string(b), s) {
				t.Errorf("secret %q found in %s", s[:10], p)
			}
		}
		return nil
	})
	for _, r := range srv.Requests() {
		for _, s := range []string{apiKeySecret, fileSecret} {
			if strings.Contains(string(r.Raw), s) {
				t.Errorf("secret %q sent to the model", s[:10])
			}
		}
	}
}

func program(args map[string]string) openaitest.ToolCall {
	b, _ := json.Marshal(args)
	return openaitest.ToolCall{Name: agent.ToolRunProgram, Arguments: string(b)}
}
