package agent

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// EpisodeConfig says which episode to run and how.
type EpisodeConfig struct {
	Robot, Suite, Task string
	Seed               int
	Arm                string // cells | tools
	Images             string // on-motion | on-demand | none
	Feedback           string // pure | rich
	Primitives         string // full | no-vla
	Guides             bool
	MaxTurns           int           // python/primitive calls; 0: unlimited
	Budget             time.Duration // wall clock for the policy; 0: none
	CellTimeout        time.Duration // per cell; the kernel is interrupted (default 300 s)
	MaxEnvSteps        int           // simulator step budget (default 10000)
	VLAEndpoint        string        // VLA server for the learned primitives (make(vla_endpoint=...))
	EnvEndpoint        string        // running env server of a remote robot (make(env_url=...))
	SAM3Endpoint       string        // SAM 3 server for LIBERO's segment (make(sam3_endpoint=...))
	Out                string        // run folder
	Model, Runtime     string        // recorded in result.json
	ReasoningEffort    string
	KernelSpec         string // default "pyrualean"
	Root               string // repository root (Python venv, robot package); found from cwd when empty
	CUDADevice         string // CUDA_VISIBLE_DEVICES for the kernel
	Prices             PriceTable
	Logger             *slog.Logger
}

func (c *EpisodeConfig) defaults() error {
	if c.Robot == "" {
		c.Robot = "tabletop"
	}
	if c.Arm == "" {
		c.Arm = ArmCells
	}
	if c.Images == "" {
		c.Images = ImagesOnMotion
	}
	if c.Feedback == "" {
		c.Feedback = FeedbackRich
	}
	if c.Primitives == "" {
		c.Primitives = PrimitivesFull
	}
	if c.CellTimeout <= 0 {
		c.CellTimeout = 300 * time.Second
	}
	if c.MaxEnvSteps <= 0 {
		c.MaxEnvSteps = 10000
	}
	if c.KernelSpec == "" {
		c.KernelSpec = "pyrualean"
	}
	if c.Runtime == "" {
		c.Runtime = "openai"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Root == "" {
		root, err := FindRoot()
		if err != nil {
			return err
		}
		c.Root = root
	}
	switch {
	case c.Out == "":
		return errors.New("episode: no run folder (Out)")
	case c.Arm != ArmCells && c.Arm != ArmTools:
		return fmt.Errorf("episode: arm %q (want cells or tools)", c.Arm)
	case c.Images != ImagesOnMotion && c.Images != ImagesOnDemand && c.Images != ImagesNone:
		return fmt.Errorf("episode: images %q (want on-motion, on-demand or none)", c.Images)
	case c.Feedback != FeedbackPure && c.Feedback != FeedbackRich:
		return fmt.Errorf("episode: feedback %q (want pure or rich)", c.Feedback)
	case c.Primitives != PrimitivesFull && c.Primitives != PrimitivesNoVLA:
		return fmt.Errorf("episode: primitives %q (want full or no-vla)", c.Primitives)
	}
	return nil
}

// FindRoot finds the repository root (robotapi.Root: $PYRUALEAN_ROOT, the working directory or the
// executable, walking up to go.mod).
func FindRoot() (string, error) { return robotapi.Root() }

// Errors that end an episode.
var (
	ErrBudgetExceeded = errors.New("wall-clock budget exceeded")
	ErrBoot           = errors.New("episode boot failed")
	ErrEpisodeOver    = errors.New("episode is over")
	// ErrKernelRestarted ends an episode whose kernel had to be restarted after a cell timeout.
	ErrKernelRestarted = errors.New("the kernel was restarted after a cell timeout: the robot state is lost")
)

// EpisodeStatus is a live episode's state, for the gateway's /api/episodes.
type EpisodeStatus struct {
	ID          string   `json:"id"`
	RunDir      string   `json:"run_dir"`
	Robot       string   `json:"robot"`
	Task        string   `json:"task"`
	Seed        int      `json:"seed"`
	Arm         string   `json:"arm"`
	Model       string   `json:"model"`
	Runtime     string   `json:"runtime"`
	Status      string   `json:"status"`
	Paused      bool     `json:"paused"`
	Turns       int      `json:"turns"`
	MaxTurns    int      `json:"max_turns"`
	LLMCalls    int      `json:"llm_calls"`
	InputTokens int      `json:"input_tokens"`
	HumanCells  int      `json:"human_cells"`
	Success     *bool    `json:"environment_success"`
	ElapsedS    float64  `json:"elapsed_s"`
	LastTool    string   `json:"last_tool,omitempty"`
	Trace       string   `json:"trace"`
	KernelPID   int      `json:"kernel_pid"`
	Flags       []string `json:"sandbox_flags"`
}

// Episode is one live episode: its kernel with the robot, trace, ledger, budgets and run folder.
type Episode struct {
	cfg      EpisodeConfig
	log      *slog.Logger
	kern     *kernel.Kernel
	trace    *notebooks.Trace
	prompt   Prompt
	card     Card
	tk       Toolkit
	tools    []ToolSpec // the robot's primitives as tools (offered in the tools arm)
	stateful map[string]bool
	refs     *references

	turnsW, callsW *jsonlWriter
	workspace      string

	createdAt, policyStart time.Time
	startup                time.Duration
	gate                   *gate
	callMu                 sync.Mutex // serialises tool calls
	stopHumans             func()
	humansDone             chan struct{}

	mu        sync.Mutex // guards the fields below
	res       Result
	turns     int
	usage     Usage
	cost      float64
	costKnown bool
	finish    *FinishInfo
	finished  bool // finish called, or the episode ended (budget, success refusal, death)
	budgetOut bool
	lastTool  string
	humans    []humanNote
	ended     bool // Finish ran
}

// StartEpisode boots the robot in a fresh kernel, writes the run folder's first files (result.json
// "running", prompt.txt, card, trace.ipynb with the setup cell) and returns the live episode. On a
// boot failure result.json says boot_error and the error wraps ErrBoot.
func StartEpisode(ctx context.Context, cfg EpisodeConfig) (*Episode, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &Episode{cfg: cfg, log: cfg.Logger, createdAt: time.Now(), gate: newGate()}
	e.workspace = filepath.Join(cfg.Out, "workspace")
	if err := os.MkdirAll(e.workspace, 0o755); err != nil {
		return nil, fmt.Errorf("%w: run folder: %w", ErrBoot, err)
	}
	e.res = e.baseResult()
	if err := e.saveResult(); err != nil {
		return nil, fmt.Errorf("%w: result.json: %w", ErrBoot, err)
	}
	var err error
	if e.turnsW, err = openJSONL(filepath.Join(cfg.Out, "turns.jsonl")); err != nil {
		return nil, e.bootFail(fmt.Errorf("turns.jsonl: %w", err))
	}
	if e.callsW, err = openJSONL(filepath.Join(cfg.Out, "calls.jsonl")); err != nil {
		return nil, e.bootFail(fmt.Errorf("calls.jsonl: %w", err))
	}
	if err := e.boot(ctx); err != nil {
		if ctx.Err() != nil { // SIGINT/SIGTERM while booting: the episode was interrupted, boot did not fail
			err = fmt.Errorf("%w: %w (%v)", errBootInterrupted, context.Cause(ctx), err)
		}
		return nil, e.bootFail(err)
	}
	e.startup = time.Since(e.createdAt)
	e.policyStart = time.Now()
	e.mu.Lock()
	e.res.StartupS = round3(e.startup.Seconds())
	e.res.KernelPID = e.kern.Pid()
	e.mu.Unlock()
	if err := e.saveResult(); err != nil {
		return nil, e.bootFail(err)
	}
	e.watchHumans()
	return e, nil
}

func (e *Episode) baseResult() Result {
	c := e.cfg
	host, _ := os.Hostname()
	r := Result{
		Schema: ResultSchema, System: "pyrualean", Arm: c.Arm, Backend: c.Robot, Robot: c.Robot,
		Suite: c.Suite, Task: c.Task, Seed: c.Seed, Model: c.Model, Runtime: c.Runtime,
		ReasoningEffort: c.ReasoningEffort, Images: c.Images, Feedback: c.Feedback, Primitives: c.Primitives,
		Guides: c.Guides, Status: StatusRunning, TimeoutS: c.Budget.Seconds(), CellTimeoutS: c.CellTimeout.Seconds(),
		Host: host, PID: os.Getpid(), CreatedAt: e.createdAt.UTC().Format(time.RFC3339),
		Generation: Generation{SandboxFlags: []string{}},
		Files:      RunFiles{Trace: "trace.ipynb", Prompt: "prompt.txt", Turns: "turns.jsonl", Calls: "calls.jsonl", Card: "card.json"},
	}
	r.BudgetMode = "wall"
	if c.MaxTurns > 0 {
		mt := c.MaxTurns
		r.MaxTurns = &mt
		r.BudgetMode = "calls"
	}
	if _, ok := c.Prices.Lookup(c.Model); ok {
		zero := 0.0
		r.CostUSD = &zero
	}
	return r
}

// errBootInterrupted marks a boot cut short by the caller's context: status interrupted.
var errBootInterrupted = errors.New("interrupted while booting")

// bootFail records a boot_error (or interrupted) and releases what was started.
func (e *Episode) bootFail(err error) error {
	status, typ := StatusBootError, "BootError"
	if errors.Is(err, errBootInterrupted) {
		status, typ = StatusInterrupted, "Interrupted"
	}
	e.log.Error("episode boot failed", "err", err)
	e.mu.Lock()
	e.res.Status = status
	e.res.Error = &ErrorField{Type: typ, Message: err.Error()}
	e.res.FinishedAt = time.Now().UTC().Format(time.RFC3339)
	e.res.TotalWallS = round3(time.Since(e.createdAt).Seconds())
	e.res.PID = 0
	e.mu.Unlock()
	_ = e.saveResult()
	if e.trace != nil {
		_ = e.trace.SetEpisodeMeta(map[string]any{"status": status, "error": err.Error()})
		_ = e.trace.Close()
	}
	if e.kern != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.kern.Shutdown(sctx)
		cancel()
	}
	if e.turnsW != nil {
		e.turnsW.Close()
	}
	if e.callsW != nil {
		e.callsW.Close()
	}
	return fmt.Errorf("%w: %w", ErrBoot, err)
}

