package notebooks

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// MetaKey is the namespace of pyrualean's notebook and cell metadata.
const MetaKey = "pyrualean"

// Authors of a cell (cell metadata pyrualean.author).
const (
	AuthorAgent = "agent"
	AuthorHuman = "human"
	AuthorSetup = "setup"
	AuthorTool  = "tool"
)

// ExecTiming holds the four moments nbclient records in a cell's metadata.execution.
type ExecTiming struct {
	ExecuteInput, Busy, ExecuteReply, Idle time.Time
}

// timingFormat is nbclient's timestamp(): "%Y-%m-%dT%H:%M:%S.%fZ" in UTC.
const timingFormat = "2006-01-02T15:04:05.000000Z"

// Metadata returns the metadata.execution object; zero times are left out.
func (t ExecTiming) Metadata() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]time.Time{
		"iopub.execute_input": t.ExecuteInput,
		"iopub.status.busy":   t.Busy,
		"shell.execute_reply": t.ExecuteReply,
		"iopub.status.idle":   t.Idle,
	} {
		if !v.IsZero() {
			m[k] = v.UTC().Format(timingFormat)
		}
	}
	return m
}

// CodeRun is what executing one code cell produced.
type CodeRun struct {
	Outputs        []Output
	ExecutionCount *int
	Timing         ExecTiming
	Tags           []string // metadata.tags (TagRaisesException, TagHuman); none: no tags key
	ID             string   // the cell's id; "" : a fresh one
}

// TraceMeta is the notebook-level metadata of an episode trace.
type TraceMeta struct {
	KernelName        string         // kernelspec name; "pyrualean" when empty
	KernelDisplayName string         // "Python (pyrualean robot)" when empty
	LanguageInfo      map[string]any // from kernel_info_reply; a plain python entry when nil
	// Episode becomes metadata.pyrualean: robot, task, seed, arm, model, runtime, status, success,
	// budgets, tokens, versions, ...
	Episode map[string]any
}

// ErrTraceClosed is returned by a Trace after Close.
var ErrTraceClosed = errors.New("notebooks: trace closed")

// Trace is an episode's notebook on disk. Every change is saved atomically before the call returns,
// so a process killed at any moment leaves a valid notebook holding every finished cell. Safe for
// concurrent use.
type Trace struct {
	path string

	mu     sync.Mutex
	nb     *Notebook
	closed bool
}

// NewTrace creates the trace file at path (replacing any file there) and writes it immediately.
func NewTrace(path string, meta TraceMeta) (*Trace, error) {
	nb := New()
	name, display := meta.KernelName, meta.KernelDisplayName
	if name == "" {
		name = "pyrualean"
	}
	if display == "" {
		display = "Python (pyrualean robot)"
	}
	nb.Metadata["kernelspec"] = map[string]any{"name": name, "display_name": display, "language": "python"}
	li := meta.LanguageInfo
	if li == nil {
		li = map[string]any{"name": "python"}
	}
	nb.Metadata["language_info"] = li
	ep := map[string]any{}
	maps.Copy(ep, meta.Episode)
	ep["versions"] = withBuildVersions(ep["versions"])
	nb.Metadata[MetaKey] = ep
	t := &Trace{path: path, nb: nb}
	removeStaleTemps(path)
	if err := t.saveLocked(); err != nil {
		return nil, err
	}
	return t, nil
}

// OpenTrace continues an existing trace file (e.g. to append after a restart).
func OpenTrace(path string) (*Trace, error) {
	nb, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	removeStaleTemps(path)
	return &Trace{path: path, nb: nb}, nil
}

// removeStaleTemps deletes temp files a killed writer of path left behind.
func removeStaleTemps(path string) { atomicfile.RemoveStale(path) }

// Path is the trace file.
func (t *Trace) Path() string { return t.path }

// cellMeta builds a cell's metadata from the caller's meta, which is normally the value of
// metadata.pyrualean ({author, turn, tool, ...}). A meta that itself holds a "pyrualean" object is
// taken as the whole cell metadata instead.
func cellMeta(meta map[string]any) map[string]any {
	if _, whole := meta[MetaKey].(map[string]any); whole {
		return maps.Clone(meta)
	}
	m := map[string]any{}
	if meta != nil {
		m[MetaKey] = maps.Clone(meta)
	}
	return m
}

// AddMarkdown appends a markdown cell (the task card, an agent message) and saves.
func (t *Trace) AddMarkdown(source string, meta map[string]any) error {
	return t.AddCell(Cell{CellType: CellMarkdown, Source: source, Metadata: cellMeta(meta)})
}

// AddCode appends one executed code cell with its outputs and metadata.execution timings, and saves.
func (t *Trace) AddCode(source string, res CodeRun, meta map[string]any) error {
	m := cellMeta(meta)
	if ex := res.Timing.Metadata(); len(ex) > 0 {
		m["execution"] = ex
	}
	if len(res.Tags) > 0 {
		m["tags"] = append([]string(nil), res.Tags...)
	}
	outs := res.Outputs
	if outs == nil {
		outs = []Output{}
	}
	return t.AddCell(Cell{ID: res.ID, CellType: CellCode, Source: source, Outputs: outs, ExecutionCount: res.ExecutionCount, Metadata: m})
}

// ErrNoSuchCell is returned by PatchCellMeta for an id no cell has.
var ErrNoSuchCell = errors.New("notebooks: no cell with that id")