// boot launches the kernel, runs the setup cell, reads the episode card and assembles the prompt.
func (e *Episode) boot(ctx context.Context) error {
	c := e.cfg
	e.refs = fetchReferences(ctx, c.Robot, c.Primitives) // runs while the kernel boots
	spec, err := kernel.FindSpec(c.KernelSpec)
	if err != nil {
		return fmt.Errorf("kernelspec %s: %w", c.KernelSpec, err)
	}
	env := map[string]string{"PYRUALEAN_WORKSPACE": e.workspace}
	if c.CUDADevice != "" {
		env["CUDA_VISIBLE_DEVICES"] = c.CUDADevice
	}
	e.kern, err = kernel.Launch(ctx, spec, kernel.LaunchOptions{Dir: e.workspace, Env: env, Logger: e.log})
	if err != nil {
		return fmt.Errorf("launch kernel: %w", err)
	}
	var ki kernelInfo
	if raw, err := e.kern.Client().KernelInfo(ctx); err == nil {
		ki = parseKernelInfo(raw)
	} else {
		e.log.Warn("kernel_info", "err", err)
	}
	e.trace, err = notebooks.NewTrace(filepath.Join(c.Out, "trace.ipynb"), notebooks.TraceMeta{
		KernelName: spec.Name, KernelDisplayName: spec.DisplayName, LanguageInfo: ki.LanguageInfo,
		Episode: e.traceMeta(ki),
	})
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	setup := setupCode(c, e.workspace)
	res, err := e.kern.Client().Execute(ctx, setup, kernel.ExecuteOptions{
		Metadata:        map[string]any{notebooks.MetaKey: map[string]any{"author": notebooks.AuthorSetup}},
		UserExpressions: map[string]string{"card": "__import__('pyrualean_robot').episode_card()", "versions": versionsExpr},
		Timeout:         c.CellTimeout,
	})
	if err != nil {
		return fmt.Errorf("setup cell: %w", err)
	}
	_ = e.trace.AddCode(setup, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing},
		map[string]any{"author": notebooks.AuthorSetup})
	if res.Status != "ok" {
		msg := res.Status
		if res.Error != nil {
			msg = res.Error.Ename + ": " + res.Error.Evalue // the full traceback is in the trace
		}
		return fmt.Errorf("setup cell failed: %s", msg)
	}
	if vj, err := userExpressionJSON(res.UserExpressions, "versions"); err == nil {
		var v map[string]any
		if json.Unmarshal(vj, &v) == nil && len(v) > 0 {
			_ = e.trace.SetEpisodeMeta(map[string]any{"versions": mergeVersions(e.trace, v)})
		}
	} else {
		e.log.Warn("package versions", "err", err)
	}
	cardJSON, err := userExpressionJSON(res.UserExpressions, "card")
	if err != nil {
		return err
	}
	e.card, err = parseCard(cardJSON)
	if err != nil {
		return err
	}
	if e.card.MaxEnvSteps == 0 {
		e.card.MaxEnvSteps = c.MaxEnvSteps
	}
	if err := e.writeCard(cardJSON); err != nil {
		return err
	}
	return e.buildPrompt(ctx)
}

// references holds the robot's API reference in both formats, fetched in the background.
type references struct {
	done chan struct{}
	text map[string]string
	err  map[string]error
}

func fetchReferences(ctx context.Context, robot, primitives string) *references {
	r := &references{done: make(chan struct{}), text: map[string]string{}, err: map[string]error{}}
	go func() {
		defer close(r.done)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, f := range []string{robotapi.FormatText, robotapi.FormatTools} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t, err := robotapi.Reference(ctx, robot, primitives, f)
				mu.Lock()
				r.text[f], r.err[f] = t, err
				mu.Unlock()
			}()
		}
		wg.Wait()
	}()
	return r
}

func (r *references) wait() *references {
	<-r.done
	return r
}

// setupCode is robotapi's one-line first cell that makes the robot, plus the names the contract
// promises the agent (np, math, time).
func setupCode(c EpisodeConfig, workspace string) string {
	return robotapi.SetupCode(robotapi.SetupOptions{
		Robot: c.Robot, Task: c.Task, Seed: c.Seed, Workspace: workspace, Images: c.Images,
		Primitives: c.Primitives, Suite: c.Suite, MaxEnvSteps: c.MaxEnvSteps,
		VLAEndpoint: c.VLAEndpoint, EnvEndpoint: c.EnvEndpoint, Sam3Endpoint: c.SAM3Endpoint,
	}) + "\nimport math, time\nimport numpy as np\nlog = print"
}