// PatchCellMeta merges patch into the metadata.pyrualean of the cell with id (a nil value removes the
// key) and saves: what is known of a cell only after it was written (a person's cell's robot ledger).
func (t *Trace) PatchCellMeta(id string, patch map[string]any) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTraceClosed
	}
	for i := range t.nb.Cells {
		c := &t.nb.Cells[i]
		if c.ID != id {
			continue
		}
		// Fresh maps: a Snapshot taken earlier shares the old ones.
		md := maps.Clone(c.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		pm, _ := md[MetaKey].(map[string]any)
		pm = maps.Clone(pm)
		if pm == nil {
			pm = map[string]any{}
		}
		for k, v := range patch {
			if v == nil {
				delete(pm, k)
			} else {
				pm[k] = v
			}
		}
		md[MetaKey] = pm
		c.Metadata = md
		return t.saveLocked()
	}
	return fmt.Errorf("%w: %q", ErrNoSuchCell, id)
}

// AddCell appends any cell (a fresh unique id is given when it has none) and saves. As in nbclient,
// a display_data or execute_result carrying a display id (Output.DisplayID) also replaces the data
// and metadata of the outputs earlier cells showed under that id.
func (t *Trace) AddCell(c Cell) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTraceClosed
	}
	for _, o := range c.Outputs {
		if o.DisplayID != "" && (o.OutputType == OutputDisplayData || o.OutputType == OutputExecuteResult) {
			t.updateDisplayLocked(o.DisplayID, o.Data, o.Metadata)
		}
	}
	t.nb.AppendCell(c)
	return t.saveLocked()
}

// ErrUnknownDisplay is returned by UpdateDisplay for a display id no output in the trace showed.
var ErrUnknownDisplay = errors.New("notebooks: no output with that display id")

// UpdateDisplay applies an update_display_data for a display shown by cells already in the trace:
// every output with that display id gets data and metadata replaced (nbformat semantics), and the
// trace is saved atomically. Display ids are remembered in memory only (they are never written), so
// a trace reopened with OpenTrace knows none. An id no output showed gives ErrUnknownDisplay and
// leaves the file as it is.
func (t *Trace) UpdateDisplay(id string, data MimeBundle, meta map[string]any) error {
	if id == "" {
		return fmt.Errorf("%w: empty display id", ErrUnknownDisplay)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTraceClosed
	}
	if !t.updateDisplayLocked(id, data, meta) {
		return fmt.Errorf("%w: %q", ErrUnknownDisplay, id)
	}
	return t.saveLocked()
}

// updateDisplayLocked replaces data and metadata of every output showing display id; it reports
// whether there was any. Changed cells get fresh output slices, so Snapshots stay as they were.
func (t *Trace) updateDisplayLocked(id string, data MimeBundle, meta map[string]any) bool {
	if data == nil {
		data = MimeBundle{}
	}
	if meta == nil {
		meta = map[string]any{}
	}
	found := false
	for ci := range t.nb.Cells {
		c := &t.nb.Cells[ci]
		cloned := false
		for oi := range c.Outputs {
			if c.Outputs[oi].DisplayID != id {
				continue
			}
			if !cloned {
				c.Outputs = append([]Output(nil), c.Outputs...)
				cloned = true
			}
			c.Outputs[oi].Data, c.Outputs[oi].Metadata = maps.Clone(data), maps.Clone(meta)
			found = true
		}
	}
	return found
}

// SetEpisodeMeta merges patch into metadata.pyrualean (a nil value removes the key) and saves.
func (t *Trace) SetEpisodeMeta(patch map[string]any) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTraceClosed
	}
	ep, _ := t.nb.Metadata[MetaKey].(map[string]any)
	if ep == nil {
		ep = map[string]any{}
		t.nb.Metadata[MetaKey] = ep
	}
	for k, v := range patch {
		if v == nil {
			delete(ep, k)
		} else {
			ep[k] = v
		}
	}
	return t.saveLocked()
}

// SetMetadata sets one top-level notebook metadata key (e.g. language_info once the kernel answered)
// and saves.
func (t *Trace) SetMetadata(key string, value any) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrTraceClosed
	}
	t.nb.Metadata[key] = value
	return t.saveLocked()
}

// Snapshot returns a copy of the notebook as it is now (cells copied; metadata trees shared, read-only).
func (t *Trace) Snapshot() *Notebook {
	t.mu.Lock()
	defer t.mu.Unlock()
	cp := *t.nb
	cp.Metadata = maps.Clone(t.nb.Metadata)
	cp.Cells = append([]Cell(nil), t.nb.Cells...)
	return &cp
}

// Len is the number of cells.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nb.Cells)
}

// Close saves a last time; later changes fail with ErrTraceClosed.
func (t *Trace) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.saveLocked()
}

func (t *Trace) saveLocked() error {
	if err := WriteFileAtomic(t.path, t.nb); err != nil {
		return fmt.Errorf("notebooks: save trace %s: %w", t.path, err)
	}
	return nil
}

// withBuildVersions adds the pyrualean build (module version, VCS revision) and Go version to a
// versions object, keeping what the caller put there.
func withBuildVersions(v any) map[string]any {
	out := map[string]any{}
	if m, ok := v.(map[string]any); ok {
		maps.Copy(out, m)
	}
	if _, ok := out["pyrualean"]; !ok {
		version := "(unknown)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			version = bi.Main.Version
			rev, dirty := "", false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" {
				version += " " + rev
				if dirty {
					version += "+dirty"
				}
			}
		}
		out["pyrualean"] = version
	}
	if _, ok := out["go"]; !ok {
		out["go"] = runtime.Version()
	}
	if _, ok := out["nbformat"]; !ok {
		out["nbformat"] = "4.5"
	}
	return out
}