func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// userExpressionJSON reads one user_expressions entry's application/json value.
func userExpressionJSON(ue map[string]json.RawMessage, key string) ([]byte, error) {
	raw, ok := ue[key]
	if !ok {
		return nil, fmt.Errorf("user expression %q: missing from execute_reply", key)
	}
	var v struct {
		Status string                     `json:"status"`
		Data   map[string]json.RawMessage `json:"data"`
		Ename  string                     `json:"ename"`
		Evalue string                     `json:"evalue"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("user expression %q: %w", key, err)
	}
	if v.Status != "ok" {
		return nil, fmt.Errorf("user expression %q failed: %s: %s", key, v.Ename, v.Evalue)
	}
	j, ok := v.Data["application/json"]
	if !ok {
		return nil, fmt.Errorf("user expression %q: no application/json in its data", key)
	}
	return j, nil
}

func (e *Episode) writeCard(cardJSON []byte) error {
	var pretty any
	if err := json.Unmarshal(cardJSON, &pretty); err == nil {
		if m, ok := pretty.(map[string]any); ok {
			delete(m, "images") // stored as files in card/
		}
		if err := writeJSONAtomic(filepath.Join(e.cfg.Out, "card.json"), pretty); err != nil {
			return err
		}
	}
	imgs, err := e.card.images()
	if err != nil {
		return err
	}
	if len(imgs) > 0 {
		dir := filepath.Join(e.cfg.Out, "card")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, im := range imgs {
			if err := writeFileAtomic(filepath.Join(dir, im.Name), im.PNG); err != nil {
				return err
			}
		}
	}
	e.prompt.Images = imgs
	return nil
}

// buildPrompt assembles prompt.txt: arm contract + API reference + robot knowledge + task card (+ guides).
func (e *Episode) buildPrompt(ctx context.Context) error {
	c := e.cfg
	format := robotapi.FormatText
	if c.Arm == ArmTools {
		format = robotapi.FormatTools
	}
	refs := e.refs.wait()
	if refs.err[format] != nil {
		return refs.err[format]
	}
	ref := refs.text[format]
	apiText := ref
	var err error
	if c.Arm == ArmTools {
		e.tools, err = ParseToolSchemas([]byte(ref))
		if err != nil {
			return err
		}
		apiText = toolsReference(e.tools)
	} else if refs.err[robotapi.FormatTools] == nil {
		// Only to tell stateful primitives apart in the ledger counts.
		e.tools, _ = ParseToolSchemas([]byte(refs.text[robotapi.FormatTools]))
	}
	e.stateful = map[string]bool{}
	for _, t := range e.tools {
		if t.Stateful {
			e.stateful[t.Name] = true
		}
	}
	var guides []string
	if c.Guides {
		guides, err = e.copyGuides()
		if err != nil {
			return err
		}
	}
	budgetS := c.Budget.Seconds()
	text := BuildPrompt(PromptParts{
		Arm: c.Arm, Images: c.Images, Feedback: c.Feedback, MaxTurns: c.MaxTurns, BudgetS: budgetS,
		MaxEnvSteps: e.card.MaxEnvSteps, APIReference: apiText, Knowledge: e.card.Knowledge,
		TaskCard: RenderCard(e.card), GuideFiles: guides, Cameras: e.card.Cameras, MotionCameras: e.card.MotionCameras,
	})
	e.prompt.Text = text
	if err := writeFileAtomic(filepath.Join(c.Out, "prompt.txt"), []byte(text)); err != nil {
		return err
	}
	if c.Arm == ArmTools {
		e.tk = &toolsToolkit{e: e}
	} else {
		e.tk = &cellsToolkit{e: e}
	}
	e.mu.Lock()
	e.res.Prompt = e.prompt.Info()
	e.res.TaskLanguage = e.card.TaskLanguage
	if e.res.Suite == "" {
		e.res.Suite = e.card.Suite
	}
	if e.res.Task == "" {
		e.res.Task = e.card.Task
	}
	e.mu.Unlock()
	_ = e.trace.SetEpisodeMeta(map[string]any{"task_language": e.card.TaskLanguage, "task": e.card.Task, "prompt_sha256": e.prompt.Info().SHA256,
		"budgets": e.budgetsMeta(e.card.MaxEnvSteps)}) // the robot's own step budget
	return e.trace.AddMarkdown(RenderCard(e.card), map[string]any{"author": notebooks.AuthorSetup, "kind": "task_card"})
}

// guidesFS holds the arm-independent guides that ship with the agent.
//
//go:embed guides/*.md
var guidesFS embed.FS

// copyGuides copies the guides (ours, then the robot's own from pyrualean_robot/guides/<robot>/) into
// workspace/guides and returns their file names: the prompt says where they are, as the seed's does,
// instead of inlining them. The robot's knowledge files (<robot>.md, <robot>-novla.md) are already the
// prompt's knowledge section and are not copied (the full one would name VLA calls a no-vla run lacks).
func (e *Episode) copyGuides() ([]string, error) {
	type guide struct{ name, text string }
	var guides []guide
	entries, _ := fs.ReadDir(guidesFS, "guides")
	for _, en := range entries {
		b, err := guidesFS.ReadFile("guides/" + en.Name())
		if err != nil {
			return nil, err
		}
		guides = append(guides, guide{en.Name(), string(b)})
	}
	robotDir := filepath.Join(e.cfg.Root, "robotapi", "python", "pyrualean_robot", "guides", e.cfg.Robot)
	matches, _ := filepath.Glob(filepath.Join(robotDir, "*.md"))
	for _, m := range matches {
		if n := filepath.Base(m); n == e.cfg.Robot+".md" || n == e.cfg.Robot+"-novla.md" {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, fmt.Errorf("guide: %w", err)
		}
		guides = append(guides, guide{filepath.Base(m), string(b)})
	}
	dst := filepath.Join(e.workspace, "guides")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(guides))
	for _, g := range guides {
		if err := writeFileAtomic(filepath.Join(dst, g.name), []byte(g.text)); err != nil {
			return nil, err
		}
		names = append(names, g.name)
	}
	return names, nil
}

// versionsExpr reports, as application/json, the versions of the kernel-side packages an episode's
// outcome depends on (evaluated with the setup cell, for metadata.pyrualean.versions).
const versionsExpr = "__import__('IPython.display', fromlist=['JSON']).JSON({(d.metadata['Name'] or '').lower(): d.version" +
	" for d in __import__('importlib.metadata', fromlist=['distributions']).distributions()" +
	" if (d.metadata['Name'] or '').lower() in ('ipykernel', 'jupyter-client', 'pyzmq', 'mujoco', 'numpy', 'pyrualean-robot')})"

// mergeVersions adds v to the trace's metadata.pyrualean.versions.
func mergeVersions(t *notebooks.Trace, v map[string]any) map[string]any {
	out := map[string]any{}
	if ep, ok := t.Snapshot().Metadata[notebooks.MetaKey].(map[string]any); ok {
		if old, ok := ep["versions"].(map[string]any); ok {
			maps.Copy(out, old)
		}
	}
	maps.Copy(out, v)
	return out
}

// kernelInfo is what the trace keeps of kernel_info_reply.
type kernelInfo struct {
	LanguageInfo          map[string]any `json:"language_info"`
	Implementation        string         `json:"implementation"`
	ImplementationVersion string         `json:"implementation_version"`
	ProtocolVersion       string         `json:"protocol_version"`
}

// parseKernelInfo decodes kernel_info_reply content keeping numbers as json.Number, so that
// language_info (e.g. codemirror_mode.version) is written back exactly as the kernel sent it.
func parseKernelInfo(raw []byte) kernelInfo {
	var ki kernelInfo
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ki); err != nil {
		return kernelInfo{}
	}
	return ki
}

// traceMeta is the trace's metadata.pyrualean at boot: what runs, under which budgets, with which
// versions. success stays null until the environment says otherwise.
func (e *Episode) traceMeta(ki kernelInfo) map[string]any {
	c := e.cfg
	versions := map[string]any{}
	if v, ok := ki.LanguageInfo["version"].(string); ok && v != "" {
		versions["python"] = v
	}
	if ki.Implementation != "" && ki.ImplementationVersion != "" {
		versions[ki.Implementation] = ki.ImplementationVersion
	}
	if ki.ProtocolVersion != "" {
		versions["jupyter_protocol"] = ki.ProtocolVersion
	}
	return map[string]any{
		"robot": c.Robot, "suite": c.Suite, "task": c.Task, "seed": c.Seed, "arm": c.Arm, "model": c.Model,
		"runtime": c.Runtime, "images": c.Images, "feedback": c.Feedback, "primitives": c.Primitives,
		"max_turns": c.MaxTurns, "budget_s": c.Budget.Seconds(), "status": StatusRunning,
		"success": nil, "environment_success": nil,
		"budgets":  e.budgetsMeta(c.MaxEnvSteps),
		"versions": versions,
	}
}

// budgetsMeta is metadata.pyrualean.budgets; null stands for unlimited.
func (e *Episode) budgetsMeta(maxEnvSteps int) map[string]any {
	c := e.cfg
	var maxTurns, budgetS any
	if c.MaxTurns > 0 {
		maxTurns = c.MaxTurns
	}
	if c.Budget > 0 {
		budgetS = c.Budget.Seconds()
	}
	return map[string]any{
		"max_turns": maxTurns, "budget_s": budgetS, "max_env_steps": maxEnvSteps,
		"cell_timeout_s": c.CellTimeout.Seconds(),
	}
}

// Toolkit returns the episode's tools.
func (e *Episode) Toolkit() Toolkit { return e.tk }

// Kernel returns the episode's kernel.
func (e *Episode) Kernel() *kernel.Kernel { return e.kern }

// Trace returns the episode's notebook.
func (e *Episode) Trace() *notebooks.Trace { return e.trace }

// Prompt returns the prompt (prompt.txt and the card images).
func (e *Episode) Prompt() Prompt { return e.prompt }

// Dir returns the run folder.
func (e *Episode) Dir() string { return e.cfg.Out }

// Config returns the episode's configuration (defaults applied).
func (e *Episode) Config() EpisodeConfig { return e.cfg }

// Finished says whether finish was called or the episode ended.
func (e *Episode) Finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finished
}

// Success is the environment's verdict so far (nil: not known yet).
func (e *Episode) Success() *bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.res.EnvironmentSuccess == nil {
		return nil
	}
	s := *e.res.EnvironmentSuccess
	return &s
}

// SetPlannerAttempts records how many times the runtime had to start the planner.
func (e *Episode) SetPlannerAttempts(n int) {
	e.mu.Lock()
	e.res.PlannerAttempts = n
	e.mu.Unlock()
}

// Context derives the policy's context: it ends at the wall-clock budget (cause ErrBudgetExceeded)
// or when the kernel dies (cause: the kernel's error).
func (e *Episode) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	var stopTimer func() bool
	if e.cfg.Budget > 0 {
		t := time.AfterFunc(time.Until(e.policyStart.Add(e.cfg.Budget)), func() { cancel(ErrBudgetExceeded) })
		stopTimer = t.Stop
	}
	go func() {
		select {
		case <-e.kern.Done():
			err := e.kern.Err()
			if err == nil {
				err = kernel.ErrKernelDied
			}
			cancel(err)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		if stopTimer != nil {
			stopTimer()
		}
		cancel(context.Canceled)
	}
}

// RecordTurn appends one LLM call to turns.jsonl and the episode's accounting.
func (e *Episode) RecordTurn(t Turn) error {
	e.mu.Lock()
	e.usage.Add(t.Usage)
	g := &e.res.Generation
	g.Turns++
	if t.Error != "" {
		g.Errors++
	}
	g.ToolCalls += len(t.ToolCalls)
	g.InputTokens, g.CachedInputTokens = e.usage.InputTokens, e.usage.CachedTokens
	g.OutputTokens, g.ReasoningOutputTokens = e.usage.OutputTokens, e.usage.ReasoningTokens
	g.TotalTokens = e.usage.InputTokens + e.usage.OutputTokens
	g.LatencyS = round3(g.LatencyS + t.LatencyS)
	if t.CostUSD != nil && e.res.CostUSD != nil {
		c := *e.res.CostUSD + *t.CostUSD
		e.res.CostUSD = &c
	}
	e.mu.Unlock()
	if err := e.turnsW.Write(t); err != nil {
		return fmt.Errorf("turns.jsonl: %w", err)
	}
	return e.saveResult()
}

// saveResult writes result.json from the current state.
func (e *Episode) saveResult() error {
	e.mu.Lock()
	r := e.res
	r.Generation.SandboxFlags = append([]string{}, e.res.Generation.SandboxFlags...)
	e.mu.Unlock()
	return writeJSONAtomic(filepath.Join(e.cfg.Out, "result.json"), r)
}

// SetCLI records the agent CLI that drives the episode (codex, claude runtimes).
func (e *Episode) SetCLI(info CLIInfo) {
	e.mu.Lock()
	e.res.CLI = &info
	e.mu.Unlock()
	_ = e.saveResult()
}

// SetUsageTotals replaces the episode's token totals with a runtime's authoritative ones (a CLI's
// own summary), keeping the LLM-call count when the totals do not say.
func (e *Episode) SetUsageTotals(u Usage, costUSD *float64) {
	e.mu.Lock()
	if u.Calls == 0 {
		u.Calls = e.usage.Calls
	}
	e.usage = u
	g := &e.res.Generation
	g.InputTokens, g.CachedInputTokens = u.InputTokens, u.CachedTokens
	g.OutputTokens, g.ReasoningOutputTokens = u.OutputTokens, u.ReasoningTokens
	g.TotalTokens = u.InputTokens + u.OutputTokens
	if u.Calls > g.Turns {
		g.Turns = u.Calls
	}
	if costUSD != nil {
		c := *costUSD
		e.res.CostUSD = &c
	}
	e.mu.Unlock()
	_ = e.saveResult()
}

// Status reports the live episode.
func (e *Episode) Status() EpisodeStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := EpisodeStatus{
		ID: filepath.Base(e.cfg.Out), RunDir: e.cfg.Out, Robot: e.cfg.Robot, Task: e.res.Task, Seed: e.cfg.Seed,
		Arm: e.cfg.Arm, Model: e.cfg.Model, Runtime: e.cfg.Runtime, Status: e.res.Status, Paused: e.gate.isPaused(),
		Turns: e.turns, MaxTurns: e.cfg.MaxTurns, LLMCalls: e.res.Generation.Turns, InputTokens: e.usage.InputTokens,
		HumanCells: e.res.HumanCells, Success: e.res.EnvironmentSuccess, ElapsedS: round3(time.Since(e.createdAt).Seconds()),
		LastTool: e.lastTool, Trace: filepath.Join(e.cfg.Out, "trace.ipynb"),
		Flags: append([]string{}, e.res.Generation.SandboxFlags...),
	}
	if e.kern != nil {
		st.KernelPID = e.kern.Pid()
	}
	return st
}

// Pause holds the next tool call until Resume or Step (a person wants to look or type cells).
func (e *Episode) Pause() { e.gate.pause() }

// Resume lets tool calls run again.
func (e *Episode) Resume() { e.gate.resume() }

// Step lets exactly one tool call through while paused.
func (e *Episode) Step() { e.gate.step() }

// Finish ends the episode: it derives the status (when status is ""), writes result.json and the
// trace's episode metadata, and shuts the kernel down. runErr is what ended the runtime, if anything.
func (e *Episode) Finish(ctx context.Context, status string, runErr error) (*Result, error) {
	e.mu.Lock()
	if e.ended {
		r := e.res
		e.mu.Unlock()
		return &r, nil
	}
	e.ended = true
	e.finished = true
	if status == "" {
		status = e.deriveStatusLocked(runErr)
	}
	e.res.Status = status
	if runErr != nil && status != StatusCompleted {
		e.res.Error = &ErrorField{Type: errorType(runErr), Message: runErr.Error()}
	}
	if e.res.Reason == "" {
		e.res.Reason = e.reasonLocked(status, runErr)
	}
	e.res.Finish = e.finish
	e.res.PolicyWallS = round3(time.Since(e.policyStart).Seconds())
	e.res.TotalWallS = round3(time.Since(e.createdAt).Seconds())
	e.res.FinishedAt = time.Now().UTC().Format(time.RFC3339)
	e.res.PID = 0
	e.mu.Unlock()

	// Let the human-cell watcher record what already ran, then stop it.
	if e.stopHumans != nil {
		e.stopHumans()
		<-e.humansDone
	}
	e.mu.Lock()
	r := e.res
	e.mu.Unlock()
	meta := map[string]any{
		"status": r.Status, "success": r.EnvironmentSuccess, "environment_success": r.EnvironmentSuccess,
		"tool_turns": r.ToolTurns, "llm_calls": r.Generation.Turns, "input_tokens": r.Generation.InputTokens,
		"cached_input_tokens": r.Generation.CachedInputTokens, "output_tokens": r.Generation.OutputTokens,
		"reasoning_output_tokens": r.Generation.ReasoningOutputTokens, "total_tokens": r.Generation.TotalTokens,
		"policy_wall_s": r.PolicyWallS, "env_steps": r.EnvSteps,
	}
	if r.Error != nil {
		meta["error"] = r.Error.Message
	}
	var errs []error
	if err := e.trace.SetEpisodeMeta(meta); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	}
	if err := e.saveResult(); err != nil {
		errs = append(errs, fmt.Errorf("result.json: %w", err))
	}
	_ = e.trace.Close()
	e.turnsW.Close()
	e.callsW.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := e.kern.Shutdown(sctx); err != nil && !errors.Is(err, kernel.ErrShutdown) && !errors.Is(err, kernel.ErrKernelDied) {
		e.log.Warn("kernel shutdown", "err", err)
	}
	return &r, errors.Join(errs...)
}

func (e *Episode) deriveStatusLocked(runErr error) string {
	success := e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess
	switch {
	case errors.Is(runErr, kernel.ErrKernelDied) || (e.kern != nil && isDone(e.kern.Done()) && e.finish == nil && !success):
		return StatusError
	case e.finish != nil && !(e.budgetOut && !success):
		return StatusCompleted
	case errors.Is(runErr, ErrBudgetExceeded):
		return StatusTimeout
	case errors.Is(runErr, context.Canceled):
		return StatusInterrupted
	case errors.Is(runErr, ErrPlanner):
		return StatusPlannerError
	case e.budgetOut && !success:
		return StatusCallBudget
	case runErr != nil && !errors.Is(runErr, ErrNoToolCall):
		return StatusError
	default:
		return StatusCompleted
	}
}

func (e *Episode) reasonLocked(status string, runErr error) string {
	switch {
	case e.finish != nil:
		return "finish:" + e.finish.Status
	case status == StatusCallBudget:
		return "call_budget"
	case status == StatusTimeout:
		return "timeout"
	case e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess:
		return "terminated"
	case errors.Is(runErr, ErrNoToolCall):
		return "no_finish"
	case runErr != nil:
		return "error"
	}
	return "no_finish"
}

func errorType(err error) string {
	switch {
	case errors.Is(err, kernel.ErrKernelDied):
		return "KernelDied"
	case errors.Is(err, ErrBudgetExceeded):
		return "Timeout"
	case errors.Is(err, ErrPlanner):
		return "PlannerError"
	case errors.Is(err, ErrNoToolCall):
		return "NoToolCall"
	case errors.Is(err, ErrKernelRestarted):
		return "KernelRestarted"
	}
	return "Error"
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// gate implements Pause/Resume/Step for tool calls.
type gate struct {
	mu      sync.Mutex
	paused  bool
	steps   int
	changed chan struct{}
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) pause()  { g.mu.Lock(); g.paused = true; g.signalLocked(); g.mu.Unlock() }
func (g *gate) resume() { g.mu.Lock(); g.paused = false; g.steps = 0; g.signalLocked(); g.mu.Unlock() }
func (g *gate) step()   { g.mu.Lock(); g.steps++; g.signalLocked(); g.mu.Unlock() }

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// wait blocks while paused, unless a Step lets this call through.
func (g *gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		if !g.paused {
			g.mu.Unlock()
			return nil
		}
		if g.steps > 0 {
			g.steps--
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

// ID names the episode: its run folder's base name.
func (e *Episode) ID() string { return filepath.Base(e.cfg.Out) }

// Controller adapts the episode to the gateway's EpisodeController (Status() any).
func (e *Episode) Controller() *Controller { return &Controller{e: e} }

// Controller is an episode as /api/episodes sees it.
type Controller struct{ e *Episode }

func (c *Controller) ID() string  { return c.e.ID() }
func (c *Controller) Status() any { return c.e.Status() }
func (c *Controller) Pause()      { c.e.Pause() }
func (c *Controller) Resume()     { c.e.Resume() }
func (c *Controller) Step()       { c.e.Step() }
